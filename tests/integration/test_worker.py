"""The worker runtime on real servers: handlers, retries, timeouts, leases, shutdown,
hooks, progress, and waiting for work without polling.

Also the core pieces the worker needs: release, progress, extend_many and the
doorbell rings of the scripts.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis

from clock import await_past
from echomq import Backoff, InvalidOption, Job, LeaseLost, Queue, State, Worker
from servers import ServerFactory

pytestmark = pytest.mark.timeout(60)


async def wait_for(predicate: Callable[[], Awaitable[bool] | bool], timeout: float = 5.0) -> None:
    """Poll ``predicate`` every 5 ms until it is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if not isinstance(value, bool):
            value = await value
        if value:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(0.005)


async def job_in(q: Queue, job_id: str, *states: State, timeout: float = 10.0) -> Job:
    """Wait until the job reaches one of ``states`` and return it."""
    found: list[Job] = []

    async def reached() -> bool:
        job = await q.get(job_id)
        if job is not None and job.state in states:
            found.append(job)
            return True
        return False

    await wait_for(reached, timeout)
    return found[0]


@asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[asyncio.Task[None]]:
    """Run ``worker`` in the background; stop it (bounded) when the block ends."""
    task = asyncio.create_task(worker.run(install_signals=False))
    await wait_for(lambda: worker.running or task.done())
    try:
        yield task
    finally:
        worker.stop(immediate=True)
        await asyncio.wait_for(task, 10)


def total_calls(client: redis.Redis) -> int:
    stats: dict[str, dict[str, int]] = client.info("commandstats")
    return sum(entry["calls"] for entry in stats.values())


# -- core pieces: release, progress, extend_many, doorbell --------------------------


async def test_release_puts_the_job_back_at_its_place_uncounted(aq: Queue) -> None:
    first, second = await aq.add("j", 1), await aq.add("j", 2)
    [job] = await aq.claim(1, lease=30)
    assert job.id == first and job.attempts == 1
    await aq.release(job)
    again = await aq.get(first)
    assert again is not None and again.state is State.WAITING
    assert again.attempts == 0 and again.stalls == 0
    assert [j.id for j in await aq.claim(2)] == [first, second]


async def test_release_needs_the_lease(aq: Queue) -> None:
    await aq.add("j")
    [job] = await aq.claim(1, lease=30)
    stale = Job(
        **{
            **{
                f: getattr(job, f)
                for f in (
                    "id",
                    "name",
                    "data",
                    "priority",
                    "group",
                    "state",
                    "attempts",
                    "max_attempts",
                    "score",
                    "created_at",
                )
            },
            "lease_token": "999",
        }
    )
    with pytest.raises(LeaseLost):
        await aq.release(stale)
    await aq.complete(job)
    with pytest.raises(LeaseLost):
        await aq.release(stale)


async def test_release_rings_the_doorbell(aq: Queue, redis_client: redis.Redis) -> None:
    wake = aq.engine.keys.wake
    await aq.add("j")
    [job] = await aq.claim(1)
    redis_client.delete(wake)
    await aq.release(job)
    assert redis_client.llen(wake) == 1


async def test_progress_is_stored_for_the_lease_holder_only(aq: Queue) -> None:
    job_id = await aq.add("j")
    [job] = await aq.claim(1)
    await aq.progress(job, {"done": 3, "of": 10})
    got = await aq.get(job_id)
    assert got is not None and got.progress == {"done": 3, "of": 10}
    await aq.complete(job)
    with pytest.raises(LeaseLost):
        await aq.progress(job, {"done": 4})


async def test_extend_many_renews_held_leases_and_reports_lost_ones(aq: Queue) -> None:
    await aq.add_many([{"name": "j"}, {"name": "j"}])
    kept, lost = await aq.claim(2, lease=1.0)  # survives the two round trips below
    first_deadline = kept.lease_deadline
    assert first_deadline is not None
    await aq.complete(lost)
    deadlines = await aq.extend_many([kept, lost], lease=30)
    assert deadlines[1] is None
    assert deadlines[0] is not None and kept.lease_deadline == deadlines[0]
    await await_past(await aq.client(), first_deadline)  # only the renewal keeps it now
    await aq.complete(kept)


async def test_extend_many_refuses_a_lease_that_expired_and_was_claimed_again(
    aq: Queue,
) -> None:
    """A stale worker's heartbeat neither revives its expired lease nor moves
    the lease of the consumer that claimed the job after it."""
    job_id = await aq.add("j")
    [stale] = await aq.claim(1, lease=0.3)
    assert stale.lease_deadline is not None
    await await_past(await aq.client(), stale.lease_deadline)
    assert await aq.extend_many([stale], lease=30) == [None]  # expired, not yet reclaimed
    [fresh] = await aq.claim(1, lease=30)  # another consumer takes the expired lease
    assert fresh.id == job_id and fresh.lease_token != stale.lease_token
    before = await aq.get(job_id)
    assert before is not None and before.lease_deadline == fresh.lease_deadline
    assert await aq.extend_many([stale], lease=300) == [None]
    after = await aq.get(job_id)
    assert after is not None and after.state is State.ACTIVE
    assert after.lease_token == fresh.lease_token
    assert after.lease_deadline == fresh.lease_deadline  # the new lease is untouched
    with pytest.raises(LeaseLost):
        await aq.complete(stale)
    await aq.complete(fresh)


async def test_a_new_earliest_delayed_job_rings_the_doorbell(
    aq: Queue, redis_client: redis.Redis
) -> None:
    wake = aq.engine.keys.wake
    await aq.add("j", delay=60)
    assert redis_client.llen(wake) == 1
    redis_client.delete(wake)
    await aq.add("j", delay=120)  # not the earliest: idle workers need not re-read
    assert redis_client.llen(wake) == 0
    await aq.add("j", delay=30)
    assert redis_client.llen(wake) == 1


# -- handlers and results ----------------------------------------------------------


async def test_async_and_sync_handlers_run_and_results_are_stored(aq: Queue) -> None:
    threads: set[str] = set()
    # each blocking handler waits until all three are in: only if they run side
    # by side (blocking work stalls neither the loop nor the other jobs) do they pass
    together = threading.Barrier(3, timeout=10)

    async def double(job: Job) -> Any:
        return {"double": job.data * 2}

    def blocking(job: Job) -> Any:
        threads.add(threading.current_thread().name)
        together.wait()
        return job.data + 1

    worker = Worker(aq, {"double": double, "blocking": blocking}, concurrency=4)
    async with running(worker):
        a = await aq.add("double", 21)
        s = await aq.add_many([{"name": "blocking", "data": i} for i in range(3)])
        done_a = await job_in(aq, a, State.COMPLETED)
        done_s = [await job_in(aq, i, State.COMPLETED, timeout=15) for i in s]
    assert done_a.result == {"double": 42}
    assert [j.result for j in done_s] == [1, 2, 3]
    assert len(threads) == 3 and not together.broken


async def test_failures_retry_with_backoff_then_die_with_traceback(aq: Queue) -> None:
    starts: list[datetime] = []  # claim times, by the server clock
    events: list[tuple[str, int]] = []

    def explode(job: Job) -> None:
        assert job.claimed_at is not None
        starts.append(job.claimed_at)
        raise ValueError(f"boom {job.attempts}")

    def hook(kind: str) -> Callable[[Job], None]:
        return lambda job: events.append((kind, job.attempts))

    q = Queue(aq.name, aq.url, backoff=Backoff(base=0.1, factor=2.0, jitter=0.0))
    worker = Worker(
        q,
        {"explode": explode},
        on_failed=hook("failed"),
        on_retried=hook("retried"),
        on_dead=hook("dead"),
    )
    try:
        async with running(worker):
            job_id = await q.add("explode", max_attempts=3)
            dead = await job_in(q, job_id, State.DEAD)
            await wait_for(lambda: ("dead", 3) in events)
    finally:
        await q.close()
    assert dead.attempts == 3 and dead.error == "ValueError: boom 3"
    assert dead.traceback is not None
    assert "in explode" in dead.traceback and "ValueError: boom 3" in dead.traceback
    assert events == [
        ("failed", 1),
        ("retried", 1),
        ("failed", 2),
        ("retried", 2),
        ("failed", 3),
        ("dead", 3),
    ]
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(starts)]
    # no retry was claimed before its backoff ran out (base 0.1 s, doubling)
    assert gaps[0] >= 0.1 and gaps[1] >= 0.2, gaps


async def test_a_job_without_handler_is_released_with_a_delay_and_logged_once(
    aq: Queue, caplog: pytest.LogCaptureFixture
) -> None:
    """An old worker in a rolling deploy must not kill a new job type: the job is
    given back (no attempt counted) for ``unknown_delay`` seconds."""
    worker = Worker(aq, {"known": lambda job: None}, unknown_delay=60)
    async with running(worker):
        first, second = await aq.add("unknown"), await aq.add("unknown")
        for job_id in (first, second):
            job = await job_in(aq, job_id, State.DELAYED)
            assert job.attempts == 0 and job.run_at is not None and job.created_at is not None
            assert job.run_at - job.created_at > timedelta(seconds=50)
    logged = [r for r in caplog.records if "no handler for job name 'unknown'" in r.message]
    assert len(logged) == 1


async def test_a_job_without_handler_is_dead_past_unknown_dead_after(aq: Queue) -> None:
    worker = Worker(aq, {"known": lambda job: None, "other": lambda job: None},
                    unknown_dead_after=0)  # fmt: skip
    async with running(worker):
        job_id = await aq.add("unknown", max_attempts=5)
        dead = await job_in(aq, job_id, State.DEAD)
    assert dead.attempts == 1
    assert dead.error is not None
    assert "'unknown'" in dead.error and "known, other" in dead.error


async def test_a_result_that_is_not_json_kills_the_job(aq: Queue) -> None:
    worker = Worker(aq, {"j": lambda job: {1, 2}})
    async with running(worker):
        dead = await job_in(aq, await aq.add("j", max_attempts=3), State.DEAD)
    assert dead.error is not None and "PayloadError" in dead.error and dead.attempts == 1


# -- timeouts and leases -----------------------------------------------------------


async def test_an_async_handler_past_its_timeout_is_cancelled_and_fails(aq: Queue) -> None:
    cancelled = asyncio.Event()

    async def stuck(job: Job) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    worker = Worker(aq, {"stuck": stuck}, timeout=0.2)
    async with running(worker):
        started = time.monotonic()
        dead = await job_in(aq, await aq.add("stuck", max_attempts=1), State.DEAD)
        elapsed = time.monotonic() - started
    assert cancelled.is_set() and 0.2 <= elapsed < 2.0
    assert dead.error is not None and dead.error.startswith("HandlerTimeout")
    assert dead.traceback is not None and "in stuck" in dead.traceback  # where it was stuck


async def test_a_sync_handler_past_its_timeout_fails_and_frees_its_slot(aq: Queue) -> None:
    release = threading.Event()

    def stuck(job: Job) -> None:
        release.wait(30)

    worker = Worker(aq, {"stuck": stuck, "quick": lambda job: "ok"}, concurrency=1, timeout=0.2)
    try:
        async with running(worker):
            dead = await job_in(aq, await aq.add("stuck", max_attempts=1), State.DEAD)
            quick = await job_in(aq, await aq.add("quick"), State.COMPLETED)
    finally:
        release.set()
    assert dead.error is not None and dead.error.startswith("HandlerTimeout")
    assert dead.traceback is not None and "in stuck" in dead.traceback
    assert quick.result == "ok"


async def test_the_heartbeat_keeps_a_lease_longer_than_itself(aq: Queue, backend_url: str) -> None:
    calls: list[str] = []

    async def slow(job: Job) -> str:
        calls.append(job.id)
        await asyncio.sleep(2.5)
        return "done"

    worker = Worker(aq, {"slow": slow}, lease=1.0)
    rival = Queue(aq.name, backend_url)
    try:
        async with running(worker):
            job_id = await aq.add("slow")
            await wait_for(lambda: bool(calls))
            stolen: list[Job] = []
            while (job := await aq.get(job_id)) is not None and job.state is State.ACTIVE:
                stolen += await rival.claim(1)  # claims also reap expired leases
                await rival.maintain()
                await asyncio.sleep(0.1)
            done = await job_in(aq, job_id, State.COMPLETED)
    finally:
        await rival.close()
    assert stolen == [] and calls == [job_id]
    assert done.result == "done" and done.attempts == 1 and done.stalls == 0


async def test_a_job_removed_while_running_is_stalled_and_cancelled(aq: Queue) -> None:
    cancelled = asyncio.Event()
    stalled: list[str] = []

    async def long(job: Job) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    worker = Worker(aq, {"long": long}, lease=1.0, on_stalled=lambda job: stalled.append(job.id))
    async with running(worker):
        job_id = await aq.add("long")
        await wait_for(lambda: worker.in_flight == 1)
        assert await aq.remove(job_id)
        await wait_for(lambda: stalled == [job_id])
        await wait_for(cancelled.is_set)
        await wait_for(lambda: worker.in_flight == 0)


async def test_maintenance_returns_a_crashed_claimers_jobs(aq: Queue) -> None:
    done: list[str] = []
    job_id = await aq.add("j")
    [crashed] = await aq.claim(1, lease=0.3)  # a worker that dies holding the lease
    worker = Worker(aq, {"j": lambda job: done.append(job.id)}, lease=1.0)
    async with running(worker):
        finished = await job_in(aq, job_id, State.COMPLETED)
    assert done == [job_id] and finished.stalls == 1 and crashed.id == job_id


# -- shutdown ------------------------------------------------------------------------


async def test_stop_lets_running_jobs_finish_within_grace(aq: Queue) -> None:
    started, proceed = asyncio.Event(), asyncio.Event()

    async def short(job: Job) -> str:
        started.set()
        await proceed.wait()  # still running when the stop comes
        return "finished"

    worker = Worker(aq, {"short": short}, concurrency=1, grace=5.0)  # no slot for a second
    task = asyncio.create_task(worker.run(install_signals=False))
    job_id = await aq.add("short")
    await asyncio.wait_for(started.wait(), 10)
    later = await aq.add("short")
    worker.stop()
    proceed.set()
    await asyncio.wait_for(task, 10)
    done = await aq.get(job_id)
    assert done is not None and done.state is State.COMPLETED and done.result == "finished"
    not_started = await aq.get(later)
    assert not_started is not None and not_started.state is State.WAITING


async def test_jobs_past_grace_are_released_and_claimable_at_once(
    aq: Queue, backend_url: str
) -> None:
    async def forever(job: Job) -> None:
        await asyncio.sleep(60)

    def blocked(job: Job) -> None:
        gate.wait(60)

    gate = threading.Event()
    worker = Worker(aq, {"forever": forever, "blocked": blocked}, lease=30.0, grace=0.2)
    task = asyncio.create_task(worker.run(install_signals=False))
    try:
        ids = await aq.add_many([{"name": "forever"}, {"name": "blocked"}])
        await wait_for(lambda: worker.in_flight == 2)
        stopped_at = time.monotonic()
        worker.stop()
        await asyncio.wait_for(task, 5)
        assert time.monotonic() - stopped_at < 2.0
    finally:
        gate.set()
    rival = Queue(aq.name, backend_url)
    try:
        reclaimed = await rival.claim(2, lease=5)  # at once: no lease to wait out
    finally:
        await rival.close()
    assert sorted(j.id for j in reclaimed) == sorted(ids)
    assert all(j.attempts == 1 and j.stalls == 0 for j in reclaimed)


async def test_stop_before_run_returns_at_once(aq: Queue) -> None:
    worker = Worker(aq, {"j": lambda job: None})
    worker.stop()
    await asyncio.wait_for(worker.run(install_signals=False), 5)
    assert not worker.running


async def test_a_graceful_stop_ends_an_idle_wait_at_once_and_strands_no_job(
    aq: Queue, redis_client: redis.Redis
) -> None:
    # the idle wait is a BLPOP pipelined with a claim: a stop must not cancel it
    # (its claim could take a job nobody runs); it rings the worker's own stop
    # bell instead, and a job the claim brought is released, not left active
    for round_ in range(8):
        worker = Worker(aq, {"j": lambda job: None}, maintenance_interval=30.0, lease=60.0)
        task = asyncio.create_task(worker.run(install_signals=False))
        await wait_for(lambda w=worker: w.idle)  # type: ignore[misc]
        if round_ % 2:
            await aq.add("j")  # lands around the stop: claimed, run or released
        worker.stop()
        started = time.monotonic()
        await asyncio.wait_for(task, 5)
        assert time.monotonic() - started < 1.5  # not the 30 s wait
        assert (await aq.stats()).counts["active"] == 0
    leftovers = list(redis_client.scan_iter(f"{aq.engine.keys.prefix}stop:*"))
    assert all(redis_client.pttl(key) > 0 for key in leftovers)  # expiring, never kept


# -- hooks and progress ---------------------------------------------------------------


async def test_completed_hook_may_be_async_and_a_raising_hook_is_harmless(aq: Queue) -> None:
    seen: list[tuple[str, Any]] = []

    async def on_completed(job: Job) -> None:
        await asyncio.sleep(0)
        seen.append((job.id, job.result))
        raise RuntimeError("hook bug")  # logged, the worker goes on

    worker = Worker(aq, {"j": lambda job: job.data}, on_completed=on_completed)
    async with running(worker):
        first = await aq.add("j", "a")
        await wait_for(lambda: len(seen) == 1)
        second = await aq.add("j", "b")
        await wait_for(lambda: len(seen) == 2)
    assert seen == [(first, "a"), (second, "b")]


async def test_a_slot_frees_when_the_handler_returns_not_when_its_outcome_is_recorded(
    aq: Queue,
) -> None:
    # concurrency 1, and the first job's on_completed (which runs after its
    # outcome is recorded) waits for the second job's handler: it can only
    # start if the slot was freed when the first handler returned
    second_started = asyncio.Event()
    running_now, most = 0, 0

    async def work(job: Job) -> None:
        nonlocal running_now, most
        running_now += 1
        most = max(most, running_now)
        if job.data == 2:
            second_started.set()
        await asyncio.sleep(0.01)
        running_now -= 1

    async def on_completed(job: Job) -> None:
        if job.data == 1:
            await asyncio.wait_for(second_started.wait(), 5)

    worker = Worker(aq, {"work": work}, concurrency=1, on_completed=on_completed)
    async with running(worker):
        first, second = await aq.add_many([{"name": "work", "data": i} for i in (1, 2)])
        await job_in(aq, second, State.COMPLETED)
        assert (await job_in(aq, first, State.COMPLETED)).state is State.COMPLETED
        assert worker.in_flight <= 2
    assert most == 1  # still never two handlers at once


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_progress_is_visible_while_the_handler_runs(aq: Queue, kind: str) -> None:
    finish = threading.Event()

    async def async_handler(job: Job) -> str:
        await job.set_progress({"step": 1})
        while not finish.is_set():
            await asyncio.sleep(0.01)
        return "ok"

    def sync_handler(job: Job) -> str:
        job.set_progress({"step": 1})
        finish.wait(10)
        return "ok"

    handler = async_handler if kind == "async" else sync_handler
    worker = Worker(aq, {"j": handler})
    async with running(worker):
        job_id = await aq.add("j")

        async def progressed() -> bool:
            job = await aq.get(job_id)
            return job is not None and job.state is State.ACTIVE and job.progress == {"step": 1}

        try:
            await wait_for(progressed)
        finally:
            finish.set()
        done = await job_in(aq, job_id, State.COMPLETED)
    assert done.progress == {"step": 1} and done.result == "ok"


async def test_set_progress_outside_a_worker_is_refused(aq: Queue) -> None:
    await aq.add("j")
    [job] = await aq.claim(1)
    with pytest.raises(Exception, match="only inside a worker"):
        await job.set_progress(1)


# -- waiting for work ----------------------------------------------------------------


async def test_an_idle_worker_wakes_for_a_new_job_at_once(aq: Queue) -> None:
    started: list[float] = []
    # the periodic re-check is 30 s away: only the add's doorbell can wake it sooner
    worker = Worker(
        aq, {"j": lambda job: started.append(time.monotonic())}, maintenance_interval=30.0
    )
    async with running(worker):
        await wait_for(lambda: worker.idle)
        added = time.monotonic()
        await aq.add("j")
        await wait_for(lambda: bool(started), timeout=10)
    latency = started[0] - added
    assert latency < 3.0, f"idle wake took {latency * 1000:.1f} ms"


async def test_a_delayed_job_starts_at_its_fire_time(aq: Queue) -> None:
    claimed: list[datetime] = []  # by the server clock

    def record(job: Job) -> None:
        assert job.claimed_at is not None
        claimed.append(job.claimed_at)

    # the periodic re-check is 30 s away: only the timed wake for the fire time is sooner
    worker = Worker(aq, {"j": record}, maintenance_interval=30.0)
    async with running(worker):
        await wait_for(lambda: worker.idle)
        job_id = await aq.add("j", delay=0.3)
        done = await job_in(aq, job_id, State.COMPLETED)
    assert done.run_at is not None
    late = (claimed[0] - done.run_at).total_seconds()
    assert 0 <= late < 3.0, f"claimed {late * 1000:.1f} ms after its fire time"


async def test_an_idle_worker_starts_a_job_at_once_on_resume(aq: Queue) -> None:
    started: list[float] = []
    # the periodic re-check is 30 s away: only resume's doorbell can wake it sooner
    worker = Worker(
        aq, {"j": lambda job: started.append(time.monotonic())}, maintenance_interval=30.0
    )
    async with running(worker):
        await aq.pause()
        await aq.add("j")  # rings, but the woken worker can claim nothing
        await wait_for(lambda: worker.idle)
        resumed = time.monotonic()
        await aq.resume()  # records "resumed" and rings the doorbell
        await wait_for(lambda: bool(started), timeout=10)
    latency = started[0] - resumed
    assert latency < 1.0, f"resume reached the idle worker after {latency * 1000:.1f} ms"


async def test_a_burst_wakes_every_idle_worker(aq: Queue, backend_url: str) -> None:
    started: set[str] = set()
    release = asyncio.Event()

    async def slow(job: Job) -> None:
        started.add(job.id)
        await release.wait()  # no slot frees until all six started

    queues = [Queue(aq.name, backend_url) for _ in range(3)]
    # the periodic re-check is 30 s away: a worker the burst did not wake stays idle
    workers = [Worker(q, {"slow": slow}, concurrency=2, maintenance_interval=30.0) for q in queues]
    try:
        async with running(workers[0]), running(workers[1]), running(workers[2]):
            await wait_for(lambda: all(w.idle for w in workers))
            await aq.add_many([{"name": "slow"} for _ in range(6)])
            try:
                await wait_for(lambda: len(started) == 6, timeout=10)
                assert [w.in_flight for w in workers] == [2, 2, 2]
            finally:
                release.set()
    finally:
        for q in queues:
            await q.close()


@pytest.mark.no_cluster("INFO commandstats counts one server's calls")
async def test_an_idle_worker_sends_few_commands(aq: Queue, redis_client: redis.Redis) -> None:
    worker = Worker(aq, {"j": lambda job: None})
    async with running(worker):
        await wait_for(lambda: worker.idle)
        before = total_calls(redis_client)
        await asyncio.sleep(2.0)  # the measurement window itself
        after = total_calls(redis_client)
        assert worker.idle
    rate = (after - before - 1) / 2.0  # minus the INFO that read "before"
    assert rate < 20, f"{rate:.1f} commands/s while idle"


def test_worker_options_are_checked() -> None:
    q = Queue("opts", "redis://127.0.0.1:1/0")
    with pytest.raises(InvalidOption, match="concurrency"):
        Worker(q, {"j": print}, concurrency=0)
    with pytest.raises(InvalidOption, match="lease"):
        Worker(q, {"j": print}, lease=-1)
    with pytest.raises(InvalidOption, match="heartbeat"):
        Worker(q, {"j": print}, lease=1, heartbeat=2)
    with pytest.raises(InvalidOption, match="handlers"):
        Worker(q, {})
    with pytest.raises(InvalidOption, match="callable"):
        Worker(q, {"j": 3})  # type: ignore[arg-type]


# -- signals (a real process) ---------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import asyncio, logging, sys
    from echomq import Queue, Worker

    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(message)s")

    async def forever(job):
        print("started", job.id, flush=True)
        await asyncio.sleep(600)

    async def main(url, name, grace):
        queue = Queue(name, url)
        await Worker(queue, {"forever": forever}, grace=grace).run()
        await queue.close()
        print("exited", flush=True)

    asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))
    """
)


class ChildOutput:
    """The child's stdout, line by line, read by a thread (select() would miss lines
    already sitting in the pipe object's buffer)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        self._lines: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._stream = proc.stdout
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self._stream:
            self._lines.put(line)
        self._lines.put("")  # end of output

    def until(self, marker: str, timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        seen: list[str] = []
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                break
            if marker in line:
                return line
            if not line:
                break
            seen.append(line)
        raise AssertionError(f"child never printed {marker!r}; it printed: {''.join(seen)}")


@pytest.mark.parametrize("signals", [1, 2])
async def test_sigterm_stops_a_worker_process(
    aq: Queue, backend_url: str, tmp_path: Path, signals: int
) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    grace = "0.5" if signals == 1 else "60"  # with 60 s grace only a second signal is quick
    job_id = await aq.add("forever")
    with subprocess.Popen(
        [sys.executable, str(script), backend_url, aq.name, grace],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    ) as proc:
        output = ChildOutput(proc)
        try:
            assert job_id in output.until("started")
            proc.send_signal(signal.SIGTERM)
            sent = time.monotonic()
            if signals == 2:
                output.until("send again")
                proc.send_signal(signal.SIGTERM)
            output.until("exited")
            assert proc.wait(5) == 0
            assert time.monotonic() - sent < 3.0
        finally:
            if proc.poll() is None:
                proc.kill()
    back = await aq.get(job_id)
    assert back is not None and back.state is State.WAITING and back.attempts == 0


async def test_a_worker_started_before_its_server_waits_for_it(
    server_factory: ServerFactory, queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    # a server that is down (or a network blip) when the worker starts is a
    # transient error like any later one: the worker waits for the server
    server = server_factory("valkey")
    server.stop()
    done: list[str] = []
    q = Queue(queue_name, server.url)
    worker = Worker(q, {"j": lambda job: done.append(job.id)})
    task = asyncio.create_task(worker.run(install_signals=False))
    try:
        caplog.set_level(logging.WARNING, logger="echomq.worker")
        # the worker's first attempts meet a closed port: it says it retries, or run() ends
        await wait_for(lambda: task.done() or "retrying" in caplog.text, timeout=10)
        assert not task.done(), f"run() ended while the server was down: {task}"
        await asyncio.to_thread(server.start)
        async with Queue(queue_name, server.url) as producer:
            job_id = await producer.add("j")
            await wait_for(lambda: done == [job_id], timeout=20)
    finally:
        worker.stop(immediate=True)
        await asyncio.wait_for(task, 10)
        await q.close()
