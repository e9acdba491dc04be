"""Schedules: when a schedule fires, what a stored definition holds, and what is listed.

No I/O here. A schedule's definition is stored on the server (the
``schedules`` hash, one JSON text per schedule id) with its next fire time
(the ``fires`` sorted set) and its last fire (the ``fired`` hash). The fire
times themselves are computed here, on the client, always from a server
clock reading a script returned (never the client's own clock):

- ``cron``: a standard 5-field expression evaluated in the schedule's time
  zone by `cronsim <https://pypi.org/project/cronsim/>`_ (chosen because it is
  maintained, typed, has no dependencies, and defines daylight-saving
  transitions as Debian's cron does: see docs/lifecycle.md "Schedules");
- ``every``: a fixed interval from an anchor (the time the schedule was
  created or its timing last changed), independent of time zones.

A fire is a compare-and-set (fireSchedules.lua): it adds the job only if
the stored next fire time is still the one the firer read, so each fire
time yields one job however many workers race for it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import islice
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson
from cronsim import CronSim, CronSimError

from echomq import ids
from echomq.errors import InvalidSchedule
from echomq.job import State, decode_payload, ms_to_datetime
from echomq.keys import NAME_PATTERN, NAME_RULE, group_of

log = logging.getLogger("echomq.schedules")

#: the most schedules one queue holds (schedules() lists them all in one reply).
MAX_SCHEDULES = 1000
#: the longest ``every`` interval, in seconds (ten years).
MAX_EVERY = 10 * 365 * 86400.0
#: schedules one maintenance call fires at most (the rest at the next call, at once).
FIRE_BUDGET = 100
#: with ``catch_up=False``, a fire reached later than this many seconds after its
#: time (or later than one period, if that is shorter) is skipped.
MISSED_AFTER = 60.0
#: how a fire that made no job is reported: skipped because ...
SKIP_MISSED, SKIP_RUNNING = "missed", "running"
#: the most fire times of one cron expression in one hour (one per minute).
_MOST_PER_HOUR = 60
#: the job states in which a previous fire still counts as running.
RUNNING_STATES = frozenset({State.WAITING, State.DELAYED, State.ACTIVE, State.FAILED})


def check_schedule_id(schedule_id: object) -> str:
    if not isinstance(schedule_id, str) or NAME_PATTERN.fullmatch(schedule_id) is None:
        raise InvalidSchedule(f"invalid schedule id {schedule_id!r}: must be {NAME_RULE}")
    return schedule_id


def _zone(tz: object) -> ZoneInfo:
    if not isinstance(tz, str) or not tz or len(tz) > 64:
        raise InvalidSchedule(f"time zone {tz!r} must be an IANA zone name such as 'Europe/Berlin'")
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidSchedule(
            f"unknown time zone {tz!r}: expected an IANA zone name such as 'Europe/Berlin'"
        ) from None


@dataclass(frozen=True, slots=True)
class Timing:
    """When a schedule fires: a cron expression in a zone, or every ``every_ms``
    from ``anchor_ms``. ``next_after(ms)`` is the first fire time after ``ms``."""

    cron: str | None
    every_ms: int | None
    tz: str
    anchor_ms: int = 0

    @classmethod
    def checked(cls, cron: object, every: object, tz: object) -> Timing:
        """Validate the user's input (InvalidSchedule naming the value); anchor unset."""
        _zone(tz)
        if (cron is None) == (every is None):
            raise InvalidSchedule("give exactly one of cron (a 5-field expression) or every")
        if cron is not None:
            if not isinstance(cron, str) or len(cron.split()) != 5 or len(cron) > 256:
                raise InvalidSchedule(
                    f"cron {cron!r:.300} must be a standard 5-field expression "
                    "(minute hour day-of-month month day-of-week)"
                )
            timing = cls(" ".join(cron.split()), None, str(tz))
            try:
                timing.next_after(0)
            except (CronSimError, StopIteration, ValueError) as exc:
                raise InvalidSchedule(f"invalid cron expression {cron!r}: {exc}") from None
            return timing
        if (
            isinstance(every, bool)
            or not isinstance(every, int | float)
            or not math.isfinite(every)
            or not 0 < every <= MAX_EVERY
            or round(every * 1000) < 1
        ):
            raise InvalidSchedule(
                f"every {every!r} is out of range; allowed seconds >= 0.001 and <= {MAX_EVERY:.0f}"
            )
        return cls(None, round(every * 1000), str(tz))

    def same_as(self, other: Timing) -> bool:
        """Whether two timings fire at the same times (the anchor aside)."""
        return (self.cron, self.every_ms, self.tz) == (other.cron, other.every_ms, other.tz)

    def next_after(self, ms: int) -> int:
        """The first fire time strictly after ``ms`` (epoch milliseconds)."""
        if self.every_ms is not None:
            if ms < self.anchor_ms:
                return self.anchor_ms
            return (
                self.anchor_ms
                + (ms - self.anchor_ms) // self.every_ms * self.every_ms
                + (self.every_ms)
            )
        assert self.cron is not None
        start = datetime.fromtimestamp(ms / 1000, tz=UTC).astimezone(_zone(self.tz))
        # cronsim drops the start's sub-second part and returns the first match after
        # it in wall-clock time. From the second pass of an hour repeated by a
        # fall-back, it first returns that hour's matches of the first pass (each
        # fixed time of the hour runs once, at its first occurrence): those are in
        # the past, so skip them (at most one per minute of the hour).
        for fire in islice(CronSim(self.cron, start), _MOST_PER_HOUR + 1):
            fire_ms = int(fire.timestamp()) * 1000
            if fire_ms > ms:
                return fire_ms
        raise ValueError(f"cron {self.cron!r}: no fire time after {ms} ms")

    def describe(self) -> str:
        if self.cron is not None:
            return self.cron if self.tz == "UTC" else f"{self.cron} ({self.tz})"
        assert self.every_ms is not None
        return f"every {self.every_ms / 1000:g}s"


@dataclass(frozen=True, slots=True)
class Definition:
    """A schedule as stored: its timing, the job each fire adds, its options and
    its revision (every replace increments it; a fire checks it)."""

    timing: Timing
    name: str
    data: str  # JSON text
    tier: int
    lane: str
    max_attempts: int
    skip_if_running: bool
    catch_up: bool
    revision: int = 1

    def encode(self) -> str:
        t = self.timing
        doc: dict[str, Any] = {
            "n": self.name,
            "d": self.data,
            "p": self.tier,
            "g": self.lane,
            "m": self.max_attempts,
            "z": t.tz,
            "t0": str(t.anchor_ms),
            "o": int(self.skip_if_running),
            "cu": int(self.catch_up),
            "r": self.revision,
        }
        if t.cron is not None:
            doc["c"] = t.cron
        else:
            doc["e"] = t.every_ms
        return orjson.dumps(doc).decode()

    @classmethod
    def decode(cls, raw: str) -> Definition:
        doc = orjson.loads(raw)
        every = doc.get("e")
        every_ms = None if every is None else int(every)
        timing = Timing(doc.get("c"), every_ms, doc["z"], int(doc["t0"]))
        return cls(
            timing,
            doc["n"],
            doc["d"],
            int(doc["p"]),
            doc["g"],
            int(doc["m"]),
            bool(doc["o"]),
            bool(doc["cu"]),
            int(doc["r"]),
        )


def plan_fire(definition: Definition, fire_ms: int, now_ms: int) -> tuple[int, str]:
    """For a due fire at ``fire_ms`` seen at server time ``now_ms``: the next fire
    time to store and why the fire makes no job ("" = it makes one).

    Fires missed while nothing ran collapse into this one (the next fire time
    is the first after now); with ``catch_up=False`` a fire reached too late
    (MISSED_AFTER, or one period if shorter) makes no job."""
    timing = definition.timing
    next_ms = timing.next_after(max(now_ms, fire_ms))
    if definition.catch_up:
        return next_ms, ""
    period = timing.next_after(fire_ms) - fire_ms
    late = now_ms - fire_ms
    return next_ms, SKIP_MISSED if late > min(period, MISSED_AFTER * 1000) else ""


def fires_to_make(due: Sequence[str], now_ms: int) -> list[list[str]]:
    """fireSchedules.lua's fires for the due schedules maintain.lua read (flat:
    id, fire time ms, definition JSON), seen at server time ``now_ms``.

    A schedule this client cannot evaluate (a zone its tz database lacks, a
    definition written by a newer client) is logged and left to others."""
    fires = []
    for i in range(0, len(due), 3):
        schedule_id, fire_ms, raw = str(due[i]), int(due[i + 1]), str(due[i + 2])
        if not raw:
            continue
        try:
            definition = Definition.decode(raw)
            next_ms, skip = plan_fire(definition, fire_ms, now_ms)
        except Exception as exc:  # one bad schedule must not stop the others
            log.warning("schedule %s: cannot compute its next fire time: %s", schedule_id, exc)
            continue
        revision = str(definition.revision)
        fires.append([schedule_id, revision, str(fire_ms), str(next_ms), ids.new_id(), skip])
    return fires


def zoned_time(moment: datetime | None, tz: str) -> str | None:
    """``moment`` as a wall-clock time of zone ``tz``, labelled with the zone's
    abbreviation: ``2026-12-05 03:00:00 CET`` (how the CLI and the dashboard show
    a schedule's fire times; a zone this client's tz database lacks: in UTC,
    labelled so)."""
    if moment is None:
        return None
    try:
        zone = _zone(tz)
    except InvalidSchedule:
        zone = ZoneInfo("UTC")
    return f"{moment.astimezone(zone):%Y-%m-%d %H:%M:%S %Z}"


@dataclass(frozen=True, slots=True)
class ScheduleInfo:
    """One schedule as ``schedules()`` lists it.

    ``last_outcome`` is the state of the job the last fire added (None when
    it never fired; ``"gone"`` once that job was removed or pruned);
    ``skipped`` counts fires that made no job (missed, previous still running),
    ``last_skip`` says why the latest did."""

    id: str
    name: str
    cron: str | None
    every: float | None
    tz: str
    data: Any
    priority: int
    group: str | None
    max_attempts: int | None  # None: the queue's setting at each fire
    skip_if_running: bool
    catch_up: bool
    paused: bool
    next_fire: datetime | None
    last_fire: datetime | None
    last_job_id: str | None
    last_outcome: str | None
    skipped: int
    last_skip: str | None

    @classmethod
    def from_row(cls, row: Any) -> ScheduleInfo:
        """From one listSchedules.lua row: id, definition, next fire ("" = none),
        last fire state JSON ("" = none), the last job's state ("" = gone)."""
        schedule_id, raw_def, next_raw, raw_state, job_state = row
        d = Definition.decode(raw_def)
        state: dict[str, Any] = orjson.loads(raw_state) if raw_state else {}
        last_job = state.get("j")
        every = d.timing.every_ms
        return cls(
            id=schedule_id,
            name=d.name,
            cron=d.timing.cron,
            every=None if every is None else every / 1000,
            tz=d.timing.tz,
            data=decode_payload(d.data),
            priority=d.tier,
            group=group_of(d.lane),
            max_attempts=d.max_attempts if d.max_attempts > 0 else None,
            skip_if_running=d.skip_if_running,
            catch_up=d.catch_up,
            paused=bool(state.get("pa")),
            next_fire=ms_to_datetime(str(int(float(next_raw)))) if next_raw else None,
            last_fire=ms_to_datetime(state.get("t")),
            last_job_id=last_job,
            last_outcome=(job_state or "gone") if last_job else None,
            skipped=int(state.get("k", 0)),
            last_skip=state.get("ks"),
        )

    def in_zone(self, moment: datetime | None) -> str | None:
        """``moment`` in the schedule's own zone, labelled (see zoned_time)."""
        return zoned_time(moment, self.tz)

    def to_dict(self) -> dict[str, Any]:
        def iso(moment: datetime | None) -> str | None:
            return None if moment is None else moment.isoformat()

        return {
            "id": self.id,
            "name": self.name,
            "cron": self.cron,
            "every": self.every,
            "tz": self.tz,
            "priority": self.priority,
            "group": self.group,
            "paused": self.paused,
            "skip_if_running": self.skip_if_running,
            "catch_up": self.catch_up,
            "next_fire": iso(self.next_fire),
            "last_fire": iso(self.last_fire),
            "last_job_id": self.last_job_id,
            "last_outcome": self.last_outcome,
            "skipped": self.skipped,
            "last_skip": self.last_skip,
        }
