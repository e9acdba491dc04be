"""The arrival counter never wraps into the tier bits (DESIGN §2)."""

from __future__ import annotations

import redis

from clock import wait_past
from echomq import SyncQueue, score


def test_order_holds_across_counter_exhaustion(sq: SyncQueue, redis_client: redis.Redis) -> None:
    redis_client.set(sq.engine.keys.counter, score.MAX_COUNTER - 2)
    # tier 1 first: a renumbering that sorted by whole score, not counter, would swap them
    before = [sq.add("j", i, priority=(i + 1) % 2, group="a") for i in range(3)]
    # the third add passed the limit and renumbered; these go on from there
    after = [sq.add("j", 10 + i, priority=i % 2, group=("a" if i % 2 else None)) for i in range(4)]
    every = [sq.get(i) for i in before + after]
    assert all(j is not None and score.decode(j.score).counter <= score.MAX_COUNTER for j in every)
    assert int(redis_client.get(sq.engine.keys.counter) or 0) < 100
    lane_a = [j for j in sq.jobs("waiting", group="a")]
    default = [j for j in sq.jobs("waiting")]
    # within a lane, (tier, arrival) order is the order the jobs were added in
    for lane in (lane_a, default):
        keys = [(j.priority, j.data) for j in lane]
        assert keys == sorted(keys)
    # the renumbering kept the arrival order queue-wide: in the order the jobs
    # were added, their counters strictly increase, across lanes and tiers
    counters = [score.decode(j.score).counter for j in every if j is not None]
    assert counters == sorted(set(counters)), counters


def test_a_stalled_job_keeps_its_place_through_a_renumbering(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    redis_client.set(sq.engine.keys.counter, score.MAX_COUNTER - 2)
    first = sq.add("j", "first")
    [job] = sq.claim(1, lease=0.05)  # active while the counter runs out
    second = sq.add("j", "second")
    third = sq.add("j", "third")  # forces the renumbering
    fourth = sq.add("j", "fourth")
    assert job.id == first and job.lease_deadline is not None
    wait_past(sq.client(), job.lease_deadline)
    assert [j.id for j in sq.claim(4)] == [first, second, third, fourth]


def test_counter_exhaustion_with_an_empty_queue_rebases(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    redis_client.set(sq.engine.keys.counter, score.MAX_COUNTER)
    job_id = sq.add("j", priority=7)
    job = sq.get(job_id)
    assert job is not None
    assert score.decode(job.score).tier == 7
    assert score.decode(job.score).counter == 1
