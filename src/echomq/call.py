"""A :class:`Call`: one operation as data, built by the engine and sent by the sending layer.

A call is either a script (by name, with KEYS and ARGV) or one plain command,
plus the function that turns the server's reply into the caller's value.
Nothing here does I/O: :mod:`echomq.engine` builds calls, :mod:`echomq.sending`
sends them, and ``Queue``/``SyncQueue`` only connect the two.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from echomq.scripts import Script

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One round trip: a script call (``script`` set) or a plain ``command``.

    ``durable``: seconds to wait for a replica to acknowledge the write
    (``WAIT``), or None for an ordinary send. ``blocks``: seconds the command
    may block on the server (a BLPOP), so the sender can guard it.
    """

    parse: Callable[[Any], T]
    script: Script | None = None
    keys: Sequence[str] = ()
    args: Sequence[str] = ()
    command: tuple[Any, ...] = ()
    durable: float | None = None
    blocks: float | None = None

    def wire(self, *, by_sha: bool = True) -> tuple[Any, ...]:
        """The command to send: EVALSHA (or, after NOSCRIPT, EVAL with the source)
        for a script call, else the plain command."""
        if self.script is None:
            return self.command
        head = ("EVALSHA", self.script.sha) if by_sha else ("EVAL", self.script.source)
        return (*head, len(self.keys), *self.keys, *self.args)
