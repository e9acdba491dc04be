"""A job's life on a real server: add, claim, complete, fail, retry, dead, remove."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from clock import wait_past
from echomq import Job, JobNotFound, LeaseLost, State, SyncQueue, ids, score


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


def test_add_then_get_shows_every_field(sq: SyncQueue) -> None:
    job_id = sq.add("send", {"to": 42}, priority=3, group="acme", max_attempts=5)
    assert ids.is_id(job_id)
    job = sq.get(job_id)
    assert job is not None
    assert (job.name, job.data, job.priority, job.group) == ("send", {"to": 42}, 3, "acme")
    assert job.state is State.WAITING
    assert (job.attempts, job.max_attempts) == (0, 5)
    decoded = score.decode(job.score)
    assert decoded.tier == 3 and decoded.counter >= 1
    assert job.created_at is not None


def test_claim_leases_and_complete_records_result_once(sq: SyncQueue) -> None:
    job_id = sq.add("send", {"n": 1})
    [job] = sq.claim(1, lease=30)
    assert job.id == job_id and job.state is State.ACTIVE and job.attempts == 1
    assert job.lease_token is not None and job.lease_deadline is not None
    finished = sq.complete(job, {"ok": True})
    done = sq.get(job_id)
    assert done is not None and done.state is State.COMPLETED and done.result == {"ok": True}
    # the same lease completing again (a retry after a lost reply) is answered
    # as before and records nothing new
    assert sq.complete(job, {"again": True}) == finished
    again = sq.get(job_id)
    assert again is not None and again.result == {"ok": True}
    stats = sq.stats()
    assert stats.counts["completed"] == 1 and stats.counts["active"] == 0
    assert stats.totals == {"added": 1, "completed": 1, "failed": 0, "lost": 0}


def test_late_ack_after_reclaim_is_refused(make_sync: Callable[..., SyncQueue]) -> None:
    first, second = make_sync(), make_sync()
    first.add("slow")
    [stale] = first.claim(1, lease=0.05)
    assert stale.lease_deadline is not None
    wait_past(first.client(), stale.lease_deadline)
    [fresh] = second.claim(1, lease=30)
    assert fresh.id == stale.id and fresh.lease_token != stale.lease_token
    assert fresh.stalls == 1
    with pytest.raises(LeaseLost):
        first.complete(stale, "late")
    with pytest.raises(LeaseLost):
        first.extend(stale, 30)
    second.complete(fresh, "on time")
    job = second.get(fresh.id)
    assert job is not None and job.result == "on time"
    assert second.stats().totals["completed"] == 1


def test_expired_lease_is_refused_even_before_reclaim(sq: SyncQueue) -> None:
    sq.add("slow")
    [job] = sq.claim(1, lease=0.03)
    assert job.lease_deadline is not None
    wait_past(sq.client(), job.lease_deadline)
    with pytest.raises(LeaseLost):
        sq.complete(job)


def test_stalled_job_returns_to_its_old_place(sq: SyncQueue) -> None:
    a = sq.add("j", 1)
    b = sq.add("j", 2)
    [job] = sq.claim(1, lease=0.03)
    assert job.id == a and job.lease_deadline is not None
    wait_past(sq.client(), job.lease_deadline)
    again = sq.claim(2, lease=30)
    assert [j.id for j in again] == [a, b]
    assert again[0].stalls == 1 and again[0].attempts == 2


def test_past_max_stalls_the_job_is_dead(make_sync: Callable[..., SyncQueue]) -> None:
    q = make_sync(max_stalls=1)
    job_id = q.add("j")
    for _ in range(2):
        [job] = q.claim(1, lease=0.02)
        assert job.id == job_id and job.lease_deadline is not None
        wait_past(q.client(), job.lease_deadline)
    assert q.claim(1) == []
    dead = q.get(job_id)
    assert dead is not None and dead.state is State.DEAD
    assert dead.error is not None and "stalled" in dead.error


def test_fail_retries_until_max_attempts_then_dead_with_traceback(sq: SyncQueue) -> None:
    job_id = sq.add("flaky", max_attempts=2)
    [job] = sq.claim(1)
    assert sq.fail(job, "boom 1", "Traceback 1", retry_delay=0) is State.FAILED
    failed = sq.get(job_id)
    assert failed is not None and failed.state is State.FAILED and failed.error == "boom 1"
    assert sq.stats().counts["failed"] == 1
    [job] = sq.claim(1)
    assert job.id == job_id and job.attempts == 2
    assert sq.fail(job, "boom 2", "Traceback 2") is State.DEAD
    dead = sq.get(job_id)
    assert dead is not None and dead.state is State.DEAD
    assert (dead.error, dead.traceback) == ("boom 2", "Traceback 2")
    assert [j.id for j in sq.dead()] == [job_id]


def test_retry_waits_for_its_backoff(sq: SyncQueue) -> None:
    job_id = sq.add("flaky")
    [job] = sq.claim(1)
    sq.fail(job, "boom", retry_delay=0.3)
    failed = sq.get(job_id)
    assert failed is not None and failed.run_at is not None
    again: list[Job] = []

    def claimed() -> bool:
        again.extend(sq.claim(1))
        return bool(again)

    wait_until(claimed)
    # by the server clock, the retry was not claimable before its fire time
    assert again[0].id == job_id and again[0].claimed_at is not None
    assert again[0].claimed_at >= failed.run_at


def test_fail_without_retry_is_dead_at_once(sq: SyncQueue) -> None:
    sq.add("bad", max_attempts=5)
    [job] = sq.claim(1)
    assert sq.fail(job, "fatal", retry=False) is State.DEAD


def test_retry_dead_brings_jobs_back_with_fresh_attempts(sq: SyncQueue) -> None:
    job_id = sq.add("bad", max_attempts=1, group="g")
    [job] = sq.claim(1)
    sq.fail(job, "fatal")
    assert sq.retry_dead() == [job_id]
    back = sq.get(job_id)
    assert back is not None and back.state is State.WAITING and back.attempts == 0
    [again] = sq.claim(1)
    assert again.id == job_id and again.group == "g"
    assert sq.retry_dead() == []


def test_extend_moves_the_deadline(sq: SyncQueue) -> None:
    sq.add("long")
    [job] = sq.claim(1, lease=1.0)  # outlives the one round trip to extend it
    first = job.lease_deadline
    assert first is not None
    new = sq.extend(job, lease=30)
    assert new is not None and new > first
    wait_past(sq.client(), first)
    assert sq.claim(1) == []  # not reaped: the lease was extended
    sq.complete(job)


def test_remove_deletes_in_any_state(sq: SyncQueue) -> None:
    active = sq.add("b")
    [job] = sq.claim(1)
    waiting = sq.add("a", group="solo")
    assert job.id == active
    assert sq.remove(waiting) is True
    assert sq.remove(active) is True
    assert sq.remove(waiting) is False
    assert sq.get(waiting) is None
    stats = sq.stats()
    assert stats.counts["waiting"] == 0 and stats.counts["active"] == 0
    assert stats.ring_length == 0
    with pytest.raises(JobNotFound):  # the removed job's holder learns it is gone
        sq.complete(job)


def test_pause_stops_claims_until_resume(sq: SyncQueue) -> None:
    sq.add("j")
    sq.pause()
    assert sq.claim(5) == []
    assert sq.stats().paused
    sq.resume()
    assert len(sq.claim(5)) == 1


def test_complete_many_records_holders_and_reports_the_rest(
    make_sync: Callable[..., SyncQueue],
) -> None:
    q = make_sync(keep_completed=3)
    q.add_many([{"name": "j", "data": i} for i in range(5)])
    jobs = q.claim(5, lease=30)
    q.remove(jobs[1].id)
    forged = type(jobs[2])(**{f: getattr(jobs[2], f) for f in jobs[2].__dataclass_fields__})
    forged.lease_token = "0"
    results = q.complete_many([(jobs[0], 0), (jobs[1], 1), (forged, 2), (jobs[3], 3), (jobs[4], 4)])
    assert results[0] is None and results[3] is None and results[4] is None
    assert isinstance(results[1], JobNotFound)
    assert isinstance(results[2], LeaseLost)
    stats = q.stats()
    assert stats.counts["completed"] == 3 and stats.counts["active"] == 1
    assert stats.totals["completed"] == 3
    done = q.get(jobs[4].id)
    assert done is not None and done.result == 4


def test_a_retried_fail_is_answered_as_before(sq: SyncQueue) -> None:
    sq.add("flaky", max_attempts=1)
    [job] = sq.claim(1)
    assert sq.fail(job, "boom") is State.DEAD
    assert sq.fail(job, "boom again") is State.DEAD
    dead = sq.get(job.id)
    assert dead is not None and dead.error == "boom"
    assert sq.stats().totals["failed"] == 1
