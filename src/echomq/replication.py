"""Durable adds: an add returns only once a replica holds the job (``WAIT 1 …``).

Why: Valkey and Redis replicate asynchronously. A primary acknowledges a
write before any replica has it, so if the primary dies in that window the
replica promoted in its place never saw the job, and an add that returned an
id is lost (docs/scaling.md measures how many). ``WAIT numreplicas timeout``
blocks until that many replicas acknowledged every write *of the connection
that sends it*, so the add script and the WAIT must travel on one connection
to the primary that owns the queue's slot: here a two-command pipeline on
that primary's own connection (on a cluster, the node is found from the
queue's first key; the cluster client would send a keyless WAIT to every
primary, on other connections).

What it does not promise: the job survives the loss of the primary, not of
the primary and that replica together; with more than one replica per
primary, the promoted replica may be one that did not acknowledge. A retry
that finds the job already written (its first attempt ran but the reply was
lost) writes nothing, so its WAIT proves only that the replica caught up
with the connection's earlier writes, which on a live primary is a matter of
milliseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis.exceptions import ClusterDownError, MovedError, NoScriptError, TryAgainError

from echomq.connection import AsyncClient, SyncClient
from echomq.engine import Call
from echomq.errors import NotReplicated
from echomq.options import check_seconds

__all__ = [
    "DEFAULT_TIMEOUT",
    "REPLICAS",
    "check_timeout",
    "checked",
    "send_and_wait",
    "send_and_wait_sync",
]

#: replicas a durable add waits for.
REPLICAS = 1
#: seconds a durable add waits for them by default.
DEFAULT_TIMEOUT = 5.0
#: longest wait allowed (it must stay below the client's socket timeout).
MAX_TIMEOUT = 8.0
#: attempts on a cluster whose topology changes under the add (failover, resharding).
CLUSTER_ATTEMPTS = 12
_RETRY_CAP = 1.0
_RETRY_BASE = 0.02

#: replies that mean "the script did not run here; ask the cluster again".
_REROUTE = (MovedError, ClusterDownError, TryAgainError, redis.ConnectionError, redis.TimeoutError)

_TOPOLOGY_ERRORS = (redis.RedisError, redis.exceptions.RedisClusterException)

Replies = tuple[Any, Any]  # the script's reply, WAIT's reply (either may be an exception)


def check_timeout(timeout: object) -> float:
    """A durable wait in seconds, > 0 and ≤ MAX_TIMEOUT (InvalidOption otherwise)."""
    return check_seconds("durable_timeout", timeout, 0.0, MAX_TIMEOUT, open_low=True)


def checked(ids: Sequence[str], acknowledged: int, timeout: float) -> list[str]:
    """``ids`` if at least REPLICAS replicas acknowledged; NotReplicated otherwise."""
    if acknowledged < REPLICAS:
        raise NotReplicated(ids, REPLICAS, timeout)
    return list(ids)


async def send_and_wait(client: AsyncClient, call: Call[Any], timeout: float) -> tuple[Any, int]:
    """Run ``call``'s script and ``WAIT`` on one connection; (raw reply, replicas that acked)."""
    if not isinstance(client, redis.asyncio.cluster.RedisCluster):
        return _unpack(await _pipeline_async(client, call, timeout))
    for attempt in range(CLUSTER_ATTEMPTS):
        try:
            await client.initialize()  # a no-op once the topology is known
            node = client.get_node_from_key(call.keys[0])
            if node is None:
                raise redis.ConnectionError(f"no node serves the slot of {call.keys[0]!r}")
            replies = await _node_pipeline_async(node, call, timeout)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            replies = (exc, exc)
        if not _must_reroute(replies) or attempt == CLUSTER_ATTEMPTS - 1:
            return _unpack(replies)
        await asyncio.sleep(_backoff(attempt))
        await _refresh_async(client)
    raise AssertionError("unreachable")


def send_and_wait_sync(client: SyncClient, call: Call[Any], timeout: float) -> tuple[Any, int]:
    """The blocking send_and_wait."""
    if not isinstance(client, redis.cluster.RedisCluster):
        return _unpack(_pipeline(client, call, timeout))
    for attempt in range(CLUSTER_ATTEMPTS):
        try:
            node = client.get_node_from_key(call.keys[0])  # type: ignore[no-untyped-call]
            replies = _pipeline(client.get_redis_connection(node), call, timeout)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            replies = (exc, exc)
        if not _must_reroute(replies) or attempt == CLUSTER_ATTEMPTS - 1:
            return _unpack(replies)
        time.sleep(_backoff(attempt))
        _refresh(client)
    raise AssertionError("unreachable")


# -- one connection: the script (EVALSHA, EVAL on NOSCRIPT), then WAIT -------------


def _commands(call: Call[Any], timeout: float, *, by_sha: bool) -> list[tuple[Any, ...]]:
    if call.script is None:
        raise ValueError("only script calls can be made durable")
    return [call.wire(by_sha=by_sha), ("WAIT", REPLICAS, round(timeout * 1000))]


def _pipeline(client: redis.Redis, call: Call[Any], timeout: float) -> Replies:
    def send(by_sha: bool) -> Replies:
        with client.pipeline(transaction=False) as pipe:
            for command in _commands(call, timeout, by_sha=by_sha):
                pipe.execute_command(*command)  # type: ignore[no-untyped-call]
            first, second = pipe.execute(raise_on_error=False)
        return first, second

    return _with_script_fallback(send)


async def _pipeline_async(client: redis.asyncio.Redis, call: Call[Any], timeout: float) -> Replies:
    async def send(by_sha: bool) -> Replies:
        async with client.pipeline(transaction=False) as pipe:
            for command in _commands(call, timeout, by_sha=by_sha):
                pipe.execute_command(*command)
            first, second = await pipe.execute(raise_on_error=False)
        return first, second

    return await _with_script_fallback_async(send)


async def _node_pipeline_async(
    node: redis.asyncio.cluster.ClusterNode, call: Call[Any], timeout: float
) -> Replies:
    """The pipeline on one connection of one cluster node (no redirection: the caller
    decides what a MOVED means, since a redirected script makes the WAIT meaningless)."""

    async def send(by_sha: bool) -> Replies:
        commands = [
            redis.asyncio.cluster.PipelineCommand(i, *command)
            for i, command in enumerate(_commands(call, timeout, by_sha=by_sha))
        ]
        await node.execute_pipeline(commands)
        return commands[0].result, commands[1].result

    return await _with_script_fallback_async(send)


def _with_script_fallback(send: Callable[[bool], Replies]) -> Replies:
    """EVALSHA first; EVAL (which caches the script on that node) after NOSCRIPT."""
    replies = send(True)
    return send(False) if isinstance(replies[0], NoScriptError) else replies


async def _with_script_fallback_async(send: Callable[[bool], Awaitable[Replies]]) -> Replies:
    replies = await send(True)
    return await send(False) if isinstance(replies[0], NoScriptError) else replies


# -- replies and topology ----------------------------------------------------------


def _unpack(replies: Replies) -> tuple[Any, int]:
    """Raise the script's error, else WAIT's; else (reply, acknowledgements)."""
    reply, acknowledged = replies
    for result in replies:
        if isinstance(result, Exception):
            raise result
    return reply, int(acknowledged)


def _must_reroute(replies: Replies) -> bool:
    """The script did not run here, or it ran but the connection died before WAIT
    answered: either way nothing is acknowledged, and the add may be sent again
    (add-12.lua leaves a job whose id already exists as it is)."""
    return any(isinstance(reply, _REROUTE) for reply in replies)


def _backoff(attempt: int) -> float:
    return float(min(_RETRY_CAP, _RETRY_BASE * 2**attempt))


def _refresh(client: redis.cluster.RedisCluster) -> None:
    """Re-read the topology; if no node answers yet, the next attempt tries again."""
    with contextlib.suppress(*_TOPOLOGY_ERRORS):
        client.nodes_manager.initialize()


async def _refresh_async(client: redis.asyncio.cluster.RedisCluster) -> None:
    with contextlib.suppress(*_TOPOLOGY_ERRORS):
        await client.nodes_manager.initialize()
