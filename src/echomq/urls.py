"""Which server a queue uses, and a url's password kept out of every text shown.

The first of these wins:

1. the ``url`` argument,
2. the ``ECHOMQ_URL`` environment variable,
3. the embedded Valkey of the user (:class:`echomq.embedded.EmbeddedServer`),
   started on first use, whose ``unix://`` url is returned.

Urls are ``redis://``, ``rediss://`` (TLS) and ``unix://`` as redis-py reads
them; ``valkey://`` and ``valkeys://`` are accepted as their aliases;
``redis+cluster://host:port`` (also ``rediss+``, ``valkey+``, ``valkeys+``)
names any one node of a cluster. Nothing here sends a command: the clients
are made by echomq.connection. The command line and the dashboard use this
module for the url they show, pass on or check (docs/design.md §7).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from echomq.errors import ServerError

if TYPE_CHECKING:
    from echomq.embedded import EmbeddedServer

#: environment variable naming the server when no url is passed.
URL_ENV = "ECHOMQ_URL"

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
