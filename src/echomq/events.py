"""Events: what ``q.events()`` yields, read from the queue's capped stream.

Every transition script appends one entry per job it moves to the queue's
event stream (``scripts/includes/events.lua``); docs/lifecycle.md lists the
kinds and their fields. An :class:`Event` is one entry, decoded; a reader
whose cursor was trimmed from the stream first gets an event of kind
``missed``. No I/O here: the engine builds the calls, echomq.sending reads.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from echomq.errors import InvalidId
from echomq.job import ms_to_datetime

#: the kinds the scripts write, in lifecycle order (docs/lifecycle.md "Events").
KINDS = (
    "added",
    "claimed",
    "progress",
    "completed",
    "retrying",
    "released",
    "stalled",
    "expired",
    "cancelled",
    "dead",
    "requeued",
    "removed",
)
#: the kind of the notice a reader gets when events after its cursor were trimmed.
MISSED = "missed"
#: an event id as the server writes them: milliseconds-sequence.
EVENT_ID = re.compile(r"\d{1,20}-\d{1,20}")


def check_event_id(event_id: object) -> str:
    """Return ``event_id`` if it is a stream id (``<ms>-<seq>``), else raise InvalidId."""
    if not isinstance(event_id, str) or EVENT_ID.fullmatch(event_id) is None:
        raise InvalidId(
            f"event id {event_id!r} is not an event id; expected '<milliseconds>-<sequence>'"
            " as Event.id gives it"
        )
    return event_id


@dataclass(frozen=True, slots=True)
class Event:
    """One event of a queue's stream.

    ``kind``: one of :data:`KINDS`, or ``missed`` (events after the reader's
    cursor were trimmed before it read them; it resumes at the oldest
    retained event). ``id``: the stream id, to resume after with
    ``q.events(after=id)``. ``at``: the server time of the transition.
    The other fields are set where the kind carries them (else None):
    ``attempt`` (claimed, retrying, dead), ``error`` (retrying, dead; at most
    200 bytes), ``result_size`` (completed: bytes of the result JSON),
    ``next_run`` (added with a delay, retrying, released with a delay),
    ``stalls`` (stalled), ``progress`` (progress, when its JSON is at most
    200 bytes).
    """

    kind: str
    job_id: str | None
    group: str | None
    at: datetime | None
    id: str
    attempt: int | None = None
    error: str | None = None
    result_size: int | None = None
    next_run: datetime | None = None
    stalls: int | None = None
    progress: Any = None

    def to_dict(self) -> dict[str, Any]:
        """The event as JSON-ready values (times as milliseconds since the epoch);
        fields a kind does not carry are left out."""
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "job_id": self.job_id}
        out["group"] = self.group
        out["at"] = _ms(self.at)
        for name in ("attempt", "error", "result_size", "stalls", "progress"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.next_run is not None:
            out["next_run"] = _ms(self.next_run)
        return out


def _ms(at: datetime | None) -> int | None:
    return None if at is None else round(at.timestamp() * 1000)


def _int(raw: str | None) -> int | None:
    return None if raw is None else int(raw)


def parse_entry(entry: Sequence[Any]) -> Event:
    """One stream entry ``[id, [field, value, ...]]`` as an Event."""
    event_id, flat = str(entry[0]), entry[1]
    f = {str(flat[i]): str(flat[i + 1]) for i in range(0, len(flat), 2)}
    progress = f.get("pg")
    return Event(
        kind=f.get("k", "unknown"),
        job_id=f.get("j"),
        group=f.get("g") or None,
        at=ms_to_datetime(f.get("t")),
        id=event_id,
        attempt=_int(f.get("a")),
        error=f.get("e"),
        result_size=_int(f.get("rs")),
        next_run=ms_to_datetime(f.get("nx")),
        stalls=_int(f.get("st")),
        progress=None if progress is None else orjson.loads(progress),
    )


@dataclass(frozen=True, slots=True)
class EventPage:
    """One read of the stream: the cursor after it, whether a gap was trimmed
    before it, and its events."""

    cursor: str
    missed: bool
    events: list[Event]

    def with_notice(self, before: str) -> list[Event]:
        """The page's events, after a ``missed`` notice if there was a gap
        (the notice's id is the cursor the gap follows)."""
        if not self.missed:
            return self.events
        notice = Event(kind=MISSED, job_id=None, group=None, at=None, id=before)
        return [notice, *self.events]


def parse_page(reply: Sequence[Any]) -> EventPage:
    """readEvents.lua's reply as an EventPage."""
    return EventPage(
        cursor=str(reply[0]),
        missed=int(reply[1]) == 1,
        events=[parse_entry(entry) for entry in reply[2:]],
    )
