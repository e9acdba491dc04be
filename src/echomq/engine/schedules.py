"""Schedules' calls: create or replace one (a read, then a compare-and-set on
what it read: docs/design.md §7), list them, remove, pause and resume one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any, NamedTuple

from echomq.call import Call
from echomq.engine.base import EngineBase
from echomq.engine.replies import ms
from echomq.errors import (
    E_ORDERING,
    E_SCHEDULE_CHANGED,
    E_SCHEDULE_LIMIT,
    InvalidOption,
    InvalidSchedule,
    OrderingMismatch,
)
from echomq.job import encode_payload
from echomq.keys import lane_of
from echomq.options import MAX_ATTEMPTS, check_int, check_job_name
from echomq.schedules import (
    MAX_SCHEDULES,
    Definition,
    ScheduleInfo,
    Timing,
    check_schedule_id,
)
from echomq.score import check_tier
from echomq.steps import Next

#: scheduleControl.lua's actions.
REMOVE, PAUSE, RESUME = "remove", "pause", "resume"


class ScheduleRows(NamedTuple):
    """listSchedules.lua's reply: the server's time (ms) and the rows read."""

    now: str
    rows: list[Any]


class ScheduleRow(NamedTuple):
    """One listSchedules.lua row (ScheduleInfo.from_row reads it whole)."""

    id: str
    definition: str
    next_fire: str
    last_fire: str
    last_state: str


def stored_definition(read: ScheduleRows) -> Definition | None:
    """The definition of the one schedule a read by id found, else None."""
    return Definition.decode(ScheduleRow(*read.rows[0]).definition) if read.rows else None


def decode_schedules(reply: Any) -> list[ScheduleInfo]:
    return [ScheduleInfo.from_row(row) for row in ScheduleRows(*reply).rows]


def decode_existed(reply: Any) -> bool:
    return bool(int(reply))


class ScheduleWrite:
    """``schedule()`` as a chain: read the stored schedule, then write the new one
    if the stored one is still the revision read (else read again)."""

    def __init__(self, engine: EngineBase, schedule_id: str, base: Definition) -> None:
        self.engine, self.schedule_id, self.base = engine, schedule_id, base

    def read(self) -> Call[datetime | Next[datetime | None] | None]:
        return read_schedule(self.engine, self.schedule_id, self.write)

    def write(self, reply: Any) -> Next[datetime | None]:
        """From what the read found: the write, keeping the stored anchor (and so
        the next fire time) when the timing is unchanged."""
        read = ScheduleRows(*reply)
        now, old, timing = int(read.now), stored_definition(read), self.base.timing
        keep = old is not None and old.timing.same_as(timing)
        anchor = old.timing.anchor_ms if old is not None and keep else now
        revision = 0 if old is None else old.revision
        new = replace(self.base, timing=replace(timing, anchor_ms=anchor), revision=revision + 1)
        return Next(
            self.engine._script(
                "schedule",
                self.written,
                self.engine.options.ordering,
                self.schedule_id,
                new.encode(),
                str(revision),
                str(new.timing.next_after(now)),
                "1" if keep else "0",
                str(MAX_SCHEDULES),
            )
        )

    def written(self, reply: Any) -> datetime | Next[datetime | None] | None:
        """schedule.lua's reply: the next fire time (ms, -1 while paused) or a code."""
        code = int(reply)
        queue = self.engine.queue
        if code == E_SCHEDULE_CHANGED:  # replaced by someone else since the read
            return Next(self.read())
        if code == E_SCHEDULE_LIMIT:
            raise InvalidSchedule(
                f"queue {queue!r} holds {MAX_SCHEDULES} schedules (the limit); "
                f"cannot add {self.schedule_id!r}"
            )
        if code == E_ORDERING:
            raise OrderingMismatch(
                f"queue {queue!r} exists with another ordering than "
                f"{self.engine.options.ordering!r}"
            )
        return ms(reply)


class ScheduleResume:
    """``resume_schedule()`` as a chain: read the schedule, then resume it from its
    first fire time after now if it is still the revision read (else read again)."""

    def __init__(self, engine: EngineBase, schedule_id: str) -> None:
        self.engine, self.schedule_id = engine, schedule_id

    def read(self) -> Call[bool | Next[bool]]:
        return read_schedule(self.engine, self.schedule_id, self.write)

    def write(self, reply: Any) -> bool | Next[bool]:
        read = ScheduleRows(*reply)
        stored = stored_definition(read)
        if stored is None:
            return False
        next_ms = str(stored.timing.next_after(int(read.now)))
        return Next(
            schedule_control(
                self.engine,
                RESUME,
                self.schedule_id,
                str(stored.revision),
                next_ms,
                parse=self.written,
            )
        )

    def written(self, reply: Any) -> bool | Next[bool]:
        code = int(reply)
        return Next(self.read()) if code == E_SCHEDULE_CHANGED else bool(code)


def read_schedule(engine: EngineBase, schedule_id: str, parse: Callable[[Any], Any]) -> Call[Any]:
    """listSchedules.lua's read of one schedule by id."""
    return engine._script("listSchedules", parse, schedule_id, "0", "1")


def schedule_control(
    engine: EngineBase, action: str, *args: str, parse: Callable[[Any], Any] = decode_existed
) -> Call[Any]:
    return engine._script("scheduleControl", parse, action, *args)


class ScheduleCalls(EngineBase):
    """Creating, listing, removing, pausing and resuming schedules."""

    def schedule(
        self,
        schedule_id: str,
        *,
        cron: str | None = None,
        every: float | None = None,
        name: str,
        data: Any = None,
        priority: int = 0,
        group: str | None = None,
        tz: str = "UTC",
        max_attempts: int | None = None,
        skip_if_running: bool = False,
        catch_up: bool = True,
    ) -> Call[datetime | Next[datetime | None] | None]:
        """Create or replace a schedule: a job ``name`` with ``data`` added at every
        fire time of ``cron`` (5 fields, in zone ``tz``) or ``every`` seconds.

        The reply is its next fire time (None while it is paused). Replacing a
        schedule keeps its next fire time when its timing (cron/every/tz) is
        unchanged, and keeps it paused if it was. ``skip_if_running``: a fire
        makes no job while the previous fire's job is waiting, delayed,
        retrying or active. ``catch_up=False``: a fire reached late (more than
        one period or 60 s after its time) makes no job; by default fires missed
        while no worker ran yield one catch-up job. ``max_attempts=None``: the
        queue's stored setting at each fire, else this client's default. Raises
        InvalidSchedule (or the option's error) before anything is written."""
        check_schedule_id(schedule_id)
        timing = Timing.checked(cron, every, tz)
        check_job_name(name)
        for flag, value in (("skip_if_running", skip_if_running), ("catch_up", catch_up)):
            if not isinstance(value, bool):
                raise InvalidOption(f"{flag} {value!r} must be True or False")
        attempts = (
            self._default_attempts
            if max_attempts is None
            else check_int("max_attempts", max_attempts, 1, MAX_ATTEMPTS)
        )
        base = Definition(
            timing,
            name,
            encode_payload(data, limit=self.options.max_payload),
            check_tier(priority),
            lane_of(group),
            attempts,
            skip_if_running,
            catch_up,
        )
        return ScheduleWrite(self, schedule_id, base).read()

    def schedules(self) -> Call[list[ScheduleInfo]]:
        """Every schedule (id order) with its next fire, last fire and that fire's
        job's state (``last_outcome``)."""
        return self._script("listSchedules", decode_schedules, "", "1", str(MAX_SCHEDULES))

    def unschedule(self, schedule_id: str) -> Call[bool]:
        """Remove a schedule; the reply says whether it existed. Jobs it added stay."""
        return schedule_control(self, REMOVE, check_schedule_id(schedule_id))

    def pause_schedule(self, schedule_id: str) -> Call[bool]:
        """Stop a schedule firing (it keeps its definition); False if unknown."""
        return schedule_control(self, PAUSE, check_schedule_id(schedule_id))

    def resume_schedule(self, schedule_id: str) -> Call[bool | Next[bool]]:
        """Fire a paused schedule again, from its first fire time after now (fires
        while it was paused are not caught up); False if unknown."""
        check_schedule_id(schedule_id)
        return ScheduleResume(self, schedule_id).read()
