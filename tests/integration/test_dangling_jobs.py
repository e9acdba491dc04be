"""A job listed in a lane (or the delayed or active set) whose hash is gone, and
drop() racing producers (issue 27 item 9): a claim outside a migration drops
the dangling entry, counts it and serves the rest; drop() refuses adds while
it runs. (A key not moved yet during a slot migration still stops the claim
with TRYAGAIN: tests/cluster/test_read_before_write.py.)"""

from __future__ import annotations

import threading
import time

import pytest
import redis
from redis.cluster import RedisCluster

from echomq import InvalidState, SyncQueue

pytestmark = pytest.mark.timeout(120)


def lose_hash(sq: SyncQueue, client: redis.Redis | RedisCluster, job_id: str) -> None:
    assert client.delete(sq.engine.keys.job(job_id)) == 1


def test_a_claim_drops_a_waiting_entry_whose_job_is_gone(
    sq: SyncQueue, redis_client: redis.Redis | RedisCluster
) -> None:
    gone, kept = sq.add("gone", group="g"), sq.add("kept", group="g")
    other = sq.add("other")
    lose_hash(sq, redis_client, gone)
    claimed = sq.claim(3)
    assert sorted(j.id for j in claimed) == sorted([kept, other])
    stats = sq.stats()
    assert stats.totals["lost"] == 1
    assert stats.counts["waiting"] == 0
    assert sq.claim(1) == []  # nothing left listed
    later = sq.add("later", group="g")
    assert [j.id for j in sq.claim(1)] == [later]  # the queue is not wedged
    kinds = [(e.kind, e.job_id) for e in sq.read_events("0", 200).events]
    assert ("lost", gone) in kinds


def test_a_claim_drops_a_delayed_entry_whose_job_is_gone(
    sq: SyncQueue, redis_client: redis.Redis | RedisCluster
) -> None:
    gone = sq.add("gone", delay=0.3)
    lose_hash(sq, redis_client, gone)
    later = sq.add("later")
    deadline = time.monotonic() + 10
    got: list[str] = []
    while sq.stats().totals["lost"] == 0:
        got += [j.id for j in sq.claim(1)]
        assert time.monotonic() < deadline, "the delayed entry was never dropped"
        time.sleep(0.05)
    got += [j.id for j in sq.claim(1)]
    assert got == [later]
    assert sq.stats().counts["delayed"] == 0


def test_an_add_during_a_drop_is_refused(sq: SyncQueue) -> None:
    sq.add_many([{"name": "x"} for _ in range(3000)])  # more keys than one page
    cursor = sq.sender.send(sq.engine.drop_page(0))
    assert cursor != 0
    with pytest.raises(InvalidState, match="being dropped"):
        sq.add("during")
    while cursor:
        cursor = sq.sender.send(sq.engine.drop_page(cursor))
    assert sq.exists() is False
    fresh = sq.add("after")  # the drop is over: the queue starts anew
    assert [j.id for j in sq.claim(5)] == [fresh]


def test_drop_racing_a_producer_leaves_a_queue_that_serves(make_sync: object) -> None:
    from collections.abc import Callable

    assert callable(make_sync)
    make: Callable[..., SyncQueue] = make_sync
    dropper, producer = make(), make()
    dropper.add_many([{"name": "x"} for _ in range(3000)])
    stop = threading.Event()
    refused = 0

    def produce() -> None:
        nonlocal refused
        while not stop.is_set():
            try:
                producer.add("racing")
            except InvalidState:
                refused += 1

    thread = threading.Thread(target=produce)
    thread.start()
    try:
        dropper.drop()
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive()
    after = dropper.add("after")
    claimed: list[str] = []
    while batch := dropper.claim(100):  # every racing add that got through, then after
        claimed += [j.id for j in batch]
    assert after in claimed
