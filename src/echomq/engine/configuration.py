"""The queue's settings stored on the server (docs/settings.md): configure and read them."""

from __future__ import annotations

from typing import Any, Unpack

from echomq import settings
from echomq.call import Call
from echomq.engine.base import EngineBase
from echomq.engine.replies import pairs


def decode_settings(reply: Any) -> dict[str, Any]:
    """The settings hash, by setting name."""
    return settings.decode(pairs(reply))


class SettingCalls(EngineBase):
    """Queue-wide settings stored on the server, obeyed by every client."""

    def configure(self, **changes: Unpack[settings.Settings]) -> Call[dict[str, Any]]:
        """Store queue-wide settings on the server, obeyed by every client of the queue
        (docs/settings.md): retention (``keep_completed``, ``keep_completed_age``,
        ``keep_dead``, ``keep_dead_age``), ``backoff``, ``max_stalls``, the default
        ``max_attempts``, ``event_stream_length`` (0: no events), and the queue-wide
        ``concurrency`` and ``rate`` that cap all lanes together (enforced by every
        claim, docs/ordering.md "Queue-wide limits"). A later call changes only what it
        names; None removes a stored value. Every value is checked first: one bad
        value raises InvalidOption and nothing is written. The reply is every
        stored setting after the change."""
        args = settings.encode(changes)
        return self._script("configure", decode_settings, *args)

    def settings(self) -> Call[dict[str, Any]]:
        """The queue's stored settings by name (what nobody stored is left out: each
        client's own options apply to it; see ``echomq.settings.defaults``)."""
        return Call(parse=decode_settings, command=("HGETALL", self.keys.settings))
