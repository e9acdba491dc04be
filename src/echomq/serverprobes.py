"""Probes: the few commands sent to a server as a process, not as a queue's store.

The embedded server's manager (echomq.embedded) asks its own socket whether
the server answers, what INFO says and to shut down. Each probe uses a client
of its own with short timeouts and no retries, and reports failure as a value,
so the manager never touches a client itself. They live beside the embedded
server, not in the sending layer: they know a socket path, not a queue, and
import nothing of echomq's connections.
"""

from __future__ import annotations

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

#: seconds a probe waits to connect and for each reply.
PROBE_TIMEOUT = 1.0


def _socket_client(socket_path: str) -> redis.Redis:
    return redis.Redis(
        unix_socket_path=socket_path,
        socket_timeout=PROBE_TIMEOUT,
        socket_connect_timeout=PROBE_TIMEOUT,
        retry=Retry(NoBackoff(), 0),
        decode_responses=True,
    )


def answers(socket_path: str) -> bool:
    """True if the server on ``socket_path`` answers PING (one loading its AOF does not)."""
    try:
        with _socket_client(socket_path) as client:
            return bool(client.ping())
    except (redis.RedisError, OSError):
        return False


def info_text(socket_path: str, *sections: str) -> str | None:
    """INFO ``sections`` as the server sent it (not parsed: redis-py would turn a version
    like "9.0" into a float), or None if the server does not answer."""
    try:
        with _socket_client(socket_path) as client:
            client.set_response_callback("INFO", lambda response, **_: response)
            return str(client.execute_command("INFO", *sections))
    except (redis.RedisError, OSError):
        return None


def shutdown(socket_path: str) -> bool:
    """Ask the server on ``socket_path`` for a clean shutdown; False if it could not be asked."""
    try:
        with _socket_client(socket_path) as client:
            client.ping()  # shutdown() alone takes "cannot connect" for success
            client.shutdown()  # returns when the server closes the connection
    except (redis.RedisError, OSError):
        return False
    return True
