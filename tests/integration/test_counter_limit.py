"""The arrival counter never wraps into the tier bits (DESIGN §2)."""

from __future__ import annotations

import time

import redis

from echomq import SyncQueue, score


def test_order_holds_across_counter_exhaustion(sq: SyncQueue, redis_client: redis.Redis) -> None:
    redis_client.set(sq.engine.keys.counter, score.MAX_COUNTER - 2)
    before = [sq.add("j", i, priority=i % 2, group=("a" if i < 3 else None)) for i in range(3)]
    # the counter is now at the limit: the next adds force a renumbering
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
        assert [j.score for j in lane] == sorted(j.score for j in lane)


def test_a_stalled_job_keeps_its_place_through_a_renumbering(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    redis_client.set(sq.engine.keys.counter, score.MAX_COUNTER - 2)
    first = sq.add("j", "first")
    [job] = sq.claim(1, lease=0.05)  # active while the counter runs out
    second = sq.add("j", "second")
    third = sq.add("j", "third")  # forces the renumbering
    fourth = sq.add("j", "fourth")
    time.sleep(0.08)
    assert job.id == first
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
