"""A reference model of schedules (docs/lifecycle.md "Schedules"), in plain Python, no I/O.

It drives an :class:`~model.OrderModel` (the jobs a fire adds enter their
lanes there) and is told the server's clock, which the tests freeze and move
themselves (tests/clock.py ``FrozenClock``), so it predicts exactly which fire
times make jobs:

- a schedule's fire times form a progression: ``every`` E from its anchor
  (the server time it was created or its timing last changed), a cron
  expression as ``(period, offset)`` in UTC (the expressions the tests use
  have fixed periods, e.g. ``0 * * * *`` in Asia/Kolkata fires at :30 UTC);
  its next fire is the first fire time *strictly after* a moment (for
  ``every``, the anchor itself while the moment is before it);
- ``schedule`` stores its next fire after now; replacing it with the same
  timing keeps the stored next fire and the anchor, any replace bumps the
  revision and keeps the last-fire record; a paused schedule stays paused
  (no next fire);
- ``pause`` drops the next fire; ``resume`` stores the next fire after now
  (fires while paused are not caught up); ``unschedule`` forgets it all (the
  jobs it added stay);
- a maintenance call at ``now`` first promotes the due delayed jobs and
  returns the expired leases (as a claim does), then *reads* the due
  schedules (next fire <= now, by fire time then id) and plans each: its
  next fire is the first after now (the fires missed meanwhile collapse into
  this one: **one catch-up job**, carrying the oldest missed fire time), and
  with ``catch_up=False`` a fire reached more than min(period, 60 s) late is
  skipped ("missed");
- the *fire* of a plan is a compare-and-set: it does nothing unless the
  schedule still has the revision and the next fire it read (another firer
  took it, or it was paused, replaced or removed meanwhile); else it stores
  the planned next fire and adds the job (waiting, a fresh arrival, carrying
  the schedule id and the fire time) or counts a skip: "missed" as planned,
  "running" (``skip_if_running``, the previous fire's job is waiting,
  delayed, retry-pending or active), "lane-full" (the lane holds its
  max_waiting). A skip leaves the last fire and its job as they were.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from model import Group, OrderModel

#: a fire reached later than this (or than one period, if shorter) is missed (catch_up=False)
MISSED_AFTER_MS = 60_000


@dataclass(frozen=True)
class Timing:
    """Fire times ``t`` with ``t % period == offset % period`` (cron), or from an
    anchor every ``period`` (every: ``offset`` is None, the anchor is the schedule's)."""

    period: int
    offset: int | None = None

    def next_after(self, ms: int, anchor: int) -> int:
        base = anchor if self.offset is None else self.offset
        if self.offset is None and ms < anchor:
            return anchor
        return base + ((ms - base) // self.period + 1) * self.period


@dataclass
class ModelSchedule:
    timing: Timing
    tier: int
    group: Group
    skip_if_running: bool
    catch_up: bool
    anchor: int
    revision: int = 1
    next_fire: int | None = None  # None while paused
    paused: bool = False
    last_fire: int | None = None
    last_job: str | None = None
    skipped: int = 0
    last_skip: str | None = None


@dataclass(frozen=True)
class Planned:
    """A due fire as a maintenance call read it (what its fire script is sent)."""

    schedule_id: str
    revision: int
    fire: int
    next_fire: int
    missed: bool


@dataclass
class FireOutcome:
    planned: Planned
    job_id: str | None = None  # the job it added
    skip: str | None = None  # why it added none; both None: the compare-and-set lost


@dataclass
class ScheduleModel:
    order: OrderModel
    schedules: dict[str, ModelSchedule] = field(default_factory=dict)
    promoted: int = 0  # by the last read_due (as MaintenanceReport.promoted)
    reaped: int = 0

    # -- definitions -------------------------------------------------------------
    def schedule(
        self,
        schedule_id: str,
        timing: Timing,
        now: int,
        *,
        tier: int = 0,
        group: Group = None,
        skip_if_running: bool = False,
        catch_up: bool = True,
    ) -> int | None:
        """Create or replace; returns the stored next fire (None while paused)."""
        old = self.schedules.get(schedule_id)
        keep = old is not None and old.timing == timing
        new = ModelSchedule(
            timing,
            tier,
            group,
            skip_if_running,
            catch_up,
            anchor=old.anchor if old is not None and keep else now,
            revision=1 if old is None else old.revision + 1,
        )
        if old is not None:  # the last-fire record and the pause stay
            new.paused, new.last_fire, new.last_job = old.paused, old.last_fire, old.last_job
            new.skipped, new.last_skip = old.skipped, old.last_skip
            if keep:
                new.next_fire = old.next_fire
        if not new.paused and new.next_fire is None:
            new.next_fire = timing.next_after(now, new.anchor)
        self.schedules[schedule_id] = new
        return new.next_fire

    def unschedule(self, schedule_id: str) -> bool:
        return self.schedules.pop(schedule_id, None) is not None

    def pause(self, schedule_id: str) -> bool:
        s = self.schedules.get(schedule_id)
        if s is None:
            return False
        s.paused, s.next_fire = True, None
        return True

    def resume(self, schedule_id: str, now: int) -> bool:
        s = self.schedules.get(schedule_id)
        if s is None:
            return False
        s.paused = False
        if s.next_fire is None:
            s.next_fire = s.timing.next_after(now, s.anchor)
        return True

    # -- firing ---------------------------------------------------------------------
    def read_due(self, now: int) -> list[Planned]:
        """A maintenance call's read at ``now``: promote and reap (as a claim),
        then plan the due schedules by fire time, then id."""
        o = self.order
        self.promoted = sum(1 for fire in o.delayed.values() if fire <= now)
        self.reaped = sum(1 for deadline in o.active.values() if deadline <= now)
        o.claim(0, now=now)
        due = sorted(
            (s.next_fire, sid)
            for sid, s in self.schedules.items()
            if s.next_fire is not None and s.next_fire <= now
        )
        plans = []
        for fire, sid in due:
            s = self.schedules[sid]
            period = s.timing.next_after(fire, s.anchor) - fire
            missed = not s.catch_up and now - fire > min(period, MISSED_AFTER_MS)
            next_fire = s.timing.next_after(now, s.anchor)
            plans.append(Planned(sid, s.revision, fire, next_fire, missed))
        return plans

    def fire(self, plans: list[Planned], job_ids: list[str]) -> list[FireOutcome]:
        """The fire script for ``plans``; the jobs it adds take ``job_ids`` in
        order (the ids the server reported, checked to be exactly as many)."""
        ids = list(job_ids)
        outcomes = []
        room: dict[Group, int] = {}
        for plan in plans:
            outcome = FireOutcome(plan)
            outcomes.append(outcome)
            s = self.schedules.get(plan.schedule_id)
            if s is None or s.revision != plan.revision or s.next_fire != plan.fire:
                continue  # the compare-and-set lost: nothing at all
            skip = "missed" if plan.missed else None
            if skip is None and s.skip_if_running and s.last_job and self.running(s.last_job):
                skip = "running"
            if skip is None and s.group in self.order.max_waiting:
                left = room.setdefault(
                    s.group, self.order.max_waiting[s.group] - self.order.held(s.group)
                )
                if left <= 0:
                    skip = "lane-full"
                else:
                    room[s.group] = left - 1
            s.next_fire = plan.next_fire
            if skip is not None:
                s.skipped += 1
                s.last_skip = outcome.skip = skip
                continue
            assert ids, f"the model fires {plan}, the server reported no more jobs"
            job_id = ids.pop(0)
            self.order.add(job_id, s.tier, s.group)
            s.last_fire, s.last_job, outcome.job_id = plan.fire, job_id, job_id
        assert not ids, f"the server added jobs {ids} the model did not fire"
        return outcomes

    def maintain(self, now: int, job_ids: list[str]) -> list[FireOutcome]:
        return self.fire(self.read_due(now), job_ids)

    # -- reading ---------------------------------------------------------------------
    def running(self, job_id: str) -> bool:
        """Waiting, delayed, retry-pending or active (not completed, dead or gone)."""
        return self.state(job_id) in ("waiting", "delayed", "failed", "active")

    def state(self, job_id: str) -> str:
        """A job's state as the server names it; "gone" once removed."""
        o = self.order
        if job_id not in o.jobs:
            return "gone"
        if job_id in o.completed:
            return "completed"
        if job_id in o.dead:
            return "dead"
        if job_id in o.active:
            return "active"
        if job_id in o.retrying:
            return "failed"
        if job_id in o.delayed:
            return "delayed"
        if job_id in o.blocked:
            return "blocked"
        return "waiting"
