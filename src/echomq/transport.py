"""The asyncio connections echomq's clients use: redis-py's, with two changes.

- Commands are packed by hiredis (C) instead of redis-py's pure-Python
  ``pack_command`` on the asyncio side, which was the largest client cost of
  a script call (every call sends the queue's fixed keys and its option
  block). The bytes on the wire are the same.
- A pooled connection the server (or a proxy) closed while it sat idle is
  replaced before the next command is written to it, so that command runs
  once, on a fresh connection. redis-py would write to the dead connection:
  on CPython 3.11 the read then fails with ``ConnectionError``, and on some
  later versions the write leaks the transport's internal
  ``TypeError``/``AttributeError`` (redis-py issue #4287, fixed upstream
  after redis-py 8.1), which no retry layer recognises.

:func:`upgrade` swaps a pool's connection class before its first connection.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import redis.asyncio.connection as rc

_hiredis_pack: Callable[[tuple[Any, ...]], bytes] | None
try:
    from hiredis import pack_command as _hiredis_pack
except ImportError:  # pragma: no cover - hiredis comes with redis[hiredis]
    _hiredis_pack = None


class _Echo(rc.AbstractConnection):
    """What the three connection kinds below add to redis-py's."""

    def pack_command(self, *args: Any) -> list[bytes]:
        first = args[0] if args else None
        # redis-py splits a first argument like "CONFIG GET" into words: leave
        # those (and anything hiredis refuses) to it
        if _hiredis_pack is not None and isinstance(first, str) and " " not in first:
            try:
                return [_hiredis_pack(args)]
            except TypeError:
                pass
        return super().pack_command(*args)

    async def send_packed_command(
        self, command: bytes | str | Iterable[bytes], check_health: bool = True
    ) -> None:
        writer, reader = self._writer, self._reader
        if writer is not None and (
            writer.transport.is_closing() or (reader is not None and reader.at_eof())
        ):
            # closed by the peer while idle: nothing of this command was sent yet,
            # so drop the connection and let redis-py open a new one for it
            await self.disconnect(nowait=True)
        await super().send_packed_command(command, check_health)


class Connection(_Echo, rc.Connection):
    pass


class UnixDomainSocketConnection(_Echo, rc.UnixDomainSocketConnection):
    pass


class SSLConnection(_Echo, rc.SSLConnection):
    pass


_UPGRADES: dict[type[rc.AbstractConnection], type[rc.AbstractConnection]] = {
    rc.Connection: Connection,
    rc.UnixDomainSocketConnection: UnixDomainSocketConnection,
    rc.SSLConnection: SSLConnection,
}


def upgraded(cls: type[rc.AbstractConnection]) -> type[rc.AbstractConnection]:
    """echomq's version of a redis-py connection class (a class it does not know is kept)."""
    return _UPGRADES.get(cls, cls)


def upgrade(pool: rc.ConnectionPool) -> rc.ConnectionPool:
    """Make ``pool`` open echomq's connections from its next connection on."""
    pool.connection_class = upgraded(pool.connection_class)
    return pool
