"""The arrival counter never wraps into the tier bits (DESIGN §2)."""

from __future__ import annotations

import redis

from clock import wait_past
from echomq import SyncQueue, score


def test_order_holds_across_counter_exhaustion(sq: SyncQueue, redis_client: redis.Redis) -> None:
    # one job waits before the counter nears the limit: the queue is never idle,
    # so the counter is renumbered, not re-based
    before = [sq.add("j", 0, priority=0, group="a")]
    redis_client.set(sq.engine.keys.counter, score.MAX_COUNTER - 2)
    before += [sq.add("j", i, priority=i % 2, group="a") for i in range(1, 3)]
    at_limit = sq.get(before[2])
    assert at_limit is not None and score.decode(at_limit.score).counter == score.MAX_COUNTER
    # the counter is now at the limit: the next adds force a renumbering
    after = [sq.add("j", 10 + i, priority=i % 2, group=("a" if i % 2 else None)) for i in range(4)]
    every = [sq.get(i) for i in before + after]
    assert all(j is not None and score.decode(j.score).counter <= score.MAX_COUNTER for j in every)
    assert int(redis_client.get(sq.engine.keys.counter) or 0) < 100
    # the jobs that took counters near the limit were renumbered, not left there
    assert all(score.decode(j.score).counter < 100 for j in every if j is not None)
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
    first = sq.add("j", "first")
    redis_client.set(sq.engine.keys.counter, score.MAX_COUNTER - 2)
    [job] = sq.claim(1, lease=0.05)  # active while the counter runs out
    second = sq.add("j", "second")
    third = sq.add("j", "third")  # forces the renumbering
    fourth = sq.add("j", "fourth")
    assert job.id == first and job.lease_deadline is not None
    wait_past(sq.client(), job.lease_deadline)
    assert [j.id for j in sq.claim(4)] == [first, second, third, fourth]


def test_an_idle_queue_past_2_to_the_31_starts_its_counter_again(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    half = 2**31
    redis_client.set(sq.engine.keys.counter, half + 5)
    first = sq.add("j")  # nothing waiting, nothing active: re-based
    assert int(redis_client.get(sq.engine.keys.counter) or 0) == 1
    redis_client.set(sq.engine.keys.counter, half + 5)
    second = sq.add("j")  # the first job waits: no re-base
    assert int(redis_client.get(sq.engine.keys.counter) or 0) == half + 6
    [claimed] = sq.claim(1)
    assert claimed.id == first
    redis_client.set(sq.engine.keys.counter, half + 5)
    sq.add("j")  # the first job is active: no re-base either
    assert int(redis_client.get(sq.engine.keys.counter) or 0) == half + 6
    assert sq.claim(5)[0].id == second


def test_counter_exhaustion_with_an_empty_queue_rebases(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    redis_client.set(sq.engine.keys.counter, score.MAX_COUNTER)
    job_id = sq.add("j", priority=7)
    job = sq.get(job_id)
    assert job is not None
    assert score.decode(job.score).tier == 7
    assert score.decode(job.score).counter == 1
