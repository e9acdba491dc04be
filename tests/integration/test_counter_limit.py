"""The arrival counter never wraps into the tier bits (DESIGN §2, docs/ordering.md).

Past 2^31 a busy queue renumbers its jobs in bounded steps (includes/renumber.lua):
each add, claim and maintain call rewrites at most RENUMBER_BUDGET + 2 per
counter it takes, the order theorem holds for every claim in between, and the
counter never passes 2^32 - 1. An idle queue re-bases instead.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
import redis

from clock import wait_past
from echomq import SyncQueue, score
from echomq.job import Job, State
from echomq.scripts import budget
from keyspace import set_counter
from model import Group, OrderModel

BUDGET = budget("renumber", "RENUMBER_BUDGET")
RENUMBER_AT = budget("renumber", "RENUMBER_AT")
LIVE = {"waiting", "active"}
GROUPS: list[Group] = [None, "a", "b", "c"]
#: a model time past every retry's fire time and before every lease deadline
LATER = 1e15
LEASE = 600.0


class Lockstep:
    """One queue and the order model, driven together; every call is checked
    for its rewrites (job hashes whose lane score changed while they stayed
    waiting or active) and the counter."""

    def __init__(self, sq: SyncQueue, client: redis.Redis, seed: int) -> None:
        self.sq, self.client = sq, client
        self.model = OrderModel("composite")
        self.rng = random.Random(seed)
        self.ids: list[str] = []
        self.active: dict[str, Job] = {}
        self.completed: list[str] = []
        self.stages: set[str | None] = set()
        self.rewrites: list[int] = []

    def _scores(self) -> dict[str, tuple[str | None, str | None]]:
        pipe = self.client.pipeline(transaction=False)
        for job_id in self.ids:
            pipe.hmget(self.sq.engine.keys.job(job_id), "s", "sc")
        return {i: (f[0], f[1]) for i, f in zip(self.ids, pipe.execute(), strict=True)}

    def call(self, fn: Callable[[], Any], arrivals: int) -> Any:
        keys = self.sq.engine.keys
        counter = int(self.client.get(keys.counter) or 0)
        if counter <= RENUMBER_AT and self.client.hget(keys.meta, "rn") is None:
            return fn()  # no renumbering runs or starts in this call
        before = self._scores()
        result = fn()
        after = self._scores()
        rewritten = sum(
            1
            for i, (state, sc) in before.items()
            if state in LIVE and after[i][0] in LIVE and after[i][1] != sc
        )
        assert rewritten <= BUDGET + 2 * arrivals, (rewritten, arrivals)
        self.rewrites.append(rewritten)
        assert int(self.client.get(self.sq.engine.keys.counter) or 0) <= score.MAX_COUNTER
        self.stages.add(self.stage())
        return result

    def stage(self) -> str | None:
        """The stage of the renumbering that runs ("scan", "compact"), or None."""
        stage = self.client.hget(self.sq.engine.keys.meta, "rn")
        return None if stage is None else str(stage)

    def add(self, count: int) -> None:
        items = [(self.rng.randrange(3), self.rng.choice(GROUPS)) for _ in range(count)]
        batch = [{"name": "j", "priority": t, "group": g} for t, g in items]
        if count == 1:
            ids = [self.call(lambda: self.sq.add("j", priority=items[0][0], group=items[0][1]), 1)]
        else:
            ids = self.call(lambda: self.sq.add_many(batch), count)
        for job_id, (tier, group) in zip(ids, items, strict=True):
            self.model.add(job_id, tier, group)
        self.ids += ids

    def claim(self, n: int) -> None:
        due = len(self.model.delayed)
        jobs = self.call(lambda: self.sq.claim(n, lease=LEASE), due)
        assert [j.id for j in jobs] == self.model.claim(n, now=LATER)
        self.active.update((j.id, j) for j in jobs)

    def maintain(self) -> None:
        due = len(self.model.delayed)
        self.call(self.sq.maintain, due)
        self.model.claim(0, now=LATER)  # promotes what is due, claims nothing

    def finish_one(self) -> None:
        if not self.active:
            return
        job = self.active.pop(self.rng.choice(sorted(self.active)))
        what = self.rng.choice(["complete", "complete", "fail", "release"])
        if what == "complete":
            self.call(lambda: self.sq.complete(job), 0)
            self.model.complete(job.id)
            self.completed.append(job.id)
        elif what == "fail":
            state = self.call(lambda: self.sq.fail(job, "boom", retry_delay=0.0), 0)
            fire = self.client.hget(self.sq.engine.keys.job(job.id), "at")
            retry_at = float(str(fire)) if state is State.FAILED else None
            expected = self.model.fail(job.id, retry_at)
            assert state.value == expected
        else:
            self.call(lambda: self.sq.release(job), 0)
            self.model.release(job.id)

    def step(self) -> None:
        roll = self.rng.random()
        if roll < 0.3:
            self.add(self.rng.choice([1, 1, 2, 5, 12]))
        elif roll < 0.55:
            self.claim(self.rng.randrange(1, 9))
        elif roll < 0.9:
            self.finish_one()
        else:
            self.maintain()


@pytest.mark.parametrize("start", ["past_half", "near_the_limit"])
def test_renumbering_in_steps_keeps_the_order(
    sq: SyncQueue, redis_client: redis.Redis, start: str
) -> None:
    run = Lockstep(sq, redis_client, seed=13)
    run.add(300)  # small counters
    # then the counter jumps: the next jobs take counters near 2^31 or near 2^32
    jump = RENUMBER_AT - 400 if start == "past_half" else score.MAX_COUNTER - 5000
    set_counter(redis_client, sq.engine.keys, jump)
    run.add(1500)  # one call: near the limit it starts the renumbering and its scan
    steps = 0
    while run.stage() is not None or steps < 60:
        run.step()
        steps += 1
        assert steps < 2000, "the renumbering never finished"
    # both stages ran, in several calls, and each call kept to its budget
    assert {"compact", None} <= run.stages
    assert sum(1 for r in run.rewrites if r > 0) > 3, run.rewrites
    if start == "past_half":  # the scan ran in steps, with claims and adds in between
        assert "scan" in run.stages
    # the counter was re-based far below the limit; no job kept a large counter
    counter = int(redis_client.get(sq.engine.keys.counter) or 0)
    assert counter < 10_000
    assert not redis_client.exists(sq.engine.keys.renumber)
    scores = run._scores()
    assert all(int(sc) % 2**32 <= counter for s, sc in scores.values() if s in LIVE and sc)
    # drain: every claim still follows the model, every job is served once
    while run.model.waiting() or run.model.delayed or run.active:
        if run.active:
            run.finish_one()
        else:
            run.claim(10)
    assert len(run.completed) == len(set(run.completed))
    assert set(run.completed) | run.model.dead == set(run.ids)


def test_a_job_renumbered_and_reaped_by_the_same_claim_keeps_its_place(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    set_counter(redis_client, sq.engine.keys, RENUMBER_AT - 10)
    first = sq.add("j", "first")
    [job] = sq.claim(1, lease=0.3)
    second = sq.add("j", "second")
    third = sq.add("j", "third")
    # past 2^31 with jobs waiting: the next call starts a renumbering
    set_counter(redis_client, sq.engine.keys, RENUMBER_AT + 5)
    sq.maintain()  # the scan: the lanes and the active set
    assert redis_client.hget(sq.engine.keys.meta, "rn") == "compact"
    assert job.lease_deadline is not None
    wait_past(sq.client(), job.lease_deadline)
    # this claim renumbers first, second and third and returns first's lease:
    # first must come back at its new place (counter 1), ahead of the others
    [again] = sq.claim(1)
    assert again.id == first
    assert redis_client.hget(sq.engine.keys.meta, "rn") is None
    assert [j.id for j in sq.claim(5)] == [second, third]


def test_a_stalled_job_keeps_its_place_through_a_renumbering(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    set_counter(redis_client, sq.engine.keys, RENUMBER_AT - 2)
    first = sq.add("j", "first")
    [job] = sq.claim(1, lease=0.3)  # active while the renumbering runs
    rest = [sq.add("j", name) for name in ("second", "third", "fourth", "fifth", "sixth")]
    sq.maintain()
    assert redis_client.hget(sq.engine.keys.meta, "rn") is None  # done: a few jobs only
    assert int(redis_client.get(sq.engine.keys.counter) or 0) < 10
    assert job.lease_deadline is not None
    wait_past(sq.client(), job.lease_deadline)
    assert [j.id for j in sq.claim(10)] == [first, *rest]


def test_an_idle_queue_past_2_to_the_31_starts_its_counter_again(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    half = 2**31
    set_counter(redis_client, sq.engine.keys, half + 5)
    first = sq.add("j")  # nothing waiting, nothing active: re-based
    assert int(redis_client.get(sq.engine.keys.counter) or 0) == 1
    [claimed] = sq.claim(1)
    assert claimed.id == first
    set_counter(redis_client, sq.engine.keys, half + 5)
    second = sq.add("j")  # the first job is active: no re-base (a renumbering starts)
    assert int(redis_client.get(sq.engine.keys.counter) or 0) == half + 6
    assert sq.claim(5)[0].id == second


def test_counter_exhaustion_with_an_empty_queue_rebases(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    set_counter(redis_client, sq.engine.keys, score.MAX_COUNTER)
    job_id = sq.add("j", priority=7)
    job = sq.get(job_id)
    assert job is not None
    assert score.decode(job.score).tier == 7
    assert score.decode(job.score).counter == 1
