"""Ways to send raw commands on one connection (one round trip for several), and to load
the function library where they go.

Each ``Execute`` sends commands and returns their replies in order, errors as
values; each ``Load`` loads the library where those commands go and returns
the server's reply. echomq.sending.scripts uses the pair for its one rule
(the server does not know a script or function yet).
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis.exceptions import RedisError, ResponseError

from echomq.sending.scripts import AsyncExecute, AsyncLoad, Execute, Load, load_command


def on_client(client: redis.Redis) -> Execute:
    """Execute on one connection of a single-server client."""

    def execute(commands: list[tuple[Any, ...]]) -> list[Any]:
        with client.pipeline(transaction=False) as pipe:
            for command in commands:
                pipe.execute_command(*command)  # type: ignore[no-untyped-call]
            return pipe.execute(raise_on_error=False)

    return execute


def on_async_client(client: redis.asyncio.Redis) -> AsyncExecute:
    """Execute on one connection of a single-server asyncio client."""

    async def execute(commands: list[tuple[Any, ...]]) -> list[Any]:
        async with client.pipeline(transaction=False) as pipe:
            for command in commands:
                pipe.execute_command(*command)
            return await pipe.execute(raise_on_error=False)

    return execute


def on_cluster_node(node: redis.asyncio.cluster.ClusterNode) -> AsyncExecute:
    """Execute on one connection of one cluster node, with no redirection: the
    caller decides what a MOVED means."""

    async def execute(commands: list[tuple[Any, ...]]) -> list[Any]:
        sent = [redis.asyncio.cluster.PipelineCommand(i, *c) for i, c in enumerate(commands)]
        await node.execute_pipeline(sent)
        return [command.result for command in sent]

    return execute


def one_by_one(client: redis.Redis | redis.cluster.RedisCluster) -> Execute:
    """Execute each command as its own call (a cluster client routes each by its key);
    a server's error reply comes back as a value, a connection error raises."""

    def execute(commands: list[tuple[Any, ...]]) -> list[Any]:
        replies: list[Any] = []
        for command in commands:
            try:
                replies.append(client.execute_command(*command))  # type: ignore[no-untyped-call]
            except ResponseError as exc:
                replies.append(exc)
        return replies

    return execute


def one_by_one_async(
    client: redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster,
) -> AsyncExecute:
    """The asyncio :func:`one_by_one`."""

    async def execute(commands: list[tuple[Any, ...]]) -> list[Any]:
        replies: list[Any] = []
        for command in commands:
            try:
                replies.append(await client.execute_command(*command))
            except ResponseError as exc:
                replies.append(exc)
        return replies

    return execute


def load_with(execute: Execute) -> Load:
    """Load the library with ``execute`` (where the calls it sends go)."""
    return lambda: execute([load_command()])[0]


def load_with_async(execute: AsyncExecute) -> AsyncLoad:
    """The asyncio :func:`load_with`."""

    async def load() -> Any:
        return (await execute([load_command()]))[0]

    return load


def _worst(replies: list[Any]) -> Any:
    """The first error that is not "already exists", else "OK"."""
    for reply in replies:
        if isinstance(reply, Exception) and "already exists" not in str(reply):
            return reply
    return "OK"


def load_on_primaries(client: redis.cluster.RedisCluster) -> Load:
    """Load the library on every primary of a cluster (a call goes to its queue's node).
    A primary that fails to answer makes the reply an error: the calls then go by EVAL."""

    def load() -> Any:
        replies: list[Any] = []
        for node in client.get_primaries():  # type: ignore[no-untyped-call]
            try:
                replies.append(client.execute_command(*load_command(), target_nodes=node))  # type: ignore[no-untyped-call]
            except RedisError as exc:
                replies.append(exc)
        return _worst(replies)

    return load


def load_on_primaries_async(client: redis.asyncio.cluster.RedisCluster) -> AsyncLoad:
    """The asyncio :func:`load_on_primaries`."""

    async def load() -> Any:
        replies: list[Any] = []
        for node in client.get_primaries():
            try:
                replies.append(await client.execute_command(*load_command(), target_nodes=node))
            except RedisError as exc:
                replies.append(exc)
        return _worst(replies)

    return load


def raised(reply: Any) -> Any:
    """``reply``, or raise it if it is an error."""
    if isinstance(reply, Exception):
        raise reply
    return reply
