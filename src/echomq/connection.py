"""The clients a Queue talks to its server with (docs/design.md §6, "Connection").

Which server that is (the ``url`` argument, else ``ECHOMQ_URL``, else the
embedded Valkey) and how a url is read and shown without its password is
echomq.urls; its names are re-exported here.

``redis+cluster://host:port`` (also ``rediss+cluster``, ``valkey+cluster``,
``valkeys+cluster``) names any one node of a Valkey/Redis Cluster and gives
redis-py's cluster clients, which discover the other nodes, route every
command by its key's slot, follow MOVED/ASK and re-read the topology after a
failover. Every key of a queue shares the hash tag ``{queue}``, so each
script runs on the one primary that owns the queue's slot; a primary without
echomq's function library gets it loaded on first use (echomq.sending.scripts).
A cluster has only database 0.

Connections come from a bounded, blocking pool: at most ``max_connections``
(default DEFAULT_MAX_CONNECTIONS, ``Queue(..., max_connections=)``) are open
at once, and a call that finds them all in use waits up to POOL_TIMEOUT
seconds for one to come free (redis-py's BlockingConnectionPool; a cluster
client's per-node pools are of that class for blocking code, and for asyncio,
whose cluster nodes cannot block, the sender bounds the calls in flight:
echomq.sending.sender). Past that wait the call raises
:class:`~echomq.errors.PoolTimeout`, never redis-py's MaxConnectionsError.

Both clients decode replies to ``str`` (keys and payloads are UTF-8 JSON),
use bounded socket timeouts so a dead or paused server surfaces as an error
instead of a hang, and ping idle connections before reuse so a restarted
server is reconnected transparently. redis-py uses hiredis when installed.
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis.crc import key_slot

from echomq import transport
from echomq.errors import TRANSIENT_ERRORS, InvalidOption, PoolTimeout, ServerError
from echomq.urls import (
    URL_ENV,
    embedded_for,
    is_cluster_url,
    normalize_url,
    redact_url,
    resolve_url,
    restart_embedded,
)

__all__ = [
    "CONNECT_TIMEOUT",
    "DEFAULT_MAX_CONNECTIONS",
    "HEALTH_CHECK_INTERVAL",
    "POOL_TIMEOUT",
    "SOCKET_TIMEOUT",
    "TRANSIENT_ERRORS",
    "URL_ENV",
    "AsyncClient",
    "SyncClient",
    "async_client",
    "check_max_connections",
    "embedded_for",
    "is_cluster_url",
    "normalize_url",
    "pool_timeout",
    "pool_timeout_error",
    "redact_url",
    "resolve_url",
    "restart_embedded",
    "socket_timeout_of",
    "sync_client",
]

#: seconds a command may wait for its reply; blocking waits must use less.
SOCKET_TIMEOUT = 10.0
#: seconds to establish a connection.
CONNECT_TIMEOUT = 5.0
#: a connection idle longer than this many seconds is pinged before reuse.
HEALTH_CHECK_INTERVAL = 30
#: connections one client may hold at once unless ``max_connections`` says otherwise.
DEFAULT_MAX_CONNECTIONS = 100
#: the allowed range of ``max_connections``.
MAX_CONNECTIONS_RANGE = (2, 10_000)
#: seconds a call waits for a free connection of a full pool before PoolTimeout.
POOL_TIMEOUT = SOCKET_TIMEOUT
#: what redis-py's blocking pools raise when no connection came free in time.
_POOL_EMPTY = "No connection available."


#: what sync_client returns: a single server's client or a cluster client.
SyncClient = redis.Redis | redis.cluster.RedisCluster
#: what async_client returns: a single server's client or a cluster client.
AsyncClient = redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster


#: commands whose keys redis-py's cluster client would ask the server for
#: (COMMAND GETKEYS: one more round trip per call, on a connection of the
#: default node) where echomq knows them: FCALL name numkeys key ...
_FUNCTION_CALLS = frozenset({"FCALL", "FCALL_RO"})


class ClusterClient(redis.cluster.RedisCluster):
    """A cluster client that routes a function call by its first key, as redis-py
    routes EVALSHA: every key of an echomq call shares the queue's hash tag."""

    def determine_slot(self, *args: Any) -> int | None:
        if len(args) > 3 and str(args[0]).upper() in _FUNCTION_CALLS and int(args[2]) > 0:
            return key_slot(str(args[3]).encode())
        slot: int | None = super().determine_slot(*args)
        return slot

    def close(self) -> None:
        """Close every node's connections. redis-py's ``close`` releases only each
        node client's own connection: a client made by ``from_url`` gives every node
        a pool it does not close, so their sockets stayed open until collected."""
        manager = getattr(self, "nodes_manager", None)  # unset if __init__ failed
        nodes = list(manager.nodes_cache.values()) if manager else []
        super().close()
        for node in nodes:
            if node.redis_connection is not None:
                node.redis_connection.connection_pool.disconnect()


class AsyncClusterClient(redis.asyncio.cluster.RedisCluster):
    """The asyncio twin of ClusterClient."""

    async def _determine_slot(self, command: str, *args: Any) -> int:
        if len(args) > 2 and command.upper() in _FUNCTION_CALLS and int(args[1]) > 0:
            return key_slot(str(args[2]).encode())
        return await super()._determine_slot(command, *args)


def sync_client(
    url: str | None = None,
    *,
    socket_timeout: float = SOCKET_TIMEOUT,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
) -> SyncClient:
    """A blocking redis-py client on the resolved server or cluster, with a blocking
    pool of at most ``max_connections`` connections (per node on a cluster).

    A single server's client connects on first use; a cluster client reads
    the cluster's topology from the named node at once (ServerError if that
    fails).
    """
    resolved = resolve_url(url)
    target = normalize_url(resolved)
    pooled = {"max_connections": max_connections, "timeout": POOL_TIMEOUT}
    if not is_cluster_url(resolved):
        pool = redis.BlockingConnectionPool.from_url(target, **pooled, **_options(socket_timeout))
        client = redis.Redis(connection_pool=pool)
        client.auto_close_connection_pool = True  # the client owns its pool
        return client
    try:
        return ClusterClient.from_url(
            target,
            connection_pool_class=redis.BlockingConnectionPool,
            **pooled,
            **_options(socket_timeout),
        )
    except (redis.RedisError, redis.exceptions.RedisClusterException) as exc:
        raise ServerError(redact_url(f"cannot reach the cluster at {resolved!r}: {exc}")) from exc


def async_client(
    url: str | None = None,
    *,
    socket_timeout: float = SOCKET_TIMEOUT,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
) -> AsyncClient:
    """An asyncio redis-py client on the resolved server or cluster (no connection is
    made yet; a cluster client reads the topology on its first command).

    A single server's client has a blocking pool of at most ``max_connections``;
    a cluster client's nodes cannot block (redis-py raises at once when a node's
    pool is full), so their pools are left unbounded here and the sender bounds
    the calls in flight to ``max_connections`` instead (echomq.sending.sender).

    Resolving may start the embedded server, which blocks briefly; it happens
    once per user session, not per call.
    """
    resolved = resolve_url(url)
    target = normalize_url(resolved)
    if is_cluster_url(resolved):
        cluster = AsyncClusterClient.from_url(
            target, max_connections=UNBOUNDED_NODE_POOL, **_options(socket_timeout)
        )
        # nodes found on discovery open echomq's connections (echomq.transport)
        kwargs = cluster.nodes_manager.connection_kwargs
        kwargs["connection_class"] = transport.upgraded(kwargs["connection_class"])
        return cluster
    pool = redis.asyncio.BlockingConnectionPool.from_url(
        target, max_connections=max_connections, timeout=POOL_TIMEOUT, **_options(socket_timeout)
    )
    transport.upgrade(pool)
    return redis.asyncio.Redis.from_pool(pool)  # the client owns (and closes) its pool


#: an asyncio cluster node's pool size: the sender bounds the calls in flight instead.
UNBOUNDED_NODE_POOL = 2**31 - 1


def pool_timeout(max_connections: int) -> PoolTimeout:
    """The error of a call that found all ``max_connections`` connections in use
    for POOL_TIMEOUT seconds."""
    low, high = MAX_CONNECTIONS_RANGE
    return PoolTimeout(
        f"no connection came free within {POOL_TIMEOUT:g} s: all {max_connections} "
        "connections of the queue's pool are in use (raise Queue(..., max_connections=N), "
        f"allowed {low} … {high}, or make fewer calls at once)"
    )


def pool_timeout_error(exc: BaseException, max_connections: int) -> PoolTimeout | None:
    """The PoolTimeout that redis-py's ``exc`` stands for (a blocking pool that had
    no free connection within POOL_TIMEOUT, or a full pool), else None."""
    if isinstance(exc, redis.exceptions.MaxConnectionsError) or (
        isinstance(exc, redis.exceptions.ConnectionError) and str(exc) == _POOL_EMPTY
    ):
        return pool_timeout(max_connections)
    return None


def check_max_connections(value: object) -> int:
    """``value`` if it is an allowed ``max_connections``, else InvalidOption naming it."""
    low, high = MAX_CONNECTIONS_RANGE
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidOption(
            f"max_connections {value!r} is out of range; allowed integers {low} … {high}"
        )
    return value


def socket_timeout_of(client: SyncClient | AsyncClient) -> float | None:
    """The socket timeout ``client``'s connections use (None: no timeout).

    Blocking commands (the worker's BLPOP) must end before it would cut them.
    """
    if isinstance(client, redis.asyncio.cluster.RedisCluster):
        options = client.nodes_manager.connection_kwargs  # known before the first command
    elif isinstance(client, redis.cluster.RedisCluster):
        node = client.get_default_node()  # type: ignore[no-untyped-call]
        if node is None or node.redis_connection is None:
            return None
        options = node.redis_connection.get_connection_kwargs()
    else:
        options = client.get_connection_kwargs()
    timeout = options.get("socket_timeout")
    return float(timeout) if timeout else None


def _options(socket_timeout: float) -> dict[str, Any]:
    """Client options shared by the sync and async clients (TCP keepalive is redis-py's default)."""
    return {
        "decode_responses": True,
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": CONNECT_TIMEOUT,
        "health_check_interval": HEALTH_CHECK_INTERVAL,
    }
