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


def on_async_client(client: redis.asyncio.Redis) -> AsyncExecute:
    """Execute on one connection of a single-server asyncio client."""

    async def execute(commands: list[tuple[Any, ...]]) -> list[Any]:
        async with client.pipeline(transaction=False) as pipe:
            for command in commands:
                pipe.execute_command(*command)  # type: ignore[no-untyped-call, unused-ignore]
            return await pipe.execute(raise_on_error=False)

    return execute


# generated from on_async_client by tools/unasync.py: edit that, then run it
def on_client(client: redis.Redis) -> Execute:
    """Execute on one connection of a single-server blocking client."""

    def execute(commands: list[tuple[Any, ...]]) -> list[Any]:
        with client.pipeline(transaction=False) as pipe:
            for command in commands:
                pipe.execute_command(*command)  # type: ignore[no-untyped-call, unused-ignore]
            return pipe.execute(raise_on_error=False)

    return execute


# end generated


def on_cluster_node(node: redis.asyncio.cluster.ClusterNode) -> AsyncExecute:
    """Execute on one connection of one cluster node, with no redirection: the
    caller decides what a MOVED means."""

    async def execute(commands: list[tuple[Any, ...]]) -> list[Any]:
        sent = [redis.asyncio.cluster.PipelineCommand(i, *c) for i, c in enumerate(commands)]
        await node.execute_pipeline(sent)
        return [command.result for command in sent]

    return execute


#: commands without a key that load code: on a cluster client they go to every primary.
_LOADS = frozenset({"SCRIPT", "FUNCTION"})


def _worst(replies: list[Any]) -> Any:
    """The first error that is not "already exists" (another client loaded the code
    first), else the first reply that is not an error (a SHA1, a library name), else OK."""
    for reply in replies:
        if isinstance(reply, Exception) and "already exists" not in str(reply):
            return reply
    return next((r for r in replies if not isinstance(r, Exception)), "OK")


def one_by_one_async(
    client: redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster,
) -> AsyncExecute:
    """Execute each command as its own call (a cluster client routes each by its key,
    and sends SCRIPT/FUNCTION LOAD to every primary, as a call goes to its queue's
    node); a server's error reply comes back as a value, a connection error raises
    (of a load on a cluster: comes back as a value, so the calls go by EVAL)."""

    async def on_primaries(
        cluster: redis.asyncio.cluster.RedisCluster, command: tuple[Any, ...]
    ) -> Any:
        replies: list[Any] = []
        for node in cluster.get_primaries():  # type: ignore[no-untyped-call, unused-ignore]
            try:
                replies.append(await cluster.execute_command(*command, target_nodes=node))  # type: ignore[no-untyped-call, unused-ignore]
            except RedisError as exc:
                replies.append(exc)
        return _worst(replies)

    async def execute(commands: list[tuple[Any, ...]]) -> list[Any]:
        replies: list[Any] = []
        for command in commands:
            try:
                if isinstance(client, redis.asyncio.cluster.RedisCluster) and command[0] in _LOADS:
                    replies.append(await on_primaries(client, command))
                else:
                    replies.append(await client.execute_command(*command))  # type: ignore[no-untyped-call, unused-ignore]
            except ResponseError as exc:
                replies.append(exc)
        return replies

    return execute


# generated from one_by_one_async by tools/unasync.py: edit that, then run it
def one_by_one(
    client: redis.Redis | redis.cluster.RedisCluster,
) -> Execute:
    """Execute each command as its own call (a cluster client routes each by its key,
    and sends SCRIPT/FUNCTION LOAD to every primary, as a call goes to its queue's
    node); a server's error reply comes back as a value, a connection error raises
    (of a load on a cluster: comes back as a value, so the calls go by EVAL)."""

    def on_primaries(cluster: redis.cluster.RedisCluster, command: tuple[Any, ...]) -> Any:
        replies: list[Any] = []
        for node in cluster.get_primaries():  # type: ignore[no-untyped-call, unused-ignore]
            try:
                replies.append(cluster.execute_command(*command, target_nodes=node))  # type: ignore[no-untyped-call, unused-ignore]
            except RedisError as exc:
                replies.append(exc)
        return _worst(replies)

    def execute(commands: list[tuple[Any, ...]]) -> list[Any]:
        replies: list[Any] = []
        for command in commands:
            try:
                if isinstance(client, redis.cluster.RedisCluster) and command[0] in _LOADS:
                    replies.append(on_primaries(client, command))
                else:
                    replies.append(client.execute_command(*command))  # type: ignore[no-untyped-call, unused-ignore]
            except ResponseError as exc:
                replies.append(exc)
        return replies

    return execute


# end generated


def load_with_async(execute: AsyncExecute) -> AsyncLoad:
    """Load the library with ``execute`` (where the calls it sends go); "already
    exists" (another client loaded it first) is success."""

    async def load() -> Any:
        return _worst(await execute([load_command()]))

    return load


# generated from load_with_async by tools/unasync.py: edit that, then run it
def load_with(execute: Execute) -> Load:
    """Load the library with ``execute`` (where the calls it sends go); "already
    exists" (another client loaded it first) is success."""

    def load() -> Any:
        return _worst(execute([load_command()]))

    return load


# end generated


def raised(reply: Any) -> Any:
    """``reply``, or raise it if it is an error."""
    if isinstance(reply, Exception):
        raise reply
    return reply
