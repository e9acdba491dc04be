"""echomq.transport packs commands exactly as redis-py does (no server needed)."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio.connection as rc

from echomq import transport

CASES: list[tuple[Any, ...]] = [
    ("PING",),
    ("EVALSHA", "a" * 40, 2, "emq:{q}:meta", "emq:{q}:counter", "composite", '[["id","n"]]'),
    ("SET", "k", "é ü ✓", "PX", 1500),
    ("HSET", "k", "f", b"\x00\xffraw", "g", 3.25, "h", -7),
    ("CONFIG GET", "maxmemory"),  # redis-py splits the first argument into words
    ("SET", "k", "x" * 100_000),  # longer than redis-py's buffer cutoff
]


def joined(parts: list[bytes] | list[bytes | memoryview]) -> bytes:
    return b"".join(bytes(p) for p in parts)


@pytest.mark.parametrize("args", CASES, ids=lambda a: str(a[0]))
def test_commands_are_packed_byte_for_byte_as_redis_py_packs_them(args: tuple[Any, ...]) -> None:
    ours = transport.Connection().pack_command(*args)
    theirs = rc.Connection().pack_command(*args)
    assert joined(ours) == joined(theirs)


def test_pools_and_cluster_nodes_get_echomqs_connection_classes() -> None:
    assert transport.upgraded(rc.Connection) is transport.Connection
    assert transport.upgraded(rc.UnixDomainSocketConnection) is transport.UnixDomainSocketConnection
    assert transport.upgraded(rc.SSLConnection) is transport.SSLConnection

    class Custom(rc.Connection):
        pass

    assert transport.upgraded(Custom) is Custom  # an unknown class is left alone
    pool = transport.upgrade(rc.ConnectionPool.from_url("unix:///tmp/none.sock"))
    assert pool.connection_class is transport.UnixDomainSocketConnection
