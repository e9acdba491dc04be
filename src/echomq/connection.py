"""How a Queue finds its server (docs/design.md §6, "Connection").

The first of these wins:

1. the ``url`` argument,
2. the ``ECHOMQ_URL`` environment variable,
3. the embedded Valkey of the user (:class:`echomq.embedded.EmbeddedServer`),
   started on first use, whose ``unix://`` url is returned.

Urls are ``redis://``, ``rediss://`` (TLS) and ``unix://`` as redis-py reads
them; ``valkey://`` and ``valkeys://`` are accepted as their aliases.

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

import os
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis.crc import key_slot

from echomq import transport
from echomq.errors import InvalidOption, PoolTimeout, ServerError

if TYPE_CHECKING:
    from echomq.embedded import EmbeddedServer

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

#: environment variable naming the server when no url is passed.
URL_ENV = "ECHOMQ_URL"
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

_SCHEMES = ("redis", "rediss", "unix")
_ALIASES = {"valkey": "redis", "valkeys": "rediss"}
_CLUSTER_SCHEMES = {
    "redis+cluster": "redis",
    "rediss+cluster": "rediss",
    "valkey+cluster": "redis",
    "valkeys+cluster": "rediss",
}

#: ``scheme://user:password@`` in any text (greedy: a password may hold an ``@``)
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^/@\s:]*):[^/\s]*@")
#: a ``password=`` query parameter (``unix:///path.sock?password=…``, as redis-py reads it)
_QUERY_PASSWORD = re.compile(r"(?P<head>[?&]password=)[^&\s'\"]*", re.IGNORECASE)


def redact_url(text: str) -> str:
    """``text`` with the password of every url in it replaced by ``***``
    (``scheme://user:password@`` and a ``password=`` query parameter): the one
    place every error message, log line, CLI line and dashboard answer that may
    show a url goes through."""
    return _QUERY_PASSWORD.sub(r"\g<head>***", _URL_PASSWORD.sub(r"\g<head>:***@", text))


#: errors that mean "the server cannot serve us just now", worth trying again: it
#: is unreachable or restarting (a dropped connection; ``LOADING`` while it reads
#: its data back is BusyLoadingError, a ConnectionError), a replica during a
#: failover (READONLY), a cluster re-sharding or failing over, a socket error.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.SlotNotCoveredError,
    OSError,
)

#: what sync_client returns: a single server's client or a cluster client.
SyncClient = redis.Redis | redis.cluster.RedisCluster
#: what async_client returns: a single server's client or a cluster client.
AsyncClient = redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster


def resolve_url(url: str | None = None) -> str:
    """The server url: ``url``, else ``$ECHOMQ_URL``, else the embedded Valkey's socket.

    The embedded server is started (detached, shared by the user's echomq
    processes) if it is not running; that may take up to its start timeout
    the very first time. Raises ServerError if it cannot be started.
    """
    if url:
        return url
    from_env = os.environ.get(URL_ENV, "").strip()
    if from_env:
        return from_env
    # imported here: a process with a url never loads the embedded server's code
    from echomq.embedded import EmbeddedServer

    return EmbeddedServer().ensure_running()


def embedded_for(url: str | None) -> EmbeddedServer | None:
    """The embedded server a queue opened with ``url`` uses (``url``, else
    ``$ECHOMQ_URL``, is unset or names its socket), or None for another server."""
    from echomq.embedded import EmbeddedServer

    server = EmbeddedServer()
    target = url or os.environ.get(URL_ENV, "").strip()
    return server if not target or target == server.url else None


def restart_embedded(url: str | None) -> bool:
    """Start the embedded server again if a queue opened with ``url`` uses it and it
    is not running (stopped by ``echomq server stop``, killed, or the machine
    restarted); True if it was started. Blocks up to its start timeout; raises
    ServerError if it cannot be started."""
    server = embedded_for(url)
    if server is None or server.is_running():
        return False
    server.ensure_running()
    return True


def is_cluster_url(url: str) -> bool:
    """True for a ``redis+cluster://`` (or ``rediss+``/``valkey+``) url."""
    return _scheme(url) in _CLUSTER_SCHEMES


def normalize_url(url: str) -> str:
    """``url`` as redis-py reads it: ``valkey(s)://`` aliases rewritten, a cluster
    url's ``+cluster`` dropped (see is_cluster_url); ServerError for anything unusable."""
    scheme = _scheme(url)
    if scheme in _CLUSTER_SCHEMES:
        return _cluster_node_url(url, scheme)
    if scheme in _ALIASES:
        return _ALIASES[scheme] + url[len(scheme) :]
    if scheme not in _SCHEMES:
        allowed = ", ".join(f"{s}://" for s in (*_SCHEMES, *_ALIASES))
        raise ServerError(
            f"unsupported server url {redact_url(url)!r}: the scheme must be one of {allowed}"
        )
    return url


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


def _cluster_node_url(url: str, scheme: str) -> str:
    """The ``redis(s)://host:port`` of a cluster url's node; ServerError for a socket or db."""
    parts = urlsplit(url)
    if not parts.hostname:
        raise ServerError(
            f"invalid cluster url {redact_url(url)!r}: expected redis+cluster://host:port"
        )
    if parts.path.strip("/") not in ("", "0"):
        raise ServerError(f"invalid cluster url {redact_url(url)!r}: a cluster has only database 0")
    return _CLUSTER_SCHEMES[scheme] + url[len(scheme) :]


def _scheme(url: str) -> str:
    """The lower-cased scheme of ``url``; ServerError if it has none."""
    scheme = urlsplit(url).scheme.lower()
    if not scheme or "://" not in url:
        shown = redact_url(url) if "://" in url else url.rpartition("@")[2]  # no scheme: no user
        raise ServerError(
            f"invalid server url {shown!r}: expected e.g. redis://host:6379/0 or unix:///path.sock"
        )
    return scheme
