"""Events: what ``q.events()`` yields, read from the queue's capped stream.

Every transition script appends one entry per job it moves to the queue's
event stream (``scripts/includes/events.lua``); docs/lifecycle.md lists the
kinds and their fields. An :class:`Event` is one entry, decoded; a reader
whose cursor was trimmed from the stream first gets an event of kind
``missed``. No I/O here: the engine builds the calls, echomq.sending reads.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from echomq.errors import InvalidId
from echomq.job import ms_to_datetime

#: the kinds the scripts write, in lifecycle order (docs/lifecycle.md "Events").
KINDS = (
    "added",
    "deduplicated",
    "scheduled",
    "skipped",
    "unblocked",
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
    "unthrottled",
    "lane_changed",
    "paused",
    "resumed",
    "lost",
    "batch_created",
    "batch_closed",
    "batch_succeeded",
    "batch_failed",
    "batch_cancelled",
)
#: the kind of the notice a reader gets when events after its cursor were trimmed.
MISSED = "missed"
#: an event id: the event's number in the queue's stream (1, 2, 3, …), as text.
EVENT_ID = re.compile(r"[0-9]{1,16}")
#: the event fields an entry holds as space-joined columns → Event attribute, decoder.
_COLUMNS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "a": ("attempt", int),
    "rs": ("result_size", int),
    "nx": ("next_run", ms_to_datetime),
    "st": ("stalls", int),
    "o": ("outcome", str),
}
#: the event fields an entry holds as JSON [offset, value, …] → Event attribute, decoder.
_TEXTS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "e": ("error", str),
    "pg": ("progress", orjson.loads),
}


def check_event_id(event_id: object) -> str:
    """Return ``event_id`` (an ``Event.id``) if it is one, else raise InvalidId."""
    if not isinstance(event_id, str) or EVENT_ID.fullmatch(event_id) is None:
        raise InvalidId(
            f"event id {event_id!r} is not an event id; expected the decimal number"
            " Event.id gives (1 to 16 digits)"
        )
    return event_id


@dataclass(frozen=True, slots=True)
class Event:
    """One event of a queue's stream.

    ``kind``: one of :data:`KINDS`, or ``missed``: events after the reader's
    cursor were trimmed before it read them (``skipped`` says how many; the
    reader goes on at the oldest retained event). ``job_id`` is None for an
    event of a lane or of the queue, not a job (``unthrottled``,
    ``lane_changed``, ``paused``, ``resumed``). ``id``: the event's number
    in the stream, as text, to resume after with ``q.events(after=id)``.
    ``at``: the server time of the transition. The other fields are set where
    the kind carries them (else None): ``attempt`` (claimed, retrying, dead),
    ``error`` (retrying, dead; at most 200 bytes), ``result_size``
    (completed: bytes of the result JSON), ``next_run`` (added with a delay,
    retrying, released with a delay), ``stalls`` (stalled), ``progress``
    (progress, when its JSON is at most 200 bytes), ``outcome``
    (deduplicated: "dropped", "throttled" or "replaced"; ``job_id`` is then the
    job that stands for the add, and ``next_run`` a debounced job's new run time).
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
    skipped: int | None = None
    outcome: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The event as JSON-ready values (times as milliseconds since the epoch);
        fields its kind does not carry are left out."""
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "job_id": self.job_id}
        out["group"] = self.group
        out["at"] = _ms(self.at)
        for name in ("attempt", "error", "result_size", "stalls", "progress", "skipped", "outcome"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.next_run is not None:
            out["next_run"] = _ms(self.next_run)
        return out


def _ms(at: datetime | None) -> int | None:
    return None if at is None else round(at.timestamp() * 1000)


def _extras(fields: dict[str, str], size: int) -> list[dict[str, Any]]:
    """Each event's optional attributes, from the entry's columns."""
    extras: list[dict[str, Any]] = [{} for _ in range(size)]
    for field, (name, decode) in _COLUMNS.items():
        column = fields.get(field)
        if column is not None:
            for extra, raw in zip(extras, column.split(" "), strict=True):
                if raw:
                    extra[name] = decode(raw)
    for field, (name, decode_text) in _TEXTS.items():
        text = fields.get(field)
        if text is not None:
            flat = orjson.loads(text)
            for i in range(0, len(flat), 2):
                extras[int(flat[i])][name] = decode_text(flat[i + 1])
    return extras


def parse_entry(entry: Sequence[Any], after: int = 0) -> list[Event]:
    """The events of one stream entry ``[id, [field, value, ...]]`` numbered
    above ``after`` (scripts/includes/events.lua describes the entry)."""
    entry_id, flat = str(entry[0]), entry[1]
    fields = {str(flat[i]): str(flat[i + 1]) for i in range(0, len(flat), 2)}
    size = int(fields["n"])
    first = int(entry_id.split("-", 1)[0]) - size + 1
    if first + size - 1 <= after:
        return []
    at = ms_to_datetime(fields.get("t"))
    kinds, ids, lanes = (fields[c].split(" ") for c in ("k", "j", "g"))
    extras = _extras(fields, size)
    return [
        Event(kinds[i], ids[i] or None, lanes[i] or None, at, str(first + i), **extras[i])
        for i in range(size)
        if first + i > after
    ]


@dataclass(frozen=True, slots=True)
class EventPage:
    """One read of the stream: the cursor after it, how many events after the
    previous cursor were trimmed before they were read, and its events."""

    cursor: str
    missed: int
    events: list[Event]
    #: whether the read returned as many entries as it asked for (more may follow)
    full: bool = False

    def with_notice(self, before: str) -> list[Event]:
        """The page's events, after a ``missed`` notice if there was a gap
        (the notice's id is the cursor the gap follows)."""
        if not self.missed:
            return self.events
        notice = Event(MISSED, None, None, None, before, skipped=self.missed)
        return [notice, *self.events]


def parse_page(reply: Sequence[Any], after: str, count: int) -> EventPage:
    """readEvents.lua's reply as an EventPage (``after``: the cursor it read from,
    ``count``: the most entries it asked for)."""
    cursor = int(after) if after else 0
    entries = reply[2:]
    events = [event for entry in entries for event in parse_entry(entry, cursor)]
    return EventPage(str(reply[0]), int(reply[1]), events, full=len(entries) >= count)
