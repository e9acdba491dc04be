"""How a Queue finds its server (DESIGN §6, "Connection").

The first of these wins:

1. the ``url`` argument,
2. the ``ECHOMQ_URL`` environment variable,
3. the embedded Valkey of the user (:class:`echomq.embedded.EmbeddedServer`),
   started on first use, whose ``unix://`` url is returned.

Urls are ``redis://``, ``rediss://`` (TLS) and ``unix://`` as redis-py reads
them; ``valkey://`` and ``valkeys://`` are accepted as their aliases. Cluster
urls (``redis+cluster://``) are recognised and refused with a clear error
until cluster support lands.

Both clients decode replies to ``str`` (keys and payloads are UTF-8 JSON),
use bounded socket timeouts so a dead or paused server surfaces as an error
instead of a hang, and ping idle connections before reuse so a restarted
server is reconnected transparently. redis-py uses hiredis when installed.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

import redis
import redis.asyncio

from echomq.embedded import EmbeddedServer
from echomq.errors import ServerError

__all__ = [
    "CONNECT_TIMEOUT",
    "HEALTH_CHECK_INTERVAL",
    "SOCKET_TIMEOUT",
    "URL_ENV",
    "async_client",
    "is_cluster_url",
    "normalize_url",
    "resolve_url",
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

_SCHEMES = ("redis", "rediss", "unix")
_ALIASES = {"valkey": "redis", "valkeys": "rediss"}
_CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster", "valkey+cluster", "valkeys+cluster")


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
    return EmbeddedServer().ensure_running()


def is_cluster_url(url: str) -> bool:
    """True for a ``redis+cluster://`` (or ``rediss+``/``valkey+``) url."""
    return _scheme(url) in _CLUSTER_SCHEMES


def normalize_url(url: str) -> str:
    """``url`` with the ``valkey(s)://`` aliases rewritten; ServerError for anything unusable."""
    scheme = _scheme(url)
    if scheme in _CLUSTER_SCHEMES:
        raise ServerError(f"cluster urls are not supported yet: {url!r}")
    if scheme in _ALIASES:
        return _ALIASES[scheme] + url[len(scheme) :]
    if scheme not in _SCHEMES:
        allowed = ", ".join(f"{s}://" for s in (*_SCHEMES, *_ALIASES))
        raise ServerError(f"unsupported server url {url!r}: the scheme must be one of {allowed}")
    return url


def sync_client(url: str | None = None, *, socket_timeout: float = SOCKET_TIMEOUT) -> redis.Redis:
    """A blocking redis-py client on the resolved server (no connection is made yet)."""
    target = normalize_url(resolve_url(url))
    return redis.Redis.from_url(target, **_options(socket_timeout))


def async_client(
    url: str | None = None, *, socket_timeout: float = SOCKET_TIMEOUT
) -> redis.asyncio.Redis:
    """An asyncio redis-py client on the resolved server (no connection is made yet).

    Resolving may start the embedded server, which blocks briefly; it happens
    once per user session, not per call.
    """
    target = normalize_url(resolve_url(url))
    return redis.asyncio.Redis.from_url(target, **_options(socket_timeout))


def _options(socket_timeout: float) -> dict[str, Any]:
    """Client options shared by the sync and async clients (TCP keepalive is redis-py's default)."""
    return {
        "decode_responses": True,
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": CONNECT_TIMEOUT,
        "health_check_interval": HEALTH_CHECK_INTERVAL,
    }


def _scheme(url: str) -> str:
    """The lower-cased scheme of ``url``; ServerError if it has none."""
    scheme = urlsplit(url).scheme.lower()
    if not scheme or "://" not in url:
        raise ServerError(
            f"invalid server url {url!r}: expected e.g. redis://host:6379/0 or unix:///path.sock"
        )
    return scheme
