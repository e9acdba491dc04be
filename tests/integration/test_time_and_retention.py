"""Delayed jobs, idempotency keys and retention, all by the server clock."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import redis

from clock import server_ms, wait_past
from conftest import FrozenServer
from echomq import Job, State, SyncQueue


def server_now(client: redis.Redis) -> datetime:
    secs, micros = client.time()
    return datetime.fromtimestamp(secs + micros / 1e6, tz=UTC)


def test_delayed_job_waits_for_its_fire_time(sq: SyncQueue, redis_client: redis.Redis) -> None:
    job_id = sq.add("later", delay=0.5)
    job = sq.get(job_id)
    assert job is not None and job.state is State.DELAYED and job.run_at is not None
    deadline = time.monotonic() + 10
    claimed: list[Job] = []
    tries = 0
    while not claimed and time.monotonic() < deadline:
        claimed = sq.claim(1)
        tries += 1
        time.sleep(0.01)
    assert [j.id for j in claimed] == [job_id] and claimed[0].claimed_at is not None
    # claims were tried all along; by the server clock none got it before its fire time
    assert tries > 1 and claimed[0].claimed_at >= job.run_at
    assert server_now(redis_client) >= job.run_at


def test_run_at_in_the_past_is_waiting_at_once(sq: SyncQueue) -> None:
    job_id = sq.add("now", run_at=datetime.now(UTC) - timedelta(hours=1))
    job = sq.get(job_id)
    assert job is not None and job.state is State.WAITING


def test_run_at_in_the_future_is_delayed(sq: SyncQueue) -> None:
    when = datetime.now(UTC) + timedelta(hours=1)
    job_id = sq.add("later", run_at=when)
    job = sq.get(job_id)
    assert job is not None and job.state is State.DELAYED
    assert job.run_at is not None and abs((job.run_at - when).total_seconds()) < 0.002
    assert sq.claim(1) == []


def test_due_delayed_job_joins_its_lane_by_tier(sq: SyncQueue) -> None:
    low = sq.add("low", priority=5)
    urgent = sq.add("urgent", priority=0, delay=0.05)
    fire = sq.get(urgent)
    assert fire is not None and fire.run_at is not None
    wait_past(sq.client(), fire.run_at)
    assert [j.id for j in sq.claim(2)] == [urgent, low]


def test_maintain_promotes_and_reports_the_next_fire(sq: SyncQueue) -> None:
    soon = sq.add("soon", delay=1.0)
    sq.add("later", delay=3600)
    report = sq.maintain()
    assert report.promoted == 0 and report.next_fire is not None
    job = sq.get(soon)
    assert job is not None and job.run_at is not None
    assert report.server_time < job.run_at  # so the first pass could not promote it
    assert report.next_fire == job.run_at
    wait_past(sq.client(), job.run_at)
    report = sq.maintain()
    assert report.promoted == 1
    assert report.next_fire is not None
    assert report.next_fire - report.server_time > timedelta(minutes=59)
    assert sq.stats().counts == {
        "waiting": 1,
        "delayed": 1,
        "failed": 0,
        "active": 0,
        "completed": 0,
        "dead": 0,
        "blocked": 0,
        "cancelled": 0,
    }


def test_idempotency_key_returns_the_live_job(sq: SyncQueue) -> None:
    first = sq.add("pay", {"n": 1}, key="invoice-7")
    assert sq.add("pay", {"n": 2}, key="invoice-7") == first
    [job] = sq.claim(1)
    assert sq.add("pay", key="invoice-7") == first
    sq.complete(job)
    assert sq.add("pay", key="invoice-7") == first  # inside the retention window
    assert sq.stats().totals["added"] == 1
    sq.remove(first)
    assert sq.add("pay", key="invoice-7") != first


def test_idempotency_inside_one_batch(sq: SyncQueue) -> None:
    got = sq.add_many([{"name": "a", "key": "k"}, {"name": "b", "key": "k"}, {"name": "c"}])
    assert got[0] == got[1] != got[2]
    assert sq.stats().counts["waiting"] == 2


def test_completed_jobs_are_pruned_by_count(
    make_sync: Callable[..., SyncQueue], redis_client: redis.Redis
) -> None:
    q = make_sync(keep_completed=2)
    added = q.add_many([{"name": "j", "key": f"k{i}"} for i in range(5)])
    for job in q.claim(5):
        q.complete(job)
    assert q.stats().counts["completed"] == 2
    assert [q.get(i) is None for i in added] == [True, True, True, False, False]
    # a finished job's idempotency key expires with the retention age, and a
    # key whose job was pruned earlier (by count) no longer holds back an add
    assert 86_400_000 - 60_000 < redis_client.pttl(q.engine.keys.idem("k4")) <= 86_400_000
    assert q.add("j", key="k0") not in added
    assert q.add("j", key="k4") == added[4]


def test_completed_jobs_are_pruned_by_age(make_sync: Callable[..., SyncQueue]) -> None:
    q = make_sync(keep_completed_age=0.05)
    old, new = q.add("old"), q.add("new")
    [job_old, job_new] = q.claim(2)
    finished = q.complete(job_old)
    assert finished is not None
    wait_past(q.client(), finished + timedelta(seconds=0.05))  # old is past its age
    q.complete(job_new)
    assert q.get(old) is None
    assert q.get(new) is not None


def test_dead_jobs_are_pruned_by_count(make_sync: Callable[..., SyncQueue]) -> None:
    q = make_sync(keep_dead=1, max_attempts=1)
    q.add_many([{"name": "j"} for _ in range(3)])
    for job in q.claim(3):
        q.fail(job, "x")
    assert q.stats().counts["dead"] == 1


def test_nothing_is_left_behind_after_completion(
    make_sync: Callable[..., SyncQueue], redis_client: redis.Redis
) -> None:
    q = make_sync(keep_completed=0)
    q.set_weight("g", 2)
    q.add_many([{"name": "j", "group": "g", "key": f"k{i}"} for i in range(10)])
    for job in q.claim(10):
        q.complete(job)
    keys = set(redis_client.scan_iter(match=f"emq:{{{q.name}}}:*"))
    idem = {q.engine.keys.idem(f"k{i}") for i in range(10)}
    fixed = {q.engine.keys.meta, q.engine.keys.counter, q.engine.keys.weights, q.engine.keys.wake}
    fixed.add(q.engine.keys.events)  # capped at event_stream_length (docs/lifecycle.md)
    assert keys == fixed | idem
    # idempotency keys only outlive their jobs by the retention age (a TTL)
    assert all(86_400_000 - 60_000 < redis_client.pttl(k) <= 86_400_000 for k in idem)


# -- an idempotency key's TTL is its job's retention age, to the millisecond ---------
#: ages apart, so a key given the other outcome's age is caught too
COMPLETED_AGE_MS = 3_600_000
DEAD_AGE_MS = 7_200_000


def finish_three_ways(q: SyncQueue) -> dict[str, int]:
    """Finish three keyed jobs: completed, failed to dead, and dead because its
    dependency died; each key with the TTL its outcome's retention age must give."""
    done, failed, parent = q.add_many(
        [{"name": "done", "key": "done"}, {"name": "failed", "key": "failed"}, {"name": "p"}]
    )
    orphan = q.add("orphan", key="orphan", depends_on=[parent])
    jobs = {job.id: job for job in q.claim(3, lease=300)}
    q.complete(jobs[done])
    q.fail(jobs[failed], "boom")
    q.fail(jobs[parent], "boom")  # marks the blocked dependent for maintenance to kill
    q.maintain()
    dead = q.get(orphan)
    assert dead is not None and dead.state is State.DEAD
    return {"done": COMPLETED_AGE_MS, "failed": DEAD_AGE_MS, "orphan": DEAD_AGE_MS}


def test_an_idempotency_key_expires_after_its_retention_age(
    make_sync: Callable[..., SyncQueue], redis_client: redis.Redis
) -> None:
    """Bounded both ways by the server clock: the TTL is at most the age and
    less only by the server time that passed since before the job finished."""
    q = make_sync(
        keep_completed_age=COMPLETED_AGE_MS / 1000,
        keep_dead_age=DEAD_AGE_MS / 1000,
        max_attempts=1,
    )
    before = server_ms(redis_client)
    ages = finish_three_ways(q)
    ttls = {key: redis_client.pttl(q.engine.keys.idem(key)) for key in ages}
    passed = server_ms(redis_client) - before
    for key, age in ages.items():
        assert age - passed <= ttls[key] <= age, (key, ttls[key], age, passed)


def test_an_idempotency_key_ttl_is_exactly_the_age_on_a_still_clock(
    frozen_server: FrozenServer, queue_name: str
) -> None:
    """With the server clock standing still, PTTL is the retention age itself."""
    q = SyncQueue(
        queue_name,
        frozen_server.url,
        keep_completed_age=COMPLETED_AGE_MS / 1000,
        keep_dead_age=DEAD_AGE_MS / 1000,
        max_attempts=1,
    )
    client = frozen_server.server.client()
    try:
        ages = finish_three_ways(q)
        ttls = {key: client.pttl(q.engine.keys.idem(key)) for key in ages}
        assert ttls == ages
        frozen_server.clock.advance(COMPLETED_AGE_MS - 1)
        assert client.pttl(q.engine.keys.idem("done")) == 1
        frozen_server.clock.advance(2)  # the age is over: the key is gone, the add is new
        assert client.exists(q.engine.keys.idem("done")) == 0
        again = q.get(q.add("again", key="done"))
        assert again is not None and again.name == "again"  # not the finished "done" job
        assert client.pttl(q.engine.keys.idem("failed")) == DEAD_AGE_MS - COMPLETED_AGE_MS - 1
    finally:
        client.close()
        q.close()
