"""A :class:`Call`: one operation as data, built by the engine and sent by the sending layer.

A call is either a script (by name, with KEYS and ARGV) or one plain command,
plus the function that turns the server's reply into the caller's value.
Nothing here does I/O: :mod:`echomq.engine` builds calls, :mod:`echomq.sending`
sends them, and ``Queue``/``SyncQueue`` only connect the two.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from echomq.scripts import Script
from echomq.scripts.library import READ_ONLY, function_name

T = TypeVar("T")

#: how a script call goes on the wire: as a function of the library (FCALL, or
#: FCALL_RO for a read-only script), by SHA1 (EVALSHA), or with its source (EVAL).
Form = Literal["FCALL", "EVALSHA", "EVAL"]


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

    def wire(self, form: Form | None = None, *, by_sha: bool = True) -> tuple[Any, ...]:
        """The command to send: for a script call, the script in ``form`` (default
        EVALSHA, or EVAL if ``by_sha`` is False); else the plain command.
        echomq.sending.scripts decides the form and what to do when the server
        does not know the script or function yet."""
        if self.script is None:
            return self.command
        form = form or ("EVALSHA" if by_sha else "EVAL")
        head: tuple[str, str]
        if form == "FCALL":
            name = self.script.name
            head = ("FCALL_RO" if name in READ_ONLY else "FCALL", function_name(name))
        elif form == "EVALSHA":
            head = ("EVALSHA", self.script.sha)
        else:
            head = ("EVAL", self.script.source)
        return (*head, len(self.keys), *self.keys, *self.args)
