"""Every end of a job is in the server's metrics (issue 30, DESIGN §10), not only
the completion scripts' ones: on a queue with ``configure(metrics=True)`` each
path that ends a job adds exactly one to the right count of its name
(completed, failed, dead, cancelled: echomq/metrics.py says what each
includes); the paths that end nothing (remove, purge, retry_dead, release,
pruning) add nothing; a queue without the setting writes no metrics at all.

Counts are summed over the kept minutes of one job name, so a minute that
turns between two readings changes nothing. Times are the server's
(tests/clock.py wait_past), margins of at least 250 ms.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
import redis

from clock import server_ms, wait_past
from echomq import SyncQueue
from echomq.engine.batches import CANCEL_PAGE
from echomq.job import Job
from echomq.metrics import COUNTS, decode_point
from echomq.steps import Next

pytestmark = pytest.mark.timeout(90)

#: lease and expiry lengths, seconds (the server's clock passes them: wait_past)
SHORT = 0.3


def counts(q: SyncQueue, name: str) -> dict[str, int]:
    """completed / failed / dead / cancelled of job ``name`` over the last hour."""
    points = q.metrics(name=name)
    return {c: sum(getattr(p, c) for p in points) for c in COUNTS}


def runs(q: SyncQueue, name: str) -> tuple[int, float]:
    """How many runs of ``name`` the run histogram holds, and their summed seconds."""
    points = q.metrics(name=name)
    return sum(p.run.count for p in points), sum(p.run.sum for p in points)


def change(q: SyncQueue, name: str, action: Callable[[], object]) -> dict[str, int]:
    """What ``action`` adds to the counts of ``name`` (only the counts that moved)."""
    before = counts(q, name)
    action()
    after = counts(q, name)
    return {c: after[c] - before[c] for c in COUNTS if after[c] != before[c]}


@pytest.fixture
def mq(sq: SyncQueue) -> SyncQueue:
    sq.configure(metrics=True)
    return sq


def _past_lease(q: SyncQueue, job: Job) -> None:
    assert job.lease_deadline is not None
    wait_past(q.client(), job.lease_deadline)


def _past_expiry(q: SyncQueue, job_id: str) -> None:
    job = q.get(job_id)
    assert job is not None and job.expires_at is not None
    wait_past(q.client(), job.expires_at)


def test_cancelling_a_running_job_counts_it_dead_with_its_run(mq: SyncQueue) -> None:
    mq.add("run")
    [job] = mq.claim(1)
    started = server_ms(mq.client())
    wait_past(mq.client(), started + 300)  # a run of at least 300 ms, server clock
    before = runs(mq, "run")
    assert change(mq, "run", lambda: mq.cancel(job.id)) == {"dead": 1}
    count, seconds = runs(mq, "run")
    assert count == before[0] + 1 and seconds - before[1] >= 0.3


def test_cancel_with_retry_of_a_running_job_counts_a_failed_attempt(mq: SyncQueue) -> None:
    mq.add("again")
    [job] = mq.claim(1)
    assert change(mq, "again", lambda: mq.cancel(job.id, retry=True)) == {"failed": 1}
    assert runs(mq, "again")[0] == 1
    assert mq.get(job.id).state == "failed"  # type: ignore[union-attr]


def test_cancelling_a_job_before_it_ran_counts_it_cancelled(mq: SyncQueue) -> None:
    mq.add("retrying", max_attempts=3)
    [first] = mq.claim(1)
    waiting = mq.add("early")
    delayed = mq.add("early", delay=3600)
    parent = mq.add("parent", delay=3600)
    blocked = mq.add("early", depends_on=[parent])
    assert change(mq, "retrying", lambda: mq.fail(first, "boom", retry_delay=3600)) == {"failed": 1}
    for job_id in (waiting, delayed, blocked):
        assert change(mq, "early", lambda: mq.cancel(job_id)) == {"cancelled": 1}  # noqa: B023
    assert change(mq, "retrying", lambda: mq.cancel(first.id)) == {"cancelled": 1}
    assert runs(mq, "early")[0] == 0  # they never ran: no run counted
    assert counts(mq, "parent") == dict.fromkeys(COUNTS, 0)


def test_cancel_batch_counts_running_children_dead_and_the_others_cancelled(
    mq: SyncQueue,
) -> None:
    b = mq.batch()
    b.add_many([{"name": "child"}] * 3)
    b.close()
    [running] = mq.claim(1)
    assert change(mq, "child", lambda: mq.cancel_batch(b.id)) == {"dead": 1, "cancelled": 2}
    assert mq.get(running.id).state == "dead"  # type: ignore[union-attr]
    assert runs(mq, "child")[0] == 1


def test_a_claim_that_meets_a_child_of_a_cancelled_batch_counts_it_cancelled(
    mq: SyncQueue,
) -> None:
    b = mq.batch()
    b.add_many([{"name": "child"}] * (CANCEL_PAGE + 1))
    b.close()
    step: Any = None

    def first_step() -> None:
        nonlocal step
        step = mq.sender.send(mq.engine.cancel_batch(b.id))

    assert change(mq, "child", first_step) == {"cancelled": CANCEL_PAGE}
    assert isinstance(step, Next)
    assert change(mq, "child", lambda: mq.claim(1)) == {"cancelled": 1}  # it never runs
    assert change(mq, "child", lambda: mq.sender.send(step.call)) == {}  # counted once
    assert mq.batch_status(b.id).cancelled == CANCEL_PAGE + 1


def test_a_job_past_its_expiry_counts_dead_when_a_claim_meets_it(mq: SyncQueue) -> None:
    job_id = mq.add("brief", expires=SHORT)
    _past_expiry(mq, job_id)
    assert change(mq, "brief", lambda: mq.claim(1)) == {"dead": 1}
    assert mq.get(job_id).state == "dead"  # type: ignore[union-attr]
    assert runs(mq, "brief")[0] == 0


@pytest.mark.parametrize("by", ["claim", "maintain"])
def test_a_job_that_stalls_past_max_stalls_counts_dead(mq: SyncQueue, by: str) -> None:
    mq.configure(max_stalls=1)
    mq.add("stalls")
    [job] = mq.claim(1, SHORT)
    _past_lease(mq, job)
    # the first expired lease returns it to waiting: nothing ends
    assert change(mq, "stalls", mq.maintain) == {}
    [again] = mq.claim(1, SHORT)
    assert again.id == job.id
    _past_lease(mq, again)
    reap = (lambda: mq.claim(1)) if by == "claim" else mq.maintain
    assert change(mq, "stalls", reap) == {"dead": 1}
    assert mq.get(job.id).state == "dead"  # type: ignore[union-attr]
    assert runs(mq, "stalls")[0] == 0  # a stalled run's end is not known: no run


def _drain_maintenance(q: SyncQueue, until: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not until():
        assert time.monotonic() < deadline, "maintenance never got there"
        q.maintain()


def test_a_dependent_killed_by_its_dependencys_death_counts_dead(mq: SyncQueue) -> None:
    parent = mq.add("parent")
    child = mq.add("dependent", depends_on=[parent])
    [job] = mq.claim(1)
    assert change(mq, "parent", lambda: mq.fail(job, "no", retry=False)) == {"dead": 1}

    def killed() -> bool:
        return mq.get(child).state == "dead"  # type: ignore[union-attr]

    assert change(mq, "dependent", lambda: _drain_maintenance(mq, killed)) == {"dead": 1}
    # and once: more maintenance finds nothing more to count
    assert change(mq, "dependent", mq.maintain) == {}


def test_a_dependent_two_dead_dependencies_name_in_one_call_counts_once(mq: SyncQueue) -> None:
    first, second = mq.add("parent"), mq.add("parent")
    child = mq.add("dependent", depends_on=[first, second])
    for job in mq.claim(2):
        mq.fail(job, "no", retry=False)
    # one maintenance call meets both deaths ("!" entries): the child dies once
    assert change(mq, "dependent", mq.maintain) == {"dead": 1}
    assert mq.get(child).state == "dead"  # type: ignore[union-attr]


def test_a_dependent_of_a_cancelled_job_counts_dead(mq: SyncQueue) -> None:
    parent = mq.add("parent", delay=3600)
    child = mq.add("dependent", depends_on=[parent])
    assert change(mq, "parent", lambda: mq.cancel(parent)) == {"cancelled": 1}

    def killed() -> bool:
        return mq.get(child).state == "dead"  # type: ignore[union-attr]

    assert change(mq, "dependent", lambda: _drain_maintenance(mq, killed)) == {"dead": 1}


def test_what_ends_no_job_counts_nothing(mq: SyncQueue, redis_client: redis.Redis) -> None:
    mq.configure(keep_completed=0)
    mq.add_many([{"name": "quiet"}] * 4)
    a, b, c, d = mq.claim(4)
    mq.fail(a, "no", retry=False)
    mq.complete(b, None)
    before = counts(mq, "quiet")
    assert before["dead"] == 1 and before["completed"] == 1
    mq.release(c)  # back to waiting
    mq.remove(d.id)  # a running job removed
    mq.remove(mq.add("quiet"))  # a waiting one
    mq.retry_dead([a.id])
    [again] = [j for j in mq.claim(4) if j.id == a.id]
    mq.fail(again, "no", retry=False)
    mq.purge_dead([a.id])
    mq.maintain()  # prunes the completed job (keep_completed=0)
    assert mq.get(b.id) is None and mq.get(a.id) is None
    after = counts(mq, "quiet")
    assert after == {**before, "dead": before["dead"] + 1}  # only the second death


def test_a_queue_without_metrics_writes_none_on_any_end(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    sq.configure(max_stalls=0)  # a stored setting: its calls read the settings
    parent = sq.add("p")
    sq.add("dep", depends_on=[parent])
    sq.add("x", expires=SHORT)
    sq.add_many([{"name": "w"}] * 3)
    b = sq.batch()
    b.add_many([{"name": "child"}] * 2)
    b.close()
    [p] = sq.claim(1)
    sq.fail(p, "no", retry=False)
    sq.maintain()  # the dependent killed
    [run] = sq.claim(1)
    sq.cancel(run.id)
    [run] = sq.claim(1)
    sq.cancel(run.id, retry=True)
    sq.cancel(sq.add("w", delay=3600))
    [stalls] = sq.claim(1, SHORT)
    _past_lease(sq, stalls)
    sq.maintain()  # dead: stalled past max_stalls 0
    sq.claim(1)
    sq.cancel_batch(b.id)
    time.sleep(SHORT)
    sq.claim(10)  # meets the expired job if it is still waiting
    assert sq.get(parent).state == "dead"  # type: ignore[union-attr]
    assert sq.metrics() == []
    minute = server_ms(sq.client()) // 60_000
    keys = [sq.engine.keys.metrics(m) for m in range(minute - 2, minute + 1)]
    assert not any(redis_client.exists(k) for k in keys)


def test_a_minute_stored_without_cancelled_reads_and_keeps_its_counts(
    mq: SyncQueue, redis_client: redis.Redis
) -> None:
    """A field as an older echomq stored it (three counts) reads with cancelled 0;
    a cancel adds the fourth count, and a later completion keeps it."""
    minute = server_ms(mq.client()) // 60_000
    if server_ms(mq.client()) % 60_000 > 55_000:  # too near the next minute: start there
        wait_past(mq.client(), (minute + 1) * 60_000)
        minute += 1
    key = mq.engine.keys.metrics(minute)
    redis_client.hset(key, mapping={"t": "1", "n:old": "2 1 0 r0 w0"})
    redis_client.pexpire(key, 60_000)
    point = decode_point(minute, "old", redis_client.hget(key, "n:old"))
    assert (point.completed, point.failed, point.dead, point.cancelled) == (2, 1, 0, 0)
    mq.cancel(mq.add("old"))
    mq.add("old")
    mq.complete(mq.claim(1)[0], None)
    stored = redis_client.hget(key, "n:old")
    if stored is None:  # the minute turned after all: counted in the next one
        pytest.skip("the server's minute turned during the test")
    point = decode_point(minute, "old", stored)
    assert (point.completed, point.failed, point.dead, point.cancelled) == (3, 1, 0, 1)
    assert str(stored if isinstance(stored, str) else stored.decode()).startswith("3 1 0 1 r")
    assert isinstance(point.minute, datetime)
