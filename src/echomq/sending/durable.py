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
from typing import Any, TypeVar

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis.exceptions import ClusterDownError, MovedError, TryAgainError

from echomq.call import Call
from echomq.connection import AsyncClient, SyncClient
from echomq.errors import NotReplicated
from echomq.sending import pipelines, scripts
from echomq.sending.scripts import ScriptForm

T = TypeVar("T")

#: replicas a durable add waits for.
REPLICAS = 1
#: attempts on a cluster whose topology changes under the add (failover, resharding).
CLUSTER_ATTEMPTS = 12
RETRY_CAP = 1.0
RETRY_BASE = 0.02

#: replies that mean "the script did not run here; ask the cluster again".
REROUTE = (MovedError, ClusterDownError, TryAgainError, redis.ConnectionError, redis.TimeoutError)

TOPOLOGY_ERRORS = (redis.RedisError, redis.exceptions.RedisClusterException)


def _with_wait(call: Call[Any]) -> list[Call[Any]]:
    """The call, then WAIT for the replicas on the same connection."""
    if call.script is None or call.durable is None:
        raise ValueError("only durable script calls wait for replicas")
    wait: Call[int] = Call(parse=int, command=("WAIT", REPLICAS, round(call.durable * 1000)))
    return [call, wait]


async def send_async(client: AsyncClient, form: ScriptForm, call: Call[T]) -> T:
    """Run ``call``'s script and ``WAIT`` on one connection; its parsed reply, or
    NotReplicated if no replica acknowledged it in time."""
    calls = _with_wait(call)
    if not isinstance(client, redis.asyncio.cluster.RedisCluster):
        return _checked(call, await _send_async(pipelines.on_async_client(client), form, calls))
    for attempt in range(CLUSTER_ATTEMPTS):
        try:
            on_node = await _on_node_async(client, call.keys[0])
            replies = await _send_async(on_node, form, calls)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            replies = [exc, exc]
        if not _must_reroute(replies) or attempt == CLUSTER_ATTEMPTS - 1:
            return _checked(call, replies)
        await asyncio.sleep(_backoff(attempt))
        with contextlib.suppress(*TOPOLOGY_ERRORS):  # no node answers yet: try again next time
            await client.nodes_manager.initialize()
    raise AssertionError("unreachable")


async def _send_async(
    execute: scripts.AsyncExecute, form: ScriptForm, calls: list[Call[Any]]
) -> list[Any]:
    """``calls`` on one connection; the library, if missing, is loaded on that connection."""
    return await scripts.send_async(execute, pipelines.load_with_async(execute), form, calls)


# generated from send_async by tools/unasync.py: edit that, then run it
def send(client: SyncClient, form: ScriptForm, call: Call[T]) -> T:
    """Run ``call``'s script and ``WAIT`` on one connection; its parsed reply, or
    NotReplicated if no replica acknowledged it in time."""
    calls = _with_wait(call)
    if not isinstance(client, redis.cluster.RedisCluster):
        return _checked(call, _send(pipelines.on_client(client), form, calls))
    for attempt in range(CLUSTER_ATTEMPTS):
        try:
            on_node = _on_node(client, call.keys[0])
            replies = _send(on_node, form, calls)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            replies = [exc, exc]
        if not _must_reroute(replies) or attempt == CLUSTER_ATTEMPTS - 1:
            return _checked(call, replies)
        time.sleep(_backoff(attempt))
        with contextlib.suppress(*TOPOLOGY_ERRORS):  # no node answers yet: try again next time
            client.nodes_manager.initialize()
    raise AssertionError("unreachable")


# end generated


# generated from _send_async by tools/unasync.py: edit that, then run it
def _send(execute: scripts.Execute, form: ScriptForm, calls: list[Call[Any]]) -> list[Any]:
    """``calls`` on one connection; the library, if missing, is loaded on that connection."""
    return scripts.send(execute, pipelines.load_with(execute), form, calls)


# end generated


async def _on_node_async(
    client: redis.asyncio.cluster.RedisCluster, key: str
) -> scripts.AsyncExecute:
    """Execute on the primary that serves ``key``'s slot (the topology read first)."""
    await client.initialize()  # a no-op once the topology is known
    node = client.get_node_from_key(key)
    if node is None:
        raise redis.ConnectionError(f"no node serves the slot of {key!r}")
    return pipelines.on_cluster_node(node)


def _on_node(client: redis.cluster.RedisCluster, key: str) -> scripts.Execute:
    """Execute on the primary that serves ``key``'s slot."""
    node = client.get_node_from_key(key)  # type: ignore[no-untyped-call]
    return pipelines.on_client(client.get_redis_connection(node))


def _checked(call: Call[T], replies: list[Any]) -> T:
    """Raise the script's error, else WAIT's; NotReplicated if too few replicas acked."""
    reply, acknowledged = (pipelines.raised(r) for r in replies)
    result = call.parse(reply)
    if int(acknowledged) < REPLICAS:
        written = result if isinstance(result, list) else [result]
        raise NotReplicated([str(x) for x in written], REPLICAS, call.durable or 0.0)
    return result


def _must_reroute(replies: list[Any]) -> bool:
    """The script did not run here, or it ran but the connection died before WAIT
    answered: either way nothing is acknowledged, and the add may be sent again
    (add.lua leaves a job whose id already exists as it is)."""
    return any(isinstance(reply, REROUTE) for reply in replies)


def _backoff(attempt: int) -> float:
    return float(min(RETRY_CAP, RETRY_BASE * 2**attempt))
