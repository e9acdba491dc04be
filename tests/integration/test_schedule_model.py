"""Schedules (docs/lifecycle.md "Schedules") as properties: a real server, on a
clock the test freezes and moves (tests/clock.py ``FrozenClock``), fires what
``tests/schedule_model.py`` fires.

Hypothesis draws programs that interleave schedule operations (create,
replace, pause, resume, unschedule), clock advances, maintenance calls
(alone, or two firers racing: both read, something happens, both fire) with
adds (some delayed), claims, short leases that run out, completes, fails,
releases, removals and lane ``max_waiting``. After every step:

- every claim returns the model's jobs in the model's order (the order model
  of tests/model.py: fired jobs are fresh arrivals in their lanes);
- every maintenance call fired and skipped as many as the model, and each
  job it added (read from the ``scheduled`` events, in order) carries the
  schedule id and the fire time the model gave it: each fire time at most
  once, one catch-up job for the fires missed while nothing ran;
- ``schedules()`` shows the model's next fire, last fire, last job and its
  outcome, skips and last skip reason, and pause flag.

Nothing waits for real time: the server's clock only moves when the program
advances it, so every example is exact and repeatable.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from conftest import FrozenServer
from echomq import LaneFull, LeaseLost, SyncQueue, connection
from echomq.job import Job, State
from echomq.options import Ordering
from echomq.reports import MaintenanceReport
from echomq.steps import Next
from integration.lockstep import CI, ORDERINGS, PROFILE, EventIds, ms
from integration.test_order_model import (
    Add,
    Claim,
    Complete,
    Fail,
    Maintain,
    Op,
    Release,
    Remove,
    SetMaxWaiting,
    SetWeight,
    Stall,
    completes,
    drop_queue,
    releases,
    removes,
)
from model import UNSET, Group, OrderModel
from schedule_model import ScheduleModel, Timing

#: fewer examples than the order model's tests (each runs longer: many steps, a
#: schedules() read after each); a fixed seed in CI as theirs
SCHEDULE_PROFILE = settings(PROFILE, max_examples=120 if CI else 40)
DAY = 86_400.0
LEASE = 6 * DAY  # longer than any example's clock moves
SHORT_LEASE = 90.0  # runs out at a later advance: a stall
MAX_STALLS = 1

# the timings drawn: (every seconds | (cron, tz)) and the model's progression
EVERY = {60: Timing(60_000), 90: Timing(90_000), 300: Timing(300_000)}
CRON = {
    ("*/2 * * * *", "UTC"): Timing(120_000, 0),
    ("*/5 * * * *", "Europe/Berlin"): Timing(300_000, 0),
    ("0 * * * *", "Asia/Kolkata"): Timing(3_600_000, 1_800_000),  # :00 IST is :30 UTC
}
SCHEDULE_IDS = ("s1", "s2", "s3")
GROUPS: tuple[Group, ...] = (None, "a", "b")


@dataclass(frozen=True)
class Schedule:
    schedule_id: str
    every: int | None  # seconds (a key of EVERY); None: ``cron``
    cron: tuple[str, str] | None  # (expression, zone), a key of CRON
    tier: int
    group: Group
    skip_if_running: bool
    catch_up: bool


@dataclass(frozen=True)
class Unschedule:
    schedule_id: str


@dataclass(frozen=True)
class PauseSchedule:
    schedule_id: str


@dataclass(frozen=True)
class ResumeSchedule:
    schedule_id: str


@dataclass(frozen=True)
class Advance:
    ms: int


@dataclass(frozen=True)
class Tick:
    """The clock moves ``ms``, then a maintenance call (a worker waking for a fire)."""

    ms: int


@dataclass(frozen=True)
class Race:
    """Two firers: both maintenance calls read the due schedules, then
    ``between`` happens, then both fire (the first, then the stale one)."""

    between: Op | ScheduleOp | None


ScheduleOp = (
    Schedule | Unschedule | PauseSchedule | ResumeSchedule | Advance | Maintain | Tick | Race
)

schedule_ids = st.sampled_from(SCHEDULE_IDS)
groups = st.sampled_from(GROUPS)
schedules_ = st.builds(
    Schedule,
    schedule_ids,
    st.sampled_from([None, *EVERY]),
    st.sampled_from(list(CRON)),
    st.integers(0, 2),
    groups,
    st.booleans(),
    st.sampled_from([True, True, False]),
)
# 60 s from a whole minute lands on fire times exactly; 61 s just past them;
# 150 s and an hour pass several fire times at once (one catch-up job)
advances = st.builds(
    Advance, st.sampled_from([1_000, 30_000, 45_000, 60_000, 60_000, 61_000, 150_000, 3_600_000])
)
ticks = st.builds(Tick, st.sampled_from([30_000, 60_000, 90_000, 120_000, 300_000]))
adds = st.builds(Add, st.integers(0, 2), groups, st.sampled_from([None, None, 30.0, 90.0]))
claims = st.builds(Claim, st.integers(1, 4))
stalls = st.builds(Stall, st.integers(1, 2))
fails = st.builds(Fail, st.integers(0, 7), st.sampled_from([None, 0.0, 30.0, 90.0]))
max_waitings = st.builds(SetMaxWaiting, groups, st.sampled_from([None, 0, 1, 2]))
between = st.one_of(
    st.none(),
    advances,
    st.builds(PauseSchedule, schedule_ids),
    st.builds(Unschedule, schedule_ids),
    schedules_,
    claims,
    st.just(Maintain()),
)
races = st.builds(Race, between)


class ScheduleLockstep:
    """A queue, its order model and schedule model, on a frozen server clock."""

    def __init__(self, queue: SyncQueue, rival: SyncQueue, frozen: FrozenServer) -> None:
        self.queue = queue
        self.rival = rival  # a second client: the other firer of a Race
        self.clock = frozen.clock
        self.order = OrderModel(queue.options.ordering, max_stalls=MAX_STALLS)
        self.model = ScheduleModel(self.order)
        self.held: dict[str, Job] = {}
        self.ids: list[str] = []
        self.fired: dict[str, tuple[str, int]] = {}  # job id -> (schedule id, fire time)
        self.events = EventIds(queue)

    @property
    def now(self) -> int:
        return self.clock.now_ms

    def run(self, program: Sequence[Op | ScheduleOp]) -> None:
        self.check_schedules()
        for op in program:
            self.apply(op)
            self.check_schedules()
        self.clock.advance(61_000)
        self.maintain()
        while self.claim(7, LEASE):
            pass
        assert self.order.waiting() == 0
        self.check_states()

    # -- operations --------------------------------------------------------------
    def apply(self, op: Op | ScheduleOp | None) -> None:
        match op:
            case None:
                pass
            case Schedule() | Unschedule() | PauseSchedule() | ResumeSchedule():
                self.definition(op)
            case Advance(step):
                self.clock.advance(step)
            case Maintain():
                self.maintain()
            case Tick(step):
                self.clock.advance(step)
                self.maintain()
            case Race(between):
                self.race(between)
            case _:
                self.job_op(op)

    def definition(self, op: Schedule | Unschedule | PauseSchedule | ResumeSchedule) -> None:
        match op:
            case Schedule():
                self.schedule(op)
            case Unschedule(sid):
                assert self.queue.unschedule(sid) == self.model.unschedule(sid)
            case PauseSchedule(sid):
                assert self.queue.pause_schedule(sid) == self.model.pause(sid)
            case ResumeSchedule(sid):
                assert self.queue.resume_schedule(sid) == self.model.resume(sid, self.now)

    def job_op(self, op: Op) -> None:
        match op:
            case Add(tier, group, delay):
                self.add(tier, group, delay)
            case Claim(n):
                self.claim(n, LEASE)
            case Stall(n):
                self.claim(n, SHORT_LEASE)
            case Complete() | Fail() | Release():
                self.outcome(op)
            case Remove(pick):
                self.remove(pick)
            case SetMaxWaiting(group, most):
                self.queue.set_lane(group, max_waiting=most)
                self.order.set_lane(group, max_waiting=most)
            case SetWeight(group, weight):
                self.queue.set_weight(group, weight)
                self.order.set_weight(group, weight)
            case _:
                raise AssertionError(f"not a schedule-model operation: {op}")

    def schedule(self, op: Schedule) -> None:
        options: dict[str, Any] = {
            "name": f"job-{op.schedule_id}",
            "priority": op.tier,
            "group": op.group,
            "skip_if_running": op.skip_if_running,
            "catch_up": op.catch_up,
        }
        if op.every is not None:
            options["every"] = op.every
            timing = EVERY[op.every]
        else:
            assert op.cron is not None
            options["cron"], options["tz"] = op.cron
            timing = CRON[op.cron]
        got = self.queue.schedule(op.schedule_id, **options)
        want = self.model.schedule(
            op.schedule_id,
            timing,
            self.now,
            tier=op.tier,
            group=op.group,
            skip_if_running=op.skip_if_running,
            catch_up=op.catch_up,
        )
        assert (None if got is None else ms(got)) == want, f"schedule {op}: {got}, model {want}"

    def add(self, tier: int, group: Group, delay: float | None) -> None:
        if self.order.refused_lane([group]) is not UNSET:
            with pytest.raises(LaneFull):
                self.queue.add("job", priority=tier, group=group, delay=delay)
            return
        job_id = self.queue.add("job", priority=tier, group=group, delay=delay)
        fire_at = None if not delay else self.now + round(delay * 1000)
        self.order.add(job_id, tier, group, fire_at=fire_at)
        self.ids.append(job_id)

    def claim(self, n: int, lease: float) -> list[str]:
        if any(fire <= self.now for fire in self.order.delayed.values()):
            event("a claim promoted due jobs")
        if any(deadline <= self.now for deadline in self.order.active.values()):
            event("a claim returned expired leases")
        jobs = self.queue.claim(n, lease=lease)
        deadline = self.now + round(lease * 1000)
        want = self.order.claim(n, now=self.now, deadline=deadline)
        got = [job.id for job in jobs]
        assert got == want, f"claim({n}) at {self.now}: {got}, the model {want}"
        if set(got) & set(self.fired):
            event("claimed a fired job")
        for job in jobs:
            assert ms(job.lease_deadline) == deadline
        self.held.update((job.id, job) for job in jobs)
        self.forget_reaped()
        return got

    def forget_reaped(self) -> None:
        """Held jobs whose lease ran out (a claim or maintenance reaped them) are
        no longer this worker's to finish."""
        self.held = {i: job for i, job in self.held.items() if i in self.order.active}

    def outcome(self, op: Complete | Fail | Release) -> None:
        if not self.held:
            return
        job = self.held.pop(list(self.held)[op.pick % len(self.held)])
        if self.order.active[job.id] <= self.now:
            # its lease ran out (not yet reaped): the outcome is refused, the job
            # comes back at the next claim or maintenance
            event("an outcome after the lease deadline")
            with pytest.raises(LeaseLost):
                self.queue.complete(job, result=None)
            return
        match op:
            case Complete():
                self.queue.complete(job, result=None)
                self.order.complete(job.id)
            case Release():
                self.queue.release(job)
                self.order.release(job.id)
            case Fail(_, delay):
                state = self.queue.fail(job, "boom", retry=delay is not None, retry_delay=delay)
                fire = None if delay is None else self.now + round(delay * 1000)
                want = self.order.fail(job.id, fire)
                assert state == want, f"fail of {job.id}: {state}, the model {want}"

    def remove(self, pick: int) -> None:
        candidates = self.order.waiting_ids() or self.ids
        if candidates:
            job_id = candidates[pick % len(candidates)]
            assert self.queue.remove(job_id) == (job_id in self.order.jobs)
            self.order.remove(job_id)
            self.held.pop(job_id, None)

    # -- firing ----------------------------------------------------------------------
    def maintain(self) -> None:
        report = self.queue.maintain()
        assert ms(report.server_time) == self.now
        outcomes = self.model.maintain(self.now, self.scheduled())
        assert (report.promoted, report.reaped) == (self.model.promoted, self.model.reaped)
        if report.reaped:
            event("maintenance returned an expired lease")
        self.forget_reaped()
        fired = sum(1 for o in outcomes if o.job_id)
        skipped = sum(1 for o in outcomes if o.skip)
        assert (report.fired, report.skipped) == (fired, skipped), f"maintain: {report}"
        self.check_fired(outcomes)

    def race(self, between: Op | ScheduleOp | None) -> None:
        """Both firers read at once; ``between`` happens; both fire, first then stale."""
        first = self.queue.sender.send(self.queue.engine.maintain())
        stale = self.rival.sender.send(self.rival.engine.maintain())
        plans = self.model.read_due(self.now)
        self.forget_reaped()
        self.model.read_due(self.now)  # the second read promotes and reaps nothing more
        assert isinstance(first, Next) == isinstance(stale, Next) == bool(plans)
        self.apply(between)
        if between is not None:
            event(f"race with {type(between).__name__} between")
        for queue, step in ((self.queue, first), (self.rival, stale)):
            if not isinstance(step, Next):
                continue
            report = queue.sender.send(step.call)
            assert isinstance(report, MaintenanceReport)
            outcomes = self.model.fire(plans, self.scheduled())
            fired = sum(1 for o in outcomes if o.job_id)
            assert report.fired == fired, f"race ({between}): fired {report.fired}, model {fired}"
            self.check_fired(outcomes)

    def scheduled(self) -> list[str]:
        """The ids of the ``scheduled`` events since the last read, in stream order."""
        return self.events.since_last("scheduled")

    def check_fired(self, outcomes: list[Any]) -> None:
        for outcome in outcomes:
            if outcome.skip:
                event(f"a fire skipped: {outcome.skip}")
            if outcome.job_id is None:
                continue
            plan = outcome.planned
            key = (plan.schedule_id, plan.fire)
            assert key not in self.fired.values(), f"fire time {key} made a second job"
            self.fired[outcome.job_id] = key
            self.ids.append(outcome.job_id)
            job = self.queue.get(outcome.job_id)
            assert job is not None
            assert (job.schedule_id, ms(job.fire_time), job.state) == (*key, State.WAITING)
            s = self.model.schedules[plan.schedule_id]
            assert (job.priority, job.group) == (s.tier, s.group)
            if s.timing.next_after(plan.fire, s.anchor) <= self.now:
                event("one catch-up job for missed fires")
            else:
                event("a job fired on time")

    # -- reading ---------------------------------------------------------------------
    def check_schedules(self) -> None:
        """schedules() is the model's view, schedule by schedule."""
        got = {info.id: info for info in self.queue.schedules()}
        assert set(got) == set(self.model.schedules)
        for sid, s in self.model.schedules.items():
            info = got[sid]
            last_fire = None if info.last_fire is None else ms(info.last_fire)
            next_fire = None if info.next_fire is None else ms(info.next_fire)
            outcome = None if s.last_job is None else self.model.state(s.last_job)
            assert (
                info.paused, next_fire, last_fire, info.last_job_id, info.last_outcome,
                info.skipped, info.last_skip, info.priority, info.group,
            ) == (
                s.paused, s.next_fire, s.last_fire, s.last_job, outcome,
                s.skipped, s.last_skip, s.tier, s.group,
            ), f"schedule {sid} at {self.now}"  # fmt: skip

    def check_states(self) -> None:
        for job_id in self.ids:
            job = self.queue.get(job_id)
            want = self.model.state(job_id)
            assert (job.state.value if job else "gone") == want, f"{job_id}: {job}, model {want}"


@contextlib.contextmanager
def frozen_queues(
    frozen: FrozenServer, base: str, ordering: Ordering
) -> Iterator[tuple[SyncQueue, SyncQueue]]:
    """A fresh queue on the frozen server and a second client's handle on it."""
    clients = [connection.sync_client(frozen.url) for _ in range(2)]
    name = f"{base[:100]}-{ordering}-{os.urandom(4).hex()}"
    options: dict[str, Any] = {
        "ordering": ordering,
        "max_stalls": MAX_STALLS,
        "keep_completed_age": 30 * DAY,  # the program's clock moves never prune
        "keep_dead_age": 30 * DAY,
    }
    queues = [SyncQueue(name, client=c, **options) for c in clients]
    try:
        yield queues[0], queues[1]
    finally:
        drop_queue(clients[0], queues[0].engine.keys)  # the schedules' keys are fixed keys
        for c in clients:
            c.close()


# pinned scenarios: fires missed while nothing ran make one catch-up job
# carrying the oldest missed fire time; a late fire is skipped with
# catch_up=False; skip_if_running; a stale firer loses the compare-and-set
CATCH_UP = [Schedule("s1", 60, None, 0, None, False, True), Advance(150_000), Maintain(),
            Advance(60_000), Maintain(), Claim(2)]  # fmt: skip
LATE = [Schedule("s1", 60, None, 0, None, False, False), Advance(60_000), Maintain(),
        Advance(150_000), Maintain(), Advance(30_000), Maintain()]  # fmt: skip
RUNNING = [Schedule("s1", None, ("*/2 * * * *", "UTC"), 0, "a", True, True), Advance(120_000),
           Maintain(), Claim(1), Advance(120_000), Maintain(), Complete(0), Advance(120_000),
           Maintain()]  # fmt: skip
RACE = [Schedule("s1", 60, None, 0, None, False, True), Schedule("s2", 90, None, 1, "a", False,
        True), Advance(3_600_000), Race(None), Advance(60_000), Race(PauseSchedule("s1")),
        ResumeSchedule("s1"), Advance(90_000), Race(Maintain())]  # fmt: skip
LANE_FULL = [SetMaxWaiting("b", 1), Schedule("s1", 60, None, 0, "b", False, True),
             Schedule("s2", 90, None, 0, "b", False, True), Advance(3_600_000),
             Maintain()]  # fmt: skip

# a stalled job's outcome after its deadline, before anything reaped it, is refused
LATE_OUTCOME = [Add(0, None), Stall(1), Advance(150_000), Complete(0), Claim(1)]


@SCHEDULE_PROFILE
@given(
    program=st.lists(
        st.one_of(
            schedules_,
            schedules_,
            st.builds(Unschedule, schedule_ids),
            st.builds(PauseSchedule, schedule_ids),
            st.builds(ResumeSchedule, schedule_ids),
            advances,
            advances,
            advances,
            st.just(Maintain()),
            ticks,
            ticks,
            races,
            adds,
            claims,
            claims,
            stalls,
            completes,
            completes,
            fails,
            releases,
            removes,
            max_waitings,
        ),
        min_size=8,
        max_size=30,
    ),
    # most examples give some lanes a max_waiting first, so full lanes are common
    limits=st.lists(max_waitings, max_size=2),
)
@example(program=CATCH_UP, limits=[])
@example(program=LATE, limits=[])
@example(program=RUNNING, limits=[])
@example(program=RACE, limits=[])
@example(program=LANE_FULL, limits=[])
@example(program=LATE_OUTCOME, limits=[])
def test_schedules_follow_the_model(
    frozen_server: FrozenServer,
    queue_name: str,
    program: list[Op | ScheduleOp],
    limits: list[SetMaxWaiting],
) -> None:
    """Each fire time makes at most one job, carrying the schedule id and the
    fire time; missed fires collapse into one catch-up job (or a "missed" skip
    with catch_up=False); pause, resume, replace and unschedule, overlap and
    full lanes, racing firers, and the claims of the fired jobs among the
    others all match the model, and so does schedules()."""
    for ordering in ORDERINGS:
        with frozen_queues(frozen_server, queue_name, ordering) as (queue, rival):
            ScheduleLockstep(queue, rival, frozen_server).run([*limits, *program])


# -- the same clock without schedules: delays, retries and leases to the millisecond -----
# two jobs due at one fire time are promoted in id order (composite: both
# behind the job added meanwhile); two leases that run out together come back
# in id order; a retry comes due with a fresh arrival; a lease runs out again
# and the job is dead (max_stalls 1)
SAME_FIRE_TIME = [Add(0, "a", 30.0), Add(0, "b", 30.0), Add(0, "a"), Advance(30_000), Claim(3)]
STALLS_TOGETHER = [Add(0, "b"), Add(0, "a"), Stall(2), Advance(90_000), Maintain(), Claim(2)]
RETRY_LATER = [Add(0, "a"), Claim(1), Fail(0, 30.0), Add(0, "a"), Advance(30_000), Claim(2)]
STALL_TWICE = [Add(0, None), Stall(1), Advance(90_000), Stall(1), Advance(90_000), Maintain()]


@SCHEDULE_PROFILE
@given(
    program=st.lists(
        st.one_of(
            adds,
            adds,
            st.builds(SetWeight, groups, st.integers(1, 3)),
            advances,
            ticks,
            st.just(Maintain()),
            claims,
            claims,
            stalls,
            stalls,
            completes,
            fails,
            releases,
            removes,
        ),
        min_size=8,
        max_size=30,
    )
)
@example(program=SAME_FIRE_TIME)
@example(program=STALLS_TOGETHER)
@example(program=RETRY_LATER)
@example(program=STALL_TWICE)
def test_delays_and_leases_follow_the_model_on_a_frozen_clock(
    frozen_server: FrozenServer, queue_name: str, program: list[Op | ScheduleOp]
) -> None:
    """With the server's clock still between steps, delayed jobs and retries come
    due and leases run out at exactly the model's times: ties of one fire time
    or one deadline, promotions and reaps by a claim or by maintenance, an
    outcome after the deadline refused, a second stall dead."""
    for ordering in ORDERINGS:
        with frozen_queues(frozen_server, queue_name, ordering) as (queue, rival):
            ScheduleLockstep(queue, rival, frozen_server).run(program)
