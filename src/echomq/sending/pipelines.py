"""Several calls on one connection, in one round trip, and the NOSCRIPT rule for them.

A server that does not know a script yet (first use, a restart, a failover)
answers EVALSHA with NOSCRIPT. In a pipeline, the call that got it and
everything after it are sent again, scripts by EVAL (which caches the script
on that server): what came before it already ran, and must not run twice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.cluster
from redis.exceptions import NoScriptError

from echomq.call import Call

#: sends raw commands on one connection; replies come back in order, errors as values.
Execute = Callable[[list[tuple[Any, ...]]], list[Any]]
AsyncExecute = Callable[[list[tuple[Any, ...]]], Awaitable[list[Any]]]


def _first_unknown_script(replies: Sequence[Any]) -> int | None:
    for i, reply in enumerate(replies):
        if isinstance(reply, NoScriptError):
            return i
    return None


def send(execute: Execute, calls: Sequence[Call[Any]]) -> list[Any]:
    """The raw replies of ``calls`` sent together (errors as values)."""
    replies = execute([call.wire() for call in calls])
    unknown = _first_unknown_script(replies)
    if unknown is not None:
        replies[unknown:] = execute([call.wire(by_sha=False) for call in calls[unknown:]])
    return replies


async def send_async(execute: AsyncExecute, calls: Sequence[Call[Any]]) -> list[Any]:
    """The asyncio :func:`send`."""
    replies = await execute([call.wire() for call in calls])
    unknown = _first_unknown_script(replies)
    if unknown is not None:
        replies[unknown:] = await execute([call.wire(by_sha=False) for call in calls[unknown:]])
    return replies


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


def raised(reply: Any) -> Any:
    """``reply``, or raise it if it is an error."""
    if isinstance(reply, Exception):
        raise reply
    return reply
