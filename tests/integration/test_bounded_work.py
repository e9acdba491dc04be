"""Background work is done in bounded steps (DESIGN §8 "Bounded work").

Promotion of due jobs and reaping of expired leases handle at most
TIMED_BUDGET jobs per call, earliest fire time / deadline first; pruning at
most PRUNE_BUDGET per set and call. The next claim or maintenance run goes on
where the last stopped, so nothing is skipped, reordered or handled twice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
import redis

from echomq import Job, Queue, SyncQueue
from echomq.scripts import budget
from echomq.worker.maintenance import Maintenance

TIMED = budget("time", "TIMED_BUDGET")
CLAIM_EXTRA = budget("time", "CLAIM_EXTRA")  # a claim of n handles n + CLAIM_EXTRA at most
PRUNE = budget("retention", "PRUNE_BUDGET")
EXPIRED = budget("time", "EXPIRED_BUDGET")  # jobs past their expiry one claim buries
SETTLE_KB = budget("fixed", "SETTLE_KB")  # garbage (KB) a call collects before it returns
#: how long a test waits for jobs to come due or leases to expire (a bounded poll).
DEADLINE = 10.0


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def server_ms(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


#: how far ahead add_due_soon's first job fires: far enough that no job is due
#: yet when the add runs on a loaded machine (a job due at its add goes
#: straight to waiting, and the promotions counted would be fewer)
DUE_AFTER_MS = 1500


def add_due_soon(q: SyncQueue, count: int, *, spread_ms: int) -> list[str]:
    """``count`` jobs that fire DUE_AFTER_MS from now, the i-th ``i * spread_ms``
    later, added in reverse fire order (so fire order is not add order). Jobs with
    equal fire times are promoted in id order, i.e. reverse add order here."""
    base = datetime.now(UTC) + timedelta(milliseconds=DUE_AFTER_MS)
    jobs = [
        {"name": "j", "data": i, "run_at": base + timedelta(milliseconds=i * spread_ms)}
        for i in range(count)
    ]
    ids = q.add_many(list(reversed(jobs)))
    return list(reversed(ids))


def test_maintenance_promotes_at_most_the_budget_in_fire_time_order(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    count = 2 * TIMED + 7
    ids = add_due_soon(sq, count, spread_ms=1)
    assert sq.stats().counts["delayed"] == count  # none was due at its add
    last = sq.get(ids[-1])  # the last to fire
    assert last is not None and last.run_at is not None
    fire_ms = last.run_at.timestamp() * 1000
    wait_until(lambda: server_ms(redis_client) > fire_ms, "the jobs to be due")
    reports = [sq.maintain() for _ in range(3)]
    assert [r.promoted for r in reports] == [TIMED, TIMED, 7]
    # while more were due than the budget, the report said so: the next fire is not ahead
    assert reports[0].next_fire is not None and reports[0].next_fire <= reports[0].server_time
    assert reports[2].next_fire is None
    served = [job.data for job in sq.claim(count)]
    assert served == list(range(count))


def test_a_claim_promotes_the_earliest_due_jobs_first(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    count = TIMED + 300
    add_due_soon(sq, count, spread_ms=1)
    last_fire = datetime.now(UTC) + timedelta(milliseconds=DUE_AFTER_MS + count)
    wait_until(lambda: datetime.now(UTC) > last_fire + timedelta(milliseconds=300), "due jobs")
    [first] = sq.claim(1)
    assert first.data == 0
    counts = sq.stats().counts
    # a claim of 1 promoted 1 + CLAIM_EXTRA (the earliest fire times) and took one
    promoted = 1 + CLAIM_EXTRA
    assert (counts["waiting"], counts["delayed"]) == (promoted - 1, count - promoted)
    # a maintenance run promotes the full budget
    assert sq.maintain().promoted == TIMED
    # the rest come in fire-time order over the next claims: none skipped, none twice
    served = [first.data]
    while batch := sq.claim(50):
        served += [job.data for job in batch]
    assert served == list(range(count))


def test_expired_leases_are_reaped_at_most_the_budget_per_call_in_deadline_order(
    make_sync: Callable[..., SyncQueue],
) -> None:
    q = make_sync(max_stalls=5)
    count = 2 * TIMED + 11
    q.add_many([{"name": "j", "data": i} for i in range(count)])
    first = q.claim(TIMED, lease=0.3)  # expires first
    rest = q.claim(count, lease=0.6)
    assert len(first) + len(rest) == count
    deadline = max(job.lease_deadline for job in rest if job.lease_deadline is not None)
    wait_until(lambda: datetime.now(UTC) > deadline + timedelta(milliseconds=300), "expiry")
    reports = [q.maintain() for _ in range(3)]
    assert [r.reaped for r in reports] == [TIMED, TIMED, 11]
    assert reports[0].next_deadline is not None
    assert reports[0].next_deadline <= reports[0].server_time
    # every job is back at its old place, once
    served = [job.data for job in q.claim(count)]
    assert served == list(range(count))
    assert {job.stalls for job in q.jobs("active", count=count)} == {1}


def test_finished_jobs_are_pruned_at_most_the_budget_per_set_and_call(
    make_sync: Callable[..., SyncQueue],
) -> None:
    q = make_sync(keep_completed=10_000_000, max_attempts=1)
    count = 2 * PRUNE + 5
    q.add_many([{"name": "j", "data": i} for i in range(count)])
    done = q.claim(count)
    assert q.complete_many([(job, None) for job in done]) == [None] * count
    assert q.stats().counts["completed"] == count
    pruner = make_sync(keep_completed=0, keep_completed_age=0)
    assert [pruner.maintain().pruned for _ in range(3)] == [PRUNE, PRUNE, 5]
    assert pruner.stats().counts["completed"] == 0


def test_a_claim_buries_at_most_the_budget_of_expired_jobs_then_says_claim_again(
    make_sync: Callable[..., SyncQueue],
) -> None:
    q = make_sync()
    count = 2 * EXPIRED + 5
    q.add_many([{"name": "j", "data": i, "expires": 0.3} for i in range(count)])
    fresh = q.add("fresh")
    expiry = q.get(q.jobs("waiting", count=1)[0].id)
    assert expiry is not None and expiry.expires_at is not None
    limit = expiry.expires_at + timedelta(milliseconds=300)
    wait_until(lambda: datetime.now(UTC) > limit, "the expiry")
    first = q.claim(1)
    assert first == [] and first.retry_in == 0  # jobs are left: claim again at once
    assert q.stats().counts["dead"] == EXPIRED
    second = q.claim(1)
    assert second == [] and second.retry_in == 0
    assert q.stats().counts["dead"] == 2 * EXPIRED
    [job] = q.claim(1)  # the last 5 are buried, then the fresh job is leased
    assert job.id == fresh
    assert q.stats().counts["dead"] == count
    assert q.claim(1) == []


async def test_worker_maintenance_runs_again_at_once_while_leases_are_left_expired(
    backend_url: str, queue_name: str
) -> None:
    q = Queue(queue_name, backend_url, max_stalls=5)
    try:
        count = TIMED + 3
        await q.add_many([{"name": "j", "data": i} for i in range(count)])
        jobs = await q.claim(count, lease=0.3)
        last = max(job.lease_deadline for job in jobs if job.lease_deadline is not None)
        deadline = time.monotonic() + DEADLINE
        while datetime.now(UTC) < last + timedelta(milliseconds=300):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        maintenance = Maintenance(q, interval=60.0)
        assert (await maintenance.run_once()).reaped == TIMED
        assert maintenance.next_run_in() == 0.0  # a backlog is left: at once
        assert (await maintenance.run_once()).reaped == 3
        assert maintenance.next_run_in() > 30.0  # nothing left: the period
    finally:
        await q.close()


#: a library of its own in the functions' Lua state: reports the heap (KB)
_HEAP_PROBE = (
    "#!lua name=echomq_test_heap\n"
    "redis.register_function{function_name = 'echomq_test_heap', flags = {'no-writes'},\n"
    "callback = function() return tostring(collectgarbage('count')) end}"
)


@pytest.mark.no_cluster("the probe reads the Lua heap of one server")
def test_a_call_that_makes_much_garbage_collects_it_before_it_returns(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    """add_many of 5,000 jobs makes some 10 MB of Lua garbage (each job's fields and
    arguments); end_call (includes/fixed.lua) collects it in the same call, so the
    calls after it do not pay for it. What is left on the heap is the library, the
    call's reply (5,000 ids, freed later) and the probe: well under 2 × SETTLE_KB."""
    sq.add("warm", None)  # the library is loaded
    redis_client.function_load(_HEAP_PROBE, replace=True)
    try:
        before = float(redis_client.fcall_ro("echomq_test_heap", 0))
        sq.add_many([{"name": "j", "data": "x" * 100, "group": f"l{i % 7}"} for i in range(5000)])
        after = float(redis_client.fcall_ro("echomq_test_heap", 0))
    finally:
        redis_client.function_delete("echomq_test_heap")
    assert after - before < 2 * SETTLE_KB, (before, after)


def test_a_large_completion_batch_past_the_kept_count_prunes_within_its_budget(
    make_sync: Callable[..., SyncQueue],
) -> None:
    # 10,000 completions in one call, 10 kept: the pruning plan sorts the
    # call's own additions (a copy of 10,000 ids, which unpack() overflowed)
    q = make_sync(keep_completed=10, max_attempts=1)
    count = 10_000
    q.add_many([{"name": "j", "data": i} for i in range(count)])
    done: list[Job] = []
    while len(done) < count:
        done += q.claim(count - len(done))
    assert q.complete_many([(job, None) for job in done]) == [None] * count
    completed = q.stats().counts["completed"]
    assert count - PRUNE <= completed < count  # one call prunes at most its budget
    pruner = make_sync(keep_completed=10, keep_completed_age=86_400)
    while pruner.maintain().pruned:
        pass
    assert pruner.stats().counts["completed"] == 10
