"""The order theorem (DESIGN §3) as properties: a real server claims what the model claims.

Hypothesis draws programs of adds, batch adds, weight changes, removals,
claims, and outcomes of claimed jobs (complete, fail with or without a retry,
release, release with a throttle), pause/resume, retry_dead and the lane
controls (caps, rates, lane pauses, max_waiting, throttles, change,
queue-wide limits); each runs against a fresh queue on a
real server and against ``tests/model.py`` (the spec), and every claim must
return the same ids in the same order. Each example runs under both
orderings; every test runs on each backend.

Examples and seed: locally 60 per test from a random seed, so every run
explores new programs (a failure prints the ``@reproduce_failure`` blob that
replays it); with ``CI`` set (or ``HYPOTHESIS_PROFILE=ci``) 500 per test from
a fixed seed (``derandomize``), so a CI run is repeatable.

Timing never decides an outcome: a short delay or lease is always waited out
on the server clock before the next operation, and the model is told that
clock, so it knows exactly what the next claim promotes and reaps.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import math
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

from clock import FrozenClock
from conftest import FrozenServer
from echomq import InvalidDependency, LaneFull, SyncQueue, connection
from echomq.job import Job, State
from echomq.keys import QueueKeys, lane_of
from echomq.options import Ordering
from echomq.score import MAX_TIER
from echomq.scripts import budget
from integration.lockstep import ORDERINGS, PROFILE, EventIds, ms
from keyspace import set_counter
from model import NEVER, UNSET, Group, OrderModel

pytestmark = pytest.mark.only_backends(
    "valkey", "redis", "cluster", reason="many examples each; Valkey 9.1 runs the other tests"
)

RENUMBER_AT = budget("renumber", "RENUMBER_AT")  # a renumbering starts past this counter

SHORT = 0.001  # seconds: a delay or lease that is waited out before the next operation
FAR_FUTURE = 3600.0  # seconds: a delay no test outlives
LONG_LEASE = 30.0
_SERIAL = itertools.count()


# -- operations ---------------------------------------------------------------
@dataclass(frozen=True)
class Add:
    tier: int
    group: Group
    delay: float | None = None


@dataclass(frozen=True)
class AddMany:
    items: tuple[Add, ...]
    late_first: bool = False  # ids minted in item order, sent newest first (producer skew)


@dataclass(frozen=True)
class SetWeight:
    group: Group
    weight: int


@dataclass(frozen=True)
class Claim:
    n: int


@dataclass(frozen=True)
class Remove:
    pick: int  # index (mod their number) into the waiting jobs, head lane first


@dataclass(frozen=True)
class Stall:
    n: int  # claim n on a SHORT lease and let it run out


@dataclass(frozen=True)
class Complete:
    pick: int  # index (mod their number) into the jobs held on a long lease, oldest claim first


@dataclass(frozen=True)
class Fail:
    pick: int
    delay: float | None  # the retry delay in seconds; None = fail without retry (dead now)


@dataclass(frozen=True)
class Release:
    pick: int


@dataclass(frozen=True)
class Pause:
    pass


@dataclass(frozen=True)
class Resume:
    pass


@dataclass(frozen=True)
class RetryDead:
    picks: tuple[int, ...]  # indexes (mod their number) into every id added, in this order


@dataclass(frozen=True)
class SetCap:
    group: Group
    cap: int | None  # concurrency; None removes the cap


@dataclass(frozen=True)
class Change:
    pick: int  # index (mod their number) into the waiting and delayed jobs
    tier: int
    group: Group


@dataclass(frozen=True)
class SetRate:
    group: Group
    most: int | None  # claims per RATE_WINDOW (longer than any example); None removes it


@dataclass(frozen=True)
class SetQueueLimits:
    cap: int | None  # queue-wide concurrency (configure); None removes it
    most: int | None  # queue-wide claims per RATE_WINDOW; None removes it


@dataclass(frozen=True)
class PauseLane:
    group: Group
    paused: bool


@dataclass(frozen=True)
class SetMaxWaiting:
    group: Group
    most: int | None  # max_waiting; None removes it


@dataclass(frozen=True)
class Throttle:
    group: Group
    far: bool  # FAR_FUTURE (not served for the rest of the example), else SHORT (waited out)


@dataclass(frozen=True)
class RateLimited:
    pick: int  # a held job released with a throttle of its lane (a handler's RateLimited)
    far: bool


@dataclass(frozen=True)
class AddDependent:
    tier: int
    group: Group
    picks: tuple[int, ...]  # indexes (mod their number) into every id added so far
    run_anyway: bool = False  # on_dependency_failure="run"


@dataclass(frozen=True)
class Maintain:
    pass


Outcome = Complete | Fail | Release | RateLimited
Control = SetCap | PauseLane | Change | SetRate | SetQueueLimits | SetMaxWaiting | Throttle
RATE_WINDOW = 3600.0
Op = (
    Add
    | AddMany
    | SetWeight
    | Claim
    | Remove
    | Stall
    | Outcome
    | Pause
    | Resume
    | RetryDead
    | Control
    | AddDependent
    | Maintain
)

GROUPS: tuple[Group, ...] = (None, "a", "b", "c")
BIG_TIERS = (MAX_TIER, MAX_TIER - 1, 2**20)
# one draw per tier: mostly 0…3 (so ties within a tier are common), sometimes a big one
tiers = st.integers(0, 11).map(lambda i: i % 4 if i < 9 else BIG_TIERS[i - 9])
groups = st.sampled_from(GROUPS)
NO_DELAY = st.none()
ANY_DELAY = st.sampled_from([None, 0.0, SHORT, FAR_FUTURE])


def adds(
    delays: st.SearchStrategy[float | None] = NO_DELAY,
    lanes: st.SearchStrategy[Group] = groups,
) -> st.SearchStrategy[Add]:
    return st.builds(Add, tiers, lanes, delays)


def add_manys(single: st.SearchStrategy[Add]) -> st.SearchStrategy[AddMany]:
    return st.builds(AddMany, st.lists(single, min_size=1, max_size=6).map(tuple), st.booleans())


claims = st.builds(Claim, st.integers(1, 7))
set_weights = st.builds(SetWeight, groups, st.integers(1, 5))
removes = st.builds(Remove, st.integers(0, 7))
stalls = st.builds(Stall, st.integers(1, 3))
completes = st.builds(Complete, st.integers(0, 7))
# mostly retried at once or after SHORT, so retried jobs meet the jobs waiting behind them
fails = st.builds(Fail, st.integers(0, 7), st.sampled_from([None, 0.0, 0.0, SHORT, FAR_FUTURE]))
releases = st.builds(Release, st.integers(0, 7))
pauses = st.one_of(st.just(Pause()), st.just(Resume()))
set_caps = st.builds(SetCap, groups, st.sampled_from([None, 1, 1, 2, 3]))
pause_lanes = st.builds(PauseLane, groups, st.booleans())
changes = st.builds(Change, st.integers(0, 7), tiers, groups)
set_rates = st.builds(SetRate, groups, st.sampled_from([None, 1, 2, 4]))
set_queue_limits = st.builds(
    SetQueueLimits, st.sampled_from([None, 1, 2, 3, 5]), st.sampled_from([None, None, 2, 4, 7])
)
set_max_waitings = st.builds(SetMaxWaiting, groups, st.sampled_from([None, 0, 1, 1, 2, 2, 3, 4]))
throttles = st.builds(Throttle, groups, st.booleans())
rate_limiteds = st.builds(RateLimited, st.integers(0, 7), st.booleans())
retry_deads = st.builds(RetryDead, st.lists(st.integers(0, 30), min_size=1, max_size=4).map(tuple))


def programs(
    *ops: st.SearchStrategy[Op], min_size: int = 4, max_size: int = 20
) -> st.SearchStrategy[list[Op]]:
    """Operation lists; most begin by weighting some lanes, so turns longer than 1 are common."""
    prelude = st.lists(set_weights, max_size=3)
    body = st.lists(st.one_of(*ops), min_size=min_size, max_size=max_size)
    return st.builds(lambda head, tail: [*head, *tail], prelude, body)


def lane_jobs(*lanes: Group) -> AddMany:
    """One tier-0 job per named lane, in that order."""
    return AddMany(tuple(Add(0, g) for g in lanes))


# -- a queue per example ---------------------------------------------------------
CLAIMERS = 3


@pytest.fixture
def client(backend_url: str) -> Iterator[connection.SyncClient]:
    """One connection per test, shared by the queues of all its examples."""
    c = connection.sync_client(backend_url)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def claimer_clients(backend_url: str) -> Iterator[list[connection.SyncClient]]:
    """A connection per concurrent claimer, shared by all examples of the test."""
    clients = [connection.sync_client(backend_url) for _ in range(CLAIMERS)]
    try:
        yield clients
    finally:
        for c in clients:
            c.close()


@contextlib.contextmanager
def fresh_queue(
    client: connection.SyncClient, base: str, ordering: Ordering, **options: Any
) -> Iterator[SyncQueue]:
    """A queue no other example has used; its keys are deleted afterwards."""
    name = f"{base[:100]}-{next(_SERIAL)}"
    queue = SyncQueue(name, ordering=ordering, client=client, **options)
    try:
        yield queue
    finally:
        drop_queue(client, queue.engine.keys)


def drop_queue(client: connection.SyncClient, keys: QueueKeys) -> None:
    """Delete every key of a queue these tests made (they never flush a server)."""
    sets = [
        keys.active, keys.delayed, keys.retrying, keys.completed, keys.dead, keys.blocked,
        *(keys.lane(lane_of(g)) for g in GROUPS),
    ]  # fmt: skip
    pipe = client.pipeline(transaction=False)
    for name in sets:
        pipe.zrange(name, 0, -1)
    job_ids = {job_id for members in pipe.execute() for job_id in members}
    client.unlink(*keys.fixed(), *sets, *(keys.job(job_id) for job_id in job_ids))


def server_ms(client: connection.SyncClient) -> int:
    sec, usec = client.time()
    return int(sec) * 1000 + int(usec) // 1000


def wait_for_server_ms(client: connection.SyncClient, target: float, timeout: float = 5.0) -> int:
    """Bounded poll of the server clock (the only clock) until it reads >= target; returns it."""
    limit = time.monotonic() + timeout
    while (now := server_ms(client)) < target:
        assert time.monotonic() < limit, f"server clock never reached {target}"
        time.sleep(0.0005)
    return now


# -- driving a queue and the model in lockstep --------------------------------
class Lockstep:
    """One queue and its model, fed the same operations; every claim is compared."""

    def __init__(self, queue: SyncQueue, model: OrderModel, *, anchors: int = 0) -> None:
        self.queue = queue
        self.model = model
        self.anchors = anchors  # jobs leased outside the program, unknown to the model
        self.ids: list[str] = []
        self.claimed: list[str] = []
        self.held: dict[str, Job] = {}  # claimed on a long lease, no outcome yet
        self.clock: float = -NEVER  # latest server time seen (ms)

    def wait_until(self, target: float) -> int:
        """Wait until the server's clock reads at least ``target`` (ms); returns it."""
        return wait_for_server_ms(self.queue.client(), target)

    @property
    def where(self) -> str:
        return f"[{self.model.ordering}] step {len(self.claimed)} claimed"

    def run(self, program: Sequence[Op]) -> None:
        for op in program:
            self.apply(op)
        if self.model.paused:
            self.apply(Resume())
        self.drain()
        self.check_counts()

    def apply(self, op: Op) -> None:
        match op:
            case Add():
                self.add(op)
            case AddMany(items, late_first):
                self._add_many(items, late_first)
            case SetWeight(group, weight):
                self.queue.set_weight(group, weight)
                self.model.set_weight(group, weight)
            case Claim(n):
                self.claim(n)
            case Remove(pick):
                self.remove(pick)
            case Stall(n):
                self.claim(n, lease=SHORT)
            case Complete() | Fail() | Release() | RateLimited():
                self.outcome(op)
            case Pause() | Resume() | RetryDead():
                self.control(op)
            case SetMaxWaiting() | Throttle():
                self.backpressure(op)
            case _:
                self.lane_control(op)

    def backpressure(self, op: SetMaxWaiting | Throttle) -> None:
        match op:
            case SetMaxWaiting(group, most):
                self.queue.set_lane(group, max_waiting=most)
                self.model.set_lane(group, max_waiting=most)
            case Throttle(group, far):
                self.queue.throttle(group, FAR_FUTURE if far else SHORT)
                self.model.throttle(group, far=far)
                if not far:  # waited out: it ended before the next operation
                    self.clock = self._wait_short()

    def lane_control(self, op: Control | AddDependent | Maintain) -> None:
        match op:
            case AddDependent() | Maintain():
                raise AssertionError(f"{op} needs a DependencyLockstep")
            case SetQueueLimits(cap, most):
                self.queue.configure(
                    concurrency=cap, rate=None if most is None else (most, RATE_WINDOW)
                )
                self.model.configure(concurrency=cap, rate=most)
            case SetRate(group, most):
                self.queue.set_lane(group, rate=None if most is None else (most, RATE_WINDOW))
                self.model.set_lane(group, rate=most)
            case Change(pick, tier, group):
                model = self.model
                movable = model.waiting_ids() + sorted(set(model.delayed) - model.retrying)
                if movable:
                    job_id = movable[pick % len(movable)]
                    if not model.change(job_id, tier, group):
                        event("max_waiting refused a change")
                        with pytest.raises(LaneFull, match=f"lane {group!r} "):
                            self.queue.change(job_id, priority=tier, group=group)
                        return
                    job = self.queue.change(job_id, priority=tier, group=group)
                    assert (job.priority, job.group) == (tier, group)
            case SetCap(group, cap):
                self.queue.set_lane(group, concurrency=cap)
                self.model.set_lane(group, concurrency=cap)
            case PauseLane(group, paused):
                self.queue.set_lane(group, paused=paused)
                self.model.set_lane(group, paused=paused)

    def add(self, op: Add) -> None:
        if self._refused([op]):
            return
        job_id = self.queue.add(
            "job", len(self.ids), priority=op.tier, group=op.group, delay=op.delay
        )
        self._record([op], [job_id])

    def _refused(self, items: Sequence[Add], late_first: bool = False) -> bool:
        """When the model says a lane is at its max_waiting, the server must refuse
        the whole add with LaneFull (the model is left as it is: nothing written)."""
        sent = items[::-1] if late_first else items
        full = self.model.refused_lane([a.group for a in sent])
        if full is UNSET:
            return False
        event("max_waiting refused an add")
        batch = [{"name": "job", "priority": a.tier, "group": a.group, "delay": a.delay}
                 for a in sent]  # fmt: skip
        with pytest.raises(LaneFull, match=f"lane {full!r} "):
            if len(items) == 1:
                self.queue.add("job", priority=items[0].tier, group=items[0].group,
                               delay=items[0].delay)  # fmt: skip
            else:
                self.queue.add_many(batch)
        return True

    def _add_many(self, items: Sequence[Add], late_first: bool) -> None:
        if self._refused(items, late_first):
            return
        if not late_first:
            batch = [
                {"name": "job", "data": len(self.ids) + i, "priority": a.tier, "group": a.group,
                 "delay": a.delay}
                for i, a in enumerate(items)
            ]  # fmt: skip
            self._record(items, self.queue.add_many(batch))
            return
        # mint every id first, then send them newest first: the server accepts
        # each job after every job minted later (a producer with a slow clock)
        engine = self.queue.engine
        jobs = [
            engine.new_job("job", len(self.ids) + i, priority=a.tier, group=a.group, delay=a.delay)
            for i, a in enumerate(items)
        ]
        sent: list[str] = self.queue.sender.send(engine.add_jobs(jobs[::-1]))
        self._record(items[::-1], sent)

    def _record(self, items: Sequence[Add], new_ids: Sequence[str]) -> None:
        """Tell the model in the order the server accepted them; wait out short delays."""
        fires = [self._fire_at(a, job_id) for a, job_id in zip(items, new_ids, strict=True)]
        for a, job_id, fire in zip(items, new_ids, fires, strict=True):
            self.model.add(job_id, a.tier, a.group, fire_at=fire)
            self.ids.append(job_id)
        due = [f for f in fires if f is not None and f != NEVER]
        if due:
            self.clock = self.wait_until(max(due))

    def _fire_at(self, item: Add, job_id: str) -> float | None:
        if not item.delay:
            return None
        if item.delay >= FAR_FUTURE:
            return NEVER
        job = self.queue.get(job_id)
        assert job is not None and job.state is State.DELAYED
        return ms(job.run_at)

    def claim(self, n: int, lease: float = LONG_LEASE) -> list[str]:
        """Claim on both sides; a SHORT lease is then waited out on the server clock."""
        jobs = self.queue.claim(n, lease=lease)
        got = [job.id for job in jobs]
        deadline = ms(jobs[0].lease_deadline) if jobs and lease == SHORT else NEVER
        want = self.model.claim(n, now=self.clock, deadline=deadline)
        assert got == want, f"{self.where}: claim({n}) returned {got}, the model {want}"
        for job in jobs:
            spec = self.model.jobs[job.id]
            assert (job.priority, job.group, job.state) == (spec.tier, spec.group, State.ACTIVE)
        self.claimed.extend(got)
        if deadline != NEVER:
            self.clock = self.wait_until(deadline)
        else:
            self.held.update((job.id, job) for job in jobs)
        return got

    def outcome(self, op: Outcome) -> None:
        """Complete, fail or release a held job on both sides; a retry delay is waited out."""
        if not self.held:
            return
        job = self.held.pop(list(self.held)[op.pick % len(self.held)])
        match op:
            case Complete():
                self.queue.complete(job, result=job.data)
                self.model.complete(job.id)
            case Release():
                self.queue.release(job)
                self.model.release(job.id)
            case RateLimited(_, far):
                self.queue.release(job, throttle=FAR_FUTURE if far else SHORT)
                self.model.release(job.id, throttle_far=far)
                if not far:
                    self.clock = self._wait_short()
            case Fail(_, delay):
                state = self.queue.fail(job, "boom", retry=delay is not None, retry_delay=delay)
                fire = None if delay is None else self._retry_at(job.id, state, delay)
                want = self.model.fail(job.id, fire)
                assert state == want, f"{self.where}: fail of {job.id} left it {state}, not {want}"
                if fire is not None and fire != NEVER and state is State.FAILED:
                    self.clock = self.wait_until(fire)

    def control(self, op: Pause | Resume | RetryDead) -> None:
        match op:
            case Pause():
                self.queue.pause()
                self.model.pause()
            case Resume():
                self.queue.resume()
                self.model.resume()
            case RetryDead(picks):
                self.retry_dead(picks)

    def _wait_short(self) -> int:
        """Wait out a SHORT throttle just set: the script's clock read no later than
        ``after``, so the throttle ends by ``after`` + SHORT."""
        after = max(self.clock, server_ms(self.queue.client()))
        return self.wait_until(after + SHORT * 1000)

    def _retry_at(self, job_id: str, state: State, delay: float) -> float:
        """The retry's fire time (ms) as the server stored it; ``NEVER`` for a far one."""
        if state is not State.FAILED:
            return 0.0  # dead: the model decides that from the attempts alone
        if delay >= FAR_FUTURE:
            return NEVER
        job = self.queue.get(job_id)
        assert job is not None and job.state is State.FAILED
        return ms(job.run_at)

    def retry_dead(self, picks: Sequence[int]) -> None:
        """Revive the picked ids in the picked order; ids that are not dead are skipped."""
        if not self.ids:
            return
        chosen = [self.ids[i % len(self.ids)] for i in picks]
        moved = self.queue.retry_dead(chosen)
        want = self.model.retry_dead(chosen)
        assert moved == want, f"{self.where}: retry_dead({chosen}) moved {moved}, not {want}"

    def check_counts(self) -> None:
        """The server's state counts agree with the model's after the drain."""
        model = self.model
        want = {
            "waiting": model.waiting(),
            "active": len(model.active) + self.anchors,
            "delayed": len(model.delayed) - len(model.retrying),
            "failed": len(model.retrying),
            "completed": len(model.completed),
            "dead": len(model.dead),
        }
        counts = self.queue.stats().counts
        assert {state: counts[state] for state in want} == want, self.where

    def remove(self, pick: int) -> None:
        # waiting jobs of the head lane come first: removing them ends turns early
        candidates = self.model.waiting_ids() or self.ids
        if candidates:
            job_id = candidates[pick % len(candidates)]
            assert self.queue.remove(job_id) == (job_id in self.model.jobs)
            self.model.remove(job_id)
            self.held.pop(job_id, None)

    def drain(self) -> None:
        """Claim until empty (caps, rates and lane pauses lifted first, on both
        sides); afterwards nothing is waiting on either side but in the lanes under
        a far throttle (it cannot be lifted)."""
        controlled = set(self.model.caps) | self.model.lane_paused | set(self.model.rates)
        for group in sorted(controlled, key=str):
            self.apply(SetCap(group, None))
            self.apply(PauseLane(group, False))
            self.apply(SetRate(group, None))
        if self.model.queue_cap is not None or self.model.queue_rate is not None:
            self.apply(SetQueueLimits(None, None))
        while self.claim(7):
            pass
        # a far throttle cannot be lifted: its lane keeps its waiting jobs
        assert self.model.waiting() == sum(len(self.model.lanes[g]) for g in self.model.throttled
                                           if g in self.model.lanes)  # fmt: skip
        assert self.queue.claim(1) == []


# -- 1-2. claims follow the model ---------------------------------------------
# Scenarios random search reaches rarely, pinned as explicit examples:
# removing the last job of the head lane mid-turn ends that turn (the next
# lane gets its full weight) ...
REMOVE_ENDS_TURN = [
    SetWeight("a", 3),
    SetWeight("b", 3),
    lane_jobs("a", "a", "b", "b", "b", "b", "c"),
    Claim(1),
    Remove(0),
    Claim(7),
]
# ... also when it is the only lane, so it returns to an empty ring and is at
# once the head again: it starts a fresh turn, not the rest of the old one ...
REMOVE_ENDS_TURN_ALONE = [
    SetWeight("a", 3),
    lane_jobs("a", "a"),
    Claim(1),
    Remove(0),
    lane_jobs("a", "a", "a", "b"),
    Claim(7),
]
# ... a weight changed mid-turn applies from the lane's next turn ...
WEIGHT_NEXT_TURN = [
    SetWeight("a", 2),
    lane_jobs("a", "a", "a", "a", "a", "a", "b", "b", "b"),
    Claim(1),
    SetWeight("a", 4),
    Claim(3),
    SetWeight("a", 1),
]
# ... and jobs sent in the reverse of their mint order: composite serves them
# in arrival order, mint in id order.
SKEWED_PRODUCER = [AddMany((Add(0, None), Add(0, None), Add(0, "a")), late_first=True), Claim(3)]


@PROFILE
@given(
    program=programs(
        adds(), add_manys(adds()), set_weights, claims, claims, removes, min_size=6, max_size=24
    )
)
@example(program=REMOVE_ENDS_TURN)
@example(program=REMOVE_ENDS_TURN_ALONE)
@example(program=WEIGHT_NEXT_TURN)
@example(program=SKEWED_PRODUCER)
def test_claims_follow_the_model(
    client: connection.SyncClient, queue_name: str, program: list[Op]
) -> None:
    for ordering in ORDERINGS:
        with fresh_queue(client, queue_name, ordering) as queue:
            Lockstep(queue, OrderModel(ordering)).run(program)


@PROFILE
@given(
    program=programs(
        adds(ANY_DELAY),
        add_manys(adds()),
        set_weights,
        claims,
        claims,
        removes,
        stalls,
        max_size=15,
    ),
    headroom=st.integers(0, 12),
)
# the counter passes 2^31 while job 1 is leased: the renumbering (in steps,
# includes/renumber.lua) must include it, so when its lease runs out it comes
# back ahead of job 2
@example(program=[Add(0, "a"), Stall(1), Add(0, "a"), Claim(2)], headroom=1)
def test_counter_renumbering_keeps_the_order(
    client: connection.SyncClient, queue_name: str, program: list[Op], headroom: int
) -> None:
    """Past 2^31 the arrival counter is renumbered in steps; the order theorem must not notice.

    Stalls and delays matter here: a leased job renumbered with the waiting
    ones must still come back to its old place when its lease runs out, and a
    due job promoted when the counter runs out must still arrive last.
    """
    with fresh_queue(client, queue_name, "composite") as queue:
        # an anchor job leased for the whole example keeps the queue from being
        # idle, so the counter is renumbered, not re-based (includes/lanes.lua)
        queue.add("anchor")
        assert len(queue.claim(1, lease=3600.0)) == 1
        set_counter(client, queue.engine.keys, RENUMBER_AT - headroom)
        Lockstep(queue, OrderModel("composite"), anchors=1).run(program)


# -- 3. time: delayed jobs and expired leases ----------------------------------------
@PROFILE
@given(
    program=programs(
        adds(ANY_DELAY), add_manys(adds(ANY_DELAY)), set_weights, claims, claims, stalls
    ),
    max_stalls=st.integers(0, 2),
)
# a due job enters its lane when the claim promotes it: composite puts it
# behind the jobs added meanwhile, mint by its (older) id
@example(program=[Add(0, "a", SHORT), Add(0, "a"), Add(0, "b", FAR_FUTURE), Claim(3)], max_stalls=1)
# one claim leases a job of lane b, then one of lane a (the smaller id); both
# expire together and are reaped in id order, so lane a rejoins the ring first
@example(program=[lane_jobs("a", "a", "b"), Claim(1), Stall(2), Claim(3)], max_stalls=1)
# a claim promotes due jobs before it returns expired leases: lane b (a due
# job) rejoins the ring before lane a (an expired lease)
@example(program=[Add(0, "a"), Stall(1), Add(0, "b", SHORT), Claim(2)], max_stalls=1)
def test_delayed_and_expired_jobs_follow_the_model(
    client: connection.SyncClient, queue_name: str, program: list[Op], max_stalls: int
) -> None:
    """Due jobs and expired leases enter at the next claim; far-future jobs never do."""
    for ordering in ORDERINGS:
        with fresh_queue(client, queue_name, ordering, max_stalls=max_stalls) as queue:
            run = Lockstep(queue, OrderModel(ordering, max_stalls=max_stalls))
            run.run(program)
            far_future = {i for i, fire in run.model.delayed.items() if fire == NEVER}
            assert far_future == set(run.model.delayed)
            assert not set(run.claimed) & far_future
            counts = queue.stats().counts
            assert (counts["delayed"], counts["dead"]) == (len(far_future), len(run.model.dead))


# -- 3b. outcomes: complete, fail and retry, release, pause, revive -----------------
# The re-entry orders of docs/ordering.md and docs/lifecycle.md, pinned: job 1
# (claimed) and jobs 2, 3 of lane a, added one after the other.
# A retried job comes due with a fresh arrival: composite serves it behind the
# jobs waiting then (2, 3, 1), mint at its id (1, 2, 3) ...
RETRY_COMES_BACK_FRESH = [Add(0, "a"), Claim(1), Add(0, "a"), Fail(0, 0.0), Add(0, "a"), Claim(3)]
# ... also after a delay that is waited out, and behind a job of a lower tier
# only within its own tier ...
RETRY_AFTER_DELAY = [Add(1, "a"), Claim(1), Add(1, "a"), Add(2, "a"), Fail(0, SHORT), Claim(3)]
# ... a released job is waiting again at its old place (1, 2, 3 in both orderings) ...
RELEASE_KEEPS_PLACE = [Add(0, "a"), Claim(1), Add(0, "a"), Release(0), Add(0, "a"), Claim(3)]
# ... a revived dead job gets a fresh arrival too (composite 2, 1; mint 1, 2),
# and revivals enter in the order asked for ...
REVIVE_FRESH = [
    lane_jobs("a", "b", "a"),
    Claim(3),
    Fail(0, None),
    Fail(0, None),
    Add(0, "a"),
    RetryDead((1, 0, 1)),
    Claim(4),
]
# ... at max_attempts a fail is dead whatever the delay; a release gives the
# attempt back, so the released job still has its retry ...
ATTEMPTS_RUN_OUT = [
    *(Add(0, "a"), Claim(1), Release(0)),
    *(Claim(1), Fail(0, 0.0), Claim(1), Fail(0, 0.0)),
]
# ... and a paused queue claims nothing, yet promotes and reaps, so the ring
# order on resume is that of the promotions (b, then a).
PAUSED_KEEPS_ORDER = [
    *(Add(0, "a"), Stall(1), Add(0, "b", SHORT)),
    *(Pause(), Claim(2), Resume(), Claim(2)),
]


@PROFILE
@given(
    program=programs(
        adds(ANY_DELAY),
        adds(),
        add_manys(adds()),
        set_weights,
        claims,
        claims,
        stalls,
        completes,
        fails,
        fails,
        fails,
        releases,
        pauses,
        retry_deads,
        min_size=8,
        max_size=30,
    ),
    max_attempts=st.integers(1, 3),
    max_stalls=st.integers(0, 1),
)
@example(program=RETRY_COMES_BACK_FRESH, max_attempts=3, max_stalls=1)
@example(program=RETRY_AFTER_DELAY, max_attempts=3, max_stalls=1)
@example(program=RELEASE_KEEPS_PLACE, max_attempts=3, max_stalls=1)
@example(program=REVIVE_FRESH, max_attempts=3, max_stalls=1)
@example(program=ATTEMPTS_RUN_OUT, max_attempts=2, max_stalls=1)
@example(program=PAUSED_KEEPS_ORDER, max_attempts=3, max_stalls=1)
def test_retries_releases_and_revivals_follow_the_model(
    client: connection.SyncClient,
    queue_name: str,
    program: list[Op],
    max_attempts: int,
    max_stalls: int,
) -> None:
    """Jobs that come back (retry, release, stall, retry_dead) re-enter where the docs say.

    Every claim is compared with the model, every fail's resulting state
    (failed or dead), every retry_dead's moved ids, and at the end the
    server's count of each state.
    """
    for ordering in ORDERINGS:
        options = {"max_attempts": max_attempts, "max_stalls": max_stalls}
        with fresh_queue(client, queue_name, ordering, **options) as queue:
            model = OrderModel(ordering, max_stalls=max_stalls, max_attempts=max_attempts)
            Lockstep(queue, model).run(program)


# -- 3b. lane controls: caps and paused lanes ----------------------------------
# the contract example (DESIGN §8): A B C D with C capped at 1 serve
# A B C D A B D A …; once C's slot frees, C is served at its next turn
CAPPED_LANE_EXAMPLE = [
    SetCap("c", 1),
    lane_jobs("a", "b", "c", None, "a", "b", "c", None, "a", "b", "c", None),
    Claim(1), Claim(1), Claim(1), Claim(1), Claim(1), Claim(1), Claim(1), Claim(1),
    Complete(2),
    Claim(4),
]  # fmt: skip
# a lane reaches its cap in the middle of its turn: the turn ends there
CAP_ENDS_TURN = [
    SetWeight("a", 3),
    SetCap("a", 2),
    lane_jobs("a", "a", "a", "a", "b", "b"),
    Claim(3),
    Complete(0),
    Claim(3),
]
# every lane parked, then served again in the order their slots free
# a lane at its rate is passed over; setting a rate again starts a fresh record
RATE_EXAMPLE = [SetRate("a", 1), lane_jobs("a", "a", "b", "b"), Claim(3), SetRate("a", 2), Claim(2)]
ALL_PARKED = [
    SetCap("a", 1), SetCap("b", 1), SetCap("c", 1),
    lane_jobs("a", "a", "b", "b", "c", "c"),
    Claim(5), Claim(1),
    Complete(1), Complete(0), Claim(1), Complete(0), Claim(2),
]  # fmt: skip
# a lane alone in the ring that one claim serves past the end of its turn and
# empties leaves the cyclic order as single claims would have it: placed at
# the tail when its turn ended, it has no lane before it (the lanes parked
# after it go back at the tail), not the lane placed there before its turn.
# Here c (c1, c2 in one claim) leaves with b parked after it and a parked
# after b; a, its rate lifted, goes back into the empty ring, the default
# lane joins behind it, and b, unpaused, goes back at the tail: behind the
# default lane, not between a and it (where a left behind as c's
# predecessor would put it).
LONE_LANE_LEAVES_PAST_ITS_TURN: list[Op] = [
    SetRate("a", 1),
    PauseLane("b", True),
    lane_jobs("b", "a", "a", "c", "c"),
    Claim(4),
    SetRate("a", None),
    lane_jobs(None),
    PauseLane("b", False),
    Claim(4),
]


def one_by_one(program: list[Op]) -> list[Op]:
    """The program with each Claim(n) made n single claims (the same claims, docs)."""
    return [c for op in program for c in ([Claim(1)] * op.n if isinstance(op, Claim) else [op])]


# the same, found by search: the lone lane's claim returns leases (Stall)
LONE_LANE_LEAVES_AFTER_STALLS: list[Op] = [
    Add(0, "b"),
    lane_jobs(None, "a", "c", "c"),
    PauseLane(None, True),
    PauseLane("b", True),
    SetRate("a", 1),
    Stall(3),
    Claim(2),
    SetRate("a", None),
]


@PROFILE
@given(
    program=programs(
        adds(),
        add_manys(adds()),
        set_weights,
        set_caps,
        set_caps,
        pause_lanes,
        set_rates,
        changes,
        adds(ANY_DELAY),
        claims,
        claims,
        stalls,
        completes,
        completes,
        fails,
        releases,
        removes,
        min_size=8,
        max_size=30,
    )
)
@example(program=CAPPED_LANE_EXAMPLE)
@example(program=CAP_ENDS_TURN)
@example(program=ALL_PARKED)
@example(program=LONE_LANE_LEAVES_PAST_ITS_TURN)
@example(program=one_by_one(LONE_LANE_LEAVES_PAST_ITS_TURN))
@example(program=LONE_LANE_LEAVES_AFTER_STALLS)
@example(
    program=[SetRate("a", 1), lane_jobs("a", "a", "b", "b"), Claim(3), SetRate("a", 2), Claim(2)]
)
def test_caps_and_paused_lanes_follow_the_model(
    client: connection.SyncClient, queue_name: str, program: list[Op]
) -> None:
    """Lanes at their cap or paused are passed over and come back at their place
    in the ring's cyclic order (docs/ordering.md); every claim equals the model's."""
    for ordering in ORDERINGS:
        with fresh_queue(client, queue_name, ordering, max_stalls=1) as queue:
            Lockstep(queue, OrderModel(ordering, max_stalls=1)).run(program)


@PROFILE
@given(
    program=programs(
        set_queue_limits,
        set_queue_limits,
        adds(),
        add_manys(adds()),
        set_caps,
        pause_lanes,
        set_rates,
        adds(ANY_DELAY),
        claims,
        claims,
        stalls,
        completes,
        completes,
        fails,
        releases,
        removes,
        min_size=8,
        max_size=30,
    )
)
@example(
    program=[
        SetWeight("a", 3),
        SetQueueLimits(2, None),
        lane_jobs("a", "a", "a", "a", "b", "b"),
        Claim(5),
        Claim(5),
        Complete(0),
        Claim(5),
        SetQueueLimits(None, 3),
        Claim(7),
    ]
)
def test_queue_wide_limits_follow_the_model(
    client: connection.SyncClient, queue_name: str, program: list[Op]
) -> None:
    """The queue-wide concurrency and rate stop a claim where they are reached,
    leave the ring and the turn as the claims made leave them, and combine with
    the lane controls (docs/ordering.md "Queue-wide limits")."""
    for ordering in ORDERINGS:
        with fresh_queue(client, queue_name, ordering, max_stalls=1) as queue:
            Lockstep(queue, OrderModel(ordering, max_stalls=1)).run(program)


# -- 3c. backpressure (max_waiting) and throttles ------------------------------
# waiting + delayed jobs count: the third add to lane a is refused, and a
# batch with one job too many for a is refused whole (b gets nothing either);
# a claim makes room again
MAX_WAITING_COUNTS_DELAYED = [
    SetMaxWaiting("a", 2),
    Add(0, "a"), Add(0, "a", FAR_FUTURE), Add(0, "a"),
    lane_jobs("b", "a"),
    Claim(1), Add(0, "a"), Add(0, "a"),
    Claim(3),
]  # fmt: skip
# jobs coming back are never refused (release, stall, retry): the lane then
# holds more than max_waiting and refuses adds until it is below again
RETURNING_NEVER_REFUSED = [
    SetMaxWaiting("a", 1),
    Add(0, "a"), Claim(1), Add(0, "a"), Release(0), Add(0, "a"),
    Stall(1), Add(0, "a"),
    Claim(1), Fail(0, FAR_FUTURE), Add(0, "a"),
    Claim(3),
]  # fmt: skip
# a change into a full lane is refused, also when a delayed job fills it;
# within the lane (a new tier) it is not
CHANGE_INTO_FULL_LANE = [
    SetMaxWaiting("b", 1),
    lane_jobs("a", "a", "b"),
    Change(0, 0, "b"), Change(2, 2, "b"), SetMaxWaiting("b", None), Change(0, 0, "b"),
    SetMaxWaiting("c", 1), Add(0, "c", FAR_FUTURE), Change(0, 1, "c"),
    Claim(3),
]  # fmt: skip
# a far throttle parks its lane for good; a short one ends before the next
# operation; RateLimited releases the job at its old place and throttles its
# lane in one script (a lane parked at its cap stays parked)
THROTTLES = [
    SetCap("a", 1),
    lane_jobs("a", "b", "a", "b", "c"),
    Throttle("c", False), Claim(2), RateLimited(0, True),
    Throttle("b", True), Claim(3),
]  # fmt: skip


@PROFILE
@given(
    # most lanes get a max_waiting first, so refusals are common
    limits=st.lists(set_max_waitings, min_size=1, max_size=4),
    program=programs(
        set_max_waitings,
        adds(),
        adds(),
        adds(ANY_DELAY),
        add_manys(adds(ANY_DELAY)),
        throttles,
        rate_limiteds,
        changes,
        changes,
        set_caps,
        pause_lanes,
        claims,
        claims,
        stalls,
        completes,
        fails,
        releases,
        retry_deads,
        removes,
        min_size=8,
        max_size=30,
    ),
)
@example(limits=[], program=MAX_WAITING_COUNTS_DELAYED)
@example(limits=[], program=RETURNING_NEVER_REFUSED)
@example(limits=[], program=CHANGE_INTO_FULL_LANE)
@example(limits=[], program=THROTTLES)
def test_max_waiting_and_throttles_follow_the_model(
    client: connection.SyncClient,
    queue_name: str,
    limits: list[SetMaxWaiting],
    program: list[Op],
) -> None:
    """An add, batch or change that would pass a lane's max_waiting raises
    LaneFull exactly when the model refuses it, and writes nothing (every later
    claim and the final counts still match); jobs coming back are never refused.
    A far throttle parks its lane like a pause; a RateLimited release keeps the
    job's place (docs/ordering.md "Lane controls")."""
    for ordering in ORDERINGS:
        with fresh_queue(client, queue_name, ordering, max_stalls=1) as queue:
            Lockstep(queue, OrderModel(ordering, max_stalls=1)).run([*limits, *program])


# -- 4. concurrent claimers -------------------------------------------------------
@PROFILE
@given(
    backlog=st.lists(adds(), min_size=1, max_size=24),
    weights=st.lists(set_weights, max_size=4),
    sizes=st.lists(
        st.lists(st.integers(1, 7), min_size=1, max_size=4), min_size=CLAIMERS, max_size=CLAIMERS
    ),
)
def test_concurrent_claims_are_slices_of_the_model_sequence(
    client: connection.SyncClient,
    claimer_clients: list[connection.SyncClient],
    queue_name: str,
    backlog: list[Add],
    weights: list[SetWeight],
    sizes: list[list[int]],
) -> None:
    for ordering in ORDERINGS:
        with fresh_queue(client, queue_name, ordering) as queue:
            run = Lockstep(queue, OrderModel(ordering))
            ops: list[Op] = [*weights, AddMany(tuple(backlog))]
            for op in ops:
                run.apply(op)
            claimers = [SyncQueue(queue.name, ordering=ordering, client=c) for c in claimer_clients]
            assert_tiles(run.model.drain(), claim_concurrently(claimers, sizes))


def claim_concurrently(
    claimers: Sequence[SyncQueue], sizes: Sequence[Sequence[int]]
) -> list[list[str]]:
    """Every batch each claimer got, all claiming at once (a thread each) until empty."""
    start = threading.Barrier(len(claimers))
    batches: list[list[list[str]]] = [[] for _ in claimers]
    threads = [
        threading.Thread(target=claim_until_empty, args=(q, s, start, out))
        for q, s, out in zip(claimers, sizes, batches, strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    return [batch for per_claimer in batches for batch in per_claimer]


def claim_until_empty(
    queue: SyncQueue, sizes: Sequence[int], start: threading.Barrier, out: list[list[str]]
) -> None:
    """Claim batches of the given sizes (cycling) until a claim comes back empty."""
    start.wait(timeout=10)
    for n in itertools.cycle(sizes):
        batch = [job.id for job in queue.claim(n)]
        if not batch:
            return
        out.append(batch)


def assert_tiles(want: list[str], batches: list[list[str]]) -> None:
    """The batches, each placed where its first id sits in ``want``, rebuild ``want``.

    Each claim is one atomic script, so some serial order of the batches must
    concatenate to the model's sequence: no gap, no overlap, no job twice.
    """
    flat = [job_id for batch in batches for job_id in batch]
    assert len(flat) == len(set(flat)), "a job was claimed twice"
    assert set(flat) == set(want)
    position = {job_id: i for i, job_id in enumerate(want)}
    for batch in batches:
        first = position[batch[0]]
        assert batch == want[first : first + len(batch)], f"batch {batch} is not a slice"
    ordered = sorted(batches, key=lambda b: position[b[0]])
    assert [job_id for batch in ordered for job_id in batch] == want


# -- 5. claim(n) == n x claim(1) -----------------------------------------------------
@PROFILE
@given(program=programs(adds(), add_manys(adds()), set_weights, claims, claims, max_size=14))
def test_a_claim_of_n_is_n_single_claims(
    client: connection.SyncClient, queue_name: str, program: list[Op]
) -> None:
    for ordering in ORDERINGS:
        with (
            fresh_queue(client, queue_name + "-n", ordering) as batched,
            fresh_queue(client, queue_name + "-1", ordering) as single,
        ):
            runs = [Lockstep(queue, OrderModel(ordering)) for queue in (batched, single)]
            got_batched: list[tuple[Group, Any]] = []
            got_single: list[tuple[Group, Any]] = []
            for op in [*program, Claim(10_000)]:
                if not isinstance(op, Claim):
                    for run in runs:
                        run.apply(op)
                    continue
                got_batched += [(j.group, j.data) for j in batched.claim(op.n)]
                got_single += [(j.group, j.data) for j in claim_one_by_one(single, op.n)]
                assert got_batched == got_single, f"[{ordering}] after claim({op.n})"
            assert len(got_batched) == len(runs[0].ids)


def claim_one_by_one(queue: SyncQueue, n: int) -> list[Job]:
    """Up to n jobs by single claims, stopping at the first empty one."""
    jobs: list[Job] = []
    while len(jobs) < n and (got := queue.claim(1)):
        jobs += got
    return jobs


# -- 6. no groups: the textbook priority queue ---------------------------------------
@PROFILE
@given(
    program=programs(
        adds(lanes=st.none()),
        add_manys(adds(lanes=st.none())),
        st.builds(SetWeight, st.none(), st.integers(1, 5)),
        claims,
        claims,
    )
)
def test_without_groups_it_is_a_priority_queue(
    client: connection.SyncClient, queue_name: str, program: list[Op]
) -> None:
    """Claims pop a plain heap of (tier, arrival); no lane or weight logic involved."""
    for ordering in ORDERINGS:
        with fresh_queue(client, queue_name, ordering) as queue:
            run_against_heap(queue, [*program, Claim(10_000)])


def run_against_heap(queue: SyncQueue, program: Sequence[Op]) -> None:
    heap: list[tuple[int, int, str]] = []
    arrivals = itertools.count()
    for op in program:
        match op:
            case Add(tier):
                heapq.heappush(heap, (tier, next(arrivals), queue.add("job", priority=tier)))
            case AddMany(items):
                new = queue.add_many([{"name": "job", "priority": a.tier} for a in items])
                for a, job_id in zip(items, new, strict=True):
                    heapq.heappush(heap, (a.tier, next(arrivals), job_id))
            case SetWeight(_, weight):
                queue.set_weight(None, weight)
            case Claim(n):
                want = [heapq.heappop(heap)[2] for _ in range(min(n, len(heap)))]
                got = [j.id for j in queue.claim(n)]
                assert got == want, f"[{queue.options.ordering}] claim({n})"


# -- 7. dependencies: blocked jobs, releases and orphans -----------------------
class DependencyLockstep(Lockstep):
    """Lockstep with ``depends_on`` and ``maintain``. The jobs one step releases
    enter their lanes in the order the server's ``unblocked`` events give (the
    spec leaves it open); every other outcome is the model's alone."""

    def __init__(self, queue: SyncQueue, model: OrderModel) -> None:
        super().__init__(queue, model)
        self.events = EventIds(queue)

    def unblocked(self) -> list[str]:
        """The ids of the ``unblocked`` events since the last read, in stream order."""
        return self.events.since_last("unblocked")

    def apply(self, op: Op) -> None:
        match op:
            case AddDependent():
                self.add_dependent(op)
            case Maintain():
                self.maintain()
            case Complete():
                self.complete(op.pick)
            case _:
                super().apply(op)

    def add_dependent(self, op: AddDependent) -> None:
        if not self.ids:
            return
        deps = [self.ids[i % len(self.ids)] for i in op.picks]
        policy: Literal["dead", "run"] = "run" if op.run_anyway else "dead"
        options: dict[str, Any] = {"priority": op.tier, "group": op.group}
        if self.model.refused_dependency(deps) is not None:
            event("a dead or removed dependency refused the add")
            with pytest.raises(InvalidDependency):
                self.queue.add("job", depends_on=deps, **options)
            return
        job_id = self.queue.add("job", depends_on=deps, on_dependency_failure=policy, **options)
        state = self.model.add_dependent(job_id, op.tier, op.group, deps, run_anyway=op.run_anyway)
        event(f"added {state}")
        job = self.queue.get(job_id)
        assert job is not None and job.state.value == state, f"{self.where}: {job_id} {job}"
        self.ids.append(job_id)

    def complete(self, pick: int) -> None:
        if not self.held:
            return
        job = self.held.pop(list(self.held)[pick % len(self.held)])
        self.queue.complete(job, result=job.data)
        order = self.unblocked()
        if len(order) > 1:
            event("one completion released several")
        self.model.complete(job.id, order)

    def maintain(self) -> None:
        report = self.queue.maintain()
        self.clock = max(self.clock, ms(report.server_time))
        order = self.unblocked()
        steps = self.model.maintain(self.clock, order)
        assert report.released == steps, f"{self.where}: maintain {report}"
        if steps:
            event("maintenance released or killed blocked jobs")

    def run(self, program: Sequence[Op]) -> None:
        super().run(program)
        # orphans go on cascading, one level per maintenance call, until none is left
        for _ in range(len(self.ids) + 1):
            self.maintain()
        self.drain()
        self.check_states()

    def check_states(self) -> None:
        """Every job's final state is the model's."""
        model = self.model
        for job_id in self.ids:
            job = self.queue.get(job_id)
            if job_id not in model.jobs:
                assert job is None, f"{job_id} should be gone, is {job}"
                continue
            assert job is not None
            want = (
                State.BLOCKED if job_id in model.blocked
                else State.DEAD if job_id in model.dead
                else State.COMPLETED if job_id in model.completed
                else State.ACTIVE if job_id in model.active
                else State.FAILED if job_id in model.retrying
                else State.DELAYED if job_id in model.delayed
                else State.WAITING
            )  # fmt: skip
            assert job.state is want, f"{job_id}: {job.state}, the model {want}"
        assert self.queue.stats().counts["blocked"] == len(model.blocked)


dependency_picks = st.lists(st.integers(0, 30), min_size=1, max_size=3).map(tuple)
add_dependents = st.builds(
    AddDependent, tiers, groups, dependency_picks, st.sampled_from([False, False, False, True])
)
# a chain released one link per completion, a fan-out released by one completion,
# a death cascading through two maintenance calls, a removal orphaning
CHAIN = [Add(0, None), AddDependent(0, None, (0,)), AddDependent(0, None, (1,)), Claim(1),
         Complete(0), Claim(1), Complete(0), Claim(1)]  # fmt: skip
FAN_OUT = [Add(0, "a"), AddDependent(0, "b", (0,)), AddDependent(0, "a", (0,)),
           AddDependent(0, "c", (0,)), Add(0, "a"), Claim(1), Complete(0), Claim(7)]  # fmt: skip
CASCADE = [Add(0, None), AddDependent(0, None, (0,)), AddDependent(0, None, (1,)),
           AddDependent(0, None, (1,), True), Claim(1), Fail(0, None), Maintain(),
           Claim(7), Maintain(), Claim(7)]  # fmt: skip
# a fan-in is released by the completion of its last dependency, not before
FAN_IN = [Add(0, None), Add(0, None), Add(0, None), AddDependent(0, None, (0, 1)), Claim(1),
          Complete(0), Claim(1), Claim(7), Complete(0), Claim(7)]  # fmt: skip
# both dependencies of one job die before a maintenance call: it dies once
BOTH_DIE = [Add(0, None), Add(0, None), AddDependent(0, None, (0, 1)), Claim(2), Fail(0, None),
            Fail(0, None), Maintain(), Claim(7)]  # fmt: skip
REMOVED = [Add(0, None), Add(1, None), AddDependent(0, None, (0, 1)), Remove(0), Maintain(),
           Claim(7)]  # fmt: skip


@PROFILE
@given(
    program=programs(
        adds(),
        adds(),
        add_dependents,
        add_dependents,
        claims,
        claims,
        completes,
        completes,
        completes,
        st.builds(Fail, st.integers(0, 7), st.sampled_from([None, None, 0.0])),
        removes,
        st.just(Maintain()),
        min_size=10,
        max_size=30,
    )
)
@example(program=CHAIN)
@example(program=FAN_OUT)
@example(program=CASCADE)
@example(program=REMOVED)
@example(program=BOTH_DIE)
@example(program=FAN_IN)
def test_dependencies_follow_the_model(
    client: connection.SyncClient, queue_name: str, program: list[Op]
) -> None:
    """Blocked jobs are released by their last dependency's completion as new
    arrivals, and sent to dead by maintenance when a dependency dies or is removed
    (or released, with on_dependency_failure="run"): claims and final states match."""
    for ordering in ORDERINGS:
        with fresh_queue(client, queue_name, ordering) as queue:
            DependencyLockstep(queue, OrderModel(ordering)).run(program)


# -- 8. rate windows on a frozen server clock ------------------------------------
# The examples above give rates a window no example outlives. Here the server's
# clock is the test's (tests/clock.py): it moves only by Advance, so the model
# knows the exact time of every operation and predicts when each window ends.
@dataclass(frozen=True)
class Advance:
    ms: int  # move the server's clock forward


@dataclass(frozen=True)
class AlignClock:
    ms: int  # move the server's clock forward to the next time t with t % 10_000 == ms


@dataclass(frozen=True)
class SetWindowedRate:
    group: Group
    most: int | None  # claims per window; None removes the rate
    window_ms: int


WINDOWS = (500, 1000)
advances = st.builds(Advance, st.sampled_from([100, 250, 499, 500, 501, 1000]))
windowed_rates = st.builds(
    SetWindowedRate, groups, st.sampled_from([None, 1, 1, 2, 3]), st.sampled_from(WINDOWS)
)
# a lane at its rate is served again exactly when the window of its oldest
# counted claim ends (not a millisecond before) ...
WINDOW_ENDS = [
    SetWindowedRate("a", 1, 1000),
    lane_jobs("a", "a", "a", "b"),
    Claim(2),
    Advance(999),
    Claim(1),
    Advance(1),
    Claim(2),
    Advance(1000),
    Claim(7),
]
# ... also when it was parked at its cap too: the slot frees inside the window
# (complete), the window ends later
CAP_AND_RATE = [
    SetWindowedRate("a", 2, 1000),
    SetCap("a", 1),
    lane_jobs("a", "a", "a", "b"),
    Claim(2),
    Complete(0),
    Claim(2),
    Advance(500),
    Complete(0),
    Claim(2),
    Advance(500),
    Claim(2),
]

# ... and exactly at the time the test set, whatever that time is: found where the
# server stored a claim set at 1.150 s past a ten seconds' mark as 1.149 (libfaketime
# read "1.150" as 1.149999999 s; tests/clock.py), so it served lane c again at
# 1.649 while the model (told 1.150) waited for 1.650. AlignClock(900) starts the
# program where it failed (0.900 s past the next ten seconds' mark), in both orderings
BACKLOG_AT_A_MISREAD_CLOCK = tuple(
    Add(tier, lane)
    for tier, lane in [(3, "a"), (1048576, "c"), (1, "c"), (1, "a"), (3, "b"), (1, "c"), (1, "c")]
)
FOUND_AT_A_MISREAD_CLOCK = [
    AlignClock(900),
    SetWindowedRate(None, 2, 500),
    SetWindowedRate("a", 2, 500),
    SetWindowedRate("c", 2, 500),
    AddMany(BACKLOG_AT_A_MISREAD_CLOCK),
    Advance(250),
    Claim(7),
    Advance(499),
    Claim(3),
    SetWeight(None, 5),
    Complete(3),
    SetCap("a", 2),
    SetWeight("c", 1),
    Add(2097151, "c"),
    Claim(3),
    Add(1, None),
]


class FrozenLockstep(Lockstep):
    """Lockstep on a server whose clock moves only by Advance (frozen_server)."""

    def __init__(self, queue: SyncQueue, model: OrderModel, clock: FrozenClock) -> None:
        super().__init__(queue, model)
        self.frozen = clock
        self.clock = clock.now_ms
        model.tell(self.clock)

    def apply(self, op: Op | Advance | AlignClock | SetWindowedRate) -> None:
        match op:
            case Advance(step):
                self.clock = self.frozen.advance(step)
                self.model.tell(self.clock)
            case AlignClock(at):
                self.clock = self.frozen.advance((at - self.frozen.now_ms) % 10_000)
                self.model.tell(self.clock)
            case SetWindowedRate(group, most, window):
                rate = None if most is None else (most, window / 1000)
                self.queue.set_lane(group, rate=rate)
                self.model.set_lane(group, rate=most, window=window)
            case _:
                super().apply(op)


# programs begin by giving some lanes a rate and adding a backlog; then mostly
# claims and moves of the clock, so claims often come inside a rate window and
# right at its end
rate_prelude = st.lists(
    st.builds(SetWindowedRate, groups, st.integers(1, 2), st.sampled_from(WINDOWS)),
    min_size=1,
    max_size=3,
)
backlogs = st.builds(AddMany, st.lists(adds(), min_size=3, max_size=10).map(tuple))
rate_body = st.lists(
    st.one_of(
        claims,
        claims,
        claims,
        advances,
        advances,
        advances,
        adds(),
        completes,
        releases,
        set_caps,
        pause_lanes,
        windowed_rates,
        set_weights,
    ),
    min_size=6,
    max_size=24,
)
rate_programs = st.builds(lambda *parts: [op for part in parts for op in part],
                          rate_prelude, st.tuples(backlogs), rate_body)  # fmt: skip


@PROFILE
@given(program=rate_programs)
@example(program=WINDOW_ENDS)
@example(program=CAP_AND_RATE)
@example(program=FOUND_AT_A_MISREAD_CLOCK)
def test_rate_windows_end_as_the_model_says(
    frozen_server: FrozenServer,
    queue_name: str,
    program: list[Op | Advance | AlignClock | SetWindowedRate],
) -> None:
    """Claims follow the model while rate windows end (the clock moves by at most
    24 s per example, inside the 30 s leases)."""
    client = connection.sync_client(frozen_server.url)
    try:
        for ordering in ORDERINGS:
            with fresh_queue(client, queue_name, ordering) as queue:
                run = FrozenLockstep(queue, OrderModel(ordering), frozen_server.clock)
                for op in program:
                    run.apply(op)
                run.drain()
                run.check_counts()
    finally:
        client.close()


# -- 9. the aged ordering on a frozen server clock -----------------------------
# An aged lane orders by (due time + tier x age_step, id) (docs/ordering.md
# "The aged ordering"), so every time a job enters its lane matters: the
# server's clock is the test's (it moves only by Advance and by the waits for
# short delays, leases and throttles), and the model is told each move, so it
# knows the due time of every add, promotion, retry, dependency release and
# retry_dead.
class AgedLockstep(DependencyLockstep):
    """DependencyLockstep on a frozen server clock, for the aged ordering."""

    def __init__(self, queue: SyncQueue, model: OrderModel, clock: FrozenClock) -> None:
        super().__init__(queue, model)
        self.frozen = clock
        self.clock = clock.now_ms
        model.tell(self.clock)

    def wait_until(self, target: float) -> int:
        """Move the frozen clock to ``target`` (if it is not there yet)."""
        if target > self.frozen.now_ms:
            self.frozen.set(math.ceil(target))
        self.model.tell(self.frozen.now_ms)
        return self.frozen.now_ms

    def apply(self, op: Op | Advance) -> None:
        match op:
            case Advance(step):
                self.clock = self.frozen.advance(step)
                self.model.tell(self.clock)
            case _:
                super().apply(op)

    def retry_dead(self, picks: Sequence[int]) -> None:
        revive_without_dependencies(self, picks)


def revive_without_dependencies(run: DependencyLockstep, picks: Sequence[int]) -> None:
    """retry_dead of the picked ids that were added without depends_on: the model
    does not follow a revived job's dependencies (retryDead.lua's rules for them
    are tested in test_retry_dead_dependencies.py)."""
    if not run.ids:
        return
    chosen = [run.ids[i % len(run.ids)] for i in picks]
    chosen = [j for j in chosen if j not in run.model.dependencies]
    if not chosen:
        return
    moved = run.queue.retry_dead(chosen)
    requeued = run.events.events_since_last("requeued")
    if requeued:
        run.model.tell(ms(requeued[0].at))
    want = run.model.retry_dead(chosen)
    assert moved == want, f"{run.where}: retry_dead({chosen}) moved {moved}, not {want}"


AGE_STEPS = (100, 500, 1000)  # ms
# a tier-2 job added first passes the tier-0 jobs that became due more than
# 2 x age_step after it (here 2 x 500 ms): the last one only
AGED_PASSES_LATER_URGENT = [
    Add(2, "a"),
    Add(0, "a"),
    Advance(500),
    Add(0, "a"),
    Advance(501),
    Add(0, "a"),
    Claim(7),
]
# a retry is due at its fire time (not when a claim promotes it), a stall and a
# release keep their key, a change keeps the due time with the new tier
AGED_COMES_BACK = [
    Add(1, "a"),
    Claim(1),
    Add(0, "a"),
    Fail(0, SHORT),
    Advance(1000),
    Add(0, "a"),
    Stall(1),
    Release(0),
    Change(0, 3, "b"),
    Add(3, "b"),
    Claim(7),
]
aged_body = st.one_of(
    advances,
    advances,
    adds(ANY_DELAY),
    adds(),
    add_manys(adds(ANY_DELAY)),
    claims,
    claims,
    stalls,
    completes,
    fails,
    releases,
    changes,
    set_caps,
    pause_lanes,
    retry_deads,
    removes,
    add_dependents,
    st.just(Maintain()),
    throttles,
    rate_limiteds,
)


@PROFILE
@given(
    program=st.builds(
        lambda head, tail: [*head, *tail],
        st.lists(set_weights, max_size=3),
        st.lists(aged_body, min_size=8, max_size=24),
    ),
    age_step_ms=st.sampled_from(AGE_STEPS),
)
@example(program=AGED_PASSES_LATER_URGENT, age_step_ms=500)
@example(program=AGED_COMES_BACK, age_step_ms=500)
def test_aged_ordering_follows_the_model(
    frozen_server: FrozenServer, queue_name: str, program: list[Op | Advance], age_step_ms: int
) -> None:
    """The order theorem with the aged key: every claim, fail, retry_dead,
    dependency release and final state equals the model's (the clock moves by at
    most 24 s per example, inside the 30 s leases)."""
    client = connection.sync_client(frozen_server.url)
    try:
        with fresh_queue(client, queue_name, "aged", max_stalls=1) as queue:
            queue.configure(age_step=age_step_ms / 1000)
            model = OrderModel("aged", max_stalls=1, age_step_ms=age_step_ms)
            AgedLockstep(queue, model, frozen_server.clock).run(program)  # type: ignore[arg-type]
    finally:
        client.close()


class TimedAgedLockstep(DependencyLockstep):
    """The aged ordering on a server's own clock (every backend, the cluster too):
    the model is told the server time of each call that gives jobs a due time
    "now" (an add, a completion that releases dependents, a retry_dead) as its
    events record it, before it is told the call; delayed and retried jobs are
    due at their fire time, which the job reads back."""

    def _record(self, items: Sequence[Add], new_ids: Sequence[str]) -> None:
        added = {e.job_id: e.at for e in self.events.events_since_last("added")}
        if added:
            self.model.tell(ms(max(a for a in added.values() if a is not None)))
        super()._record(items, new_ids)

    def add_dependent(self, op: AddDependent) -> None:
        before = len(self.ids)
        super().add_dependent(op)
        added = self.events.events_since_last("added")
        if len(self.ids) > before:
            assert added, "an add without its event"
            self.model.tell(ms(added[-1].at))

    def complete(self, pick: int) -> None:
        if not self.held:
            return
        job = self.held.pop(list(self.held)[pick % len(self.held)])
        self.queue.complete(job, result=job.data)
        released = self.events.events_since_last("unblocked")
        if released:
            self.model.tell(ms(released[0].at))
        self.model.complete(job.id, [e.job_id for e in released if e.job_id])

    def retry_dead(self, picks: Sequence[int]) -> None:
        revive_without_dependencies(self, picks)


@PROFILE
@given(
    program=st.builds(
        lambda head, tail: [*head, *tail],
        st.lists(set_weights, max_size=3),
        st.lists(
            st.one_of(
                adds(ANY_DELAY),
                adds(),
                add_manys(adds(ANY_DELAY)),
                claims,
                claims,
                stalls,
                completes,
                fails,
                releases,
                changes,
                set_caps,
                pause_lanes,
                retry_deads,
                removes,
                add_dependents,
                st.just(Maintain()),
            ),
            min_size=8,
            max_size=24,
        ),
    ),
    age_step_ms=st.sampled_from([1, 2, 5, 50]),
)
def test_aged_ordering_follows_the_model_on_the_server_clock(
    client: connection.SyncClient, queue_name: str, program: list[Op], age_step_ms: int
) -> None:
    """As test_aged_ordering_follows_the_model, on every backend's real clock: an
    age_step of a few ms makes tiers and the milliseconds between calls interleave."""
    with fresh_queue(client, queue_name, "aged", max_stalls=1) as queue:
        queue.configure(age_step=age_step_ms / 1000)
        model = OrderModel("aged", max_stalls=1, age_step_ms=age_step_ms)
        TimedAgedLockstep(queue, model).run(program)
