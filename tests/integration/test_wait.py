"""wait(): woken by the server when a job is final (DESIGN §8 "Results and events")."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from redis.cluster import RedisCluster

from clock import wait_past
from commandstats import SCRIPT_COMMANDS
from echomq import (
    EchoMQError,
    JobNotFound,
    Queue,
    State,
    SyncQueue,
    WaitTimeout,
    Worker,
    ids,
)
from echomq.flows.waiters import MAX_WATCHING
from echomq.keys import QueueKeys

#: how long a test waits for a condition it polls before it fails.
DEADLINE = 10.0


async def until(check: Callable[[], bool], what: str) -> None:
    """Poll ``check`` (a cheap read) until it holds; fail after DEADLINE seconds."""
    end = time.monotonic() + DEADLINE
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def registered(redis_client: Any, queue_name: str, count: int = 1) -> Callable[[], bool]:
    waiters = QueueKeys(queue_name).waiters
    return lambda: int(redis_client.zcard(waiters)) >= count


async def test_wait_returns_the_result_of_a_job_another_client_completes(
    aq: Queue, backend_url: str, queue_name: str, redis_client: Any
) -> None:
    job_id = await aq.add("square", 7)
    waiting = asyncio.create_task(aq.wait(job_id, timeout=DEADLINE))
    await until(registered(redis_client, queue_name), "the wait to register")
    assert not waiting.done()
    async with Queue(queue_name, backend_url) as worker:
        [job] = await worker.claim()
        await worker.complete(job, {"square": 49})
    done = await waiting
    assert done.id == job_id and done.state is State.COMPLETED and done.result == {"square": 49}


async def test_wait_returns_at_once_for_a_finished_job(aq: Queue) -> None:
    job_id = await aq.add("x", 1)
    [job] = await aq.claim()
    await aq.complete(job, "ok")
    # timeout 0: no time to wait at all, and the job is final already
    done = await aq.wait(job_id, timeout=0)
    assert done.state is State.COMPLETED and done.result == "ok"


async def test_wait_returns_a_dead_job(
    aq: Queue, queue_name: str, redis_client: Any, backend_url: str
) -> None:
    job_id = await aq.add("x", max_attempts=1)
    waiting = asyncio.create_task(aq.wait(job_id, timeout=DEADLINE))
    await until(registered(redis_client, queue_name), "the wait to register")
    [job] = await aq.claim()
    assert await aq.fail(job, "it broke") is State.DEAD
    dead = await waiting
    assert dead.state is State.DEAD and dead.error == "it broke"
    # a dead job answers at once
    again = await aq.wait(job_id, timeout=0)
    assert again.state is State.DEAD


async def test_wait_times_out_with_a_timeout_error(aq: Queue) -> None:
    job_id = await aq.add("never-run")
    started = time.monotonic()
    with pytest.raises(WaitTimeout) as err:
        await aq.wait(job_id, timeout=0.3)
    assert time.monotonic() - started >= 0.3
    assert isinstance(err.value, TimeoutError) and isinstance(err.value, EchoMQError)
    assert job_id in str(err.value)


async def test_wait_for_an_unknown_or_removed_job_raises_job_not_found(
    aq: Queue, queue_name: str, redis_client: Any
) -> None:
    with pytest.raises(JobNotFound):
        await aq.wait(ids.new_id(), timeout=1)
    job_id = await aq.add("x")
    waiting = asyncio.create_task(aq.wait(job_id, timeout=DEADLINE))
    await until(registered(redis_client, queue_name), "the wait to register")
    assert await aq.remove(job_id)
    with pytest.raises(JobNotFound):
        await waiting


async def test_bad_wait_input_is_refused(aq: Queue) -> None:
    with pytest.raises(EchoMQError):
        await aq.wait("not-an-id", timeout=1)
    job_id = await aq.add("x")
    for bad in (-1, float("nan"), "1", 86_401):
        with pytest.raises(EchoMQError):
            await aq.wait(job_id, timeout=bad)  # type: ignore[arg-type]


async def test_a_waited_job_survives_retention_zero_until_its_waiter_reads_it(
    aq: Queue, backend_url: str, queue_name: str, redis_client: Any
) -> None:
    await aq.configure(keep_completed=0)
    # without a waiter, retention 0 deletes a job as it completes
    plain = await aq.add("plain")
    [job] = await aq.claim()
    await aq.complete(job, 1)
    assert await aq.get(plain) is None
    job_id = await aq.add("waited")
    waiting = asyncio.create_task(aq.wait(job_id, timeout=DEADLINE))
    await until(registered(redis_client, queue_name), "the wait to register")
    async with Queue(queue_name, backend_url, keep_completed=5) as worker:
        [job] = await worker.claim()
        await worker.complete(job, {"kept": True})
    done = await waiting
    assert done.result == {"kept": True}


async def test_many_concurrent_waits_share_a_bounded_number_of_connections(
    aq: Queue, queue_name: str, redis_client: Any
) -> None:
    job_ids = await aq.add_many([{"name": "w", "data": i} for i in range(250)])
    single = not isinstance(redis_client, RedisCluster)  # CLIENT LIST of one server
    before = len(redis_client.client_list()) if single else 0
    waits = [asyncio.create_task(aq.wait(job_id, timeout=30)) for job_id in job_ids]
    await until(registered(redis_client, queue_name, len(job_ids)), "every wait to register")
    if single:
        during = len(redis_client.client_list())
        # one subscription plus at most MAX_WATCHING register calls at once
        assert during - before <= MAX_WATCHING + 2, (before, during)
    assert aq._waits.connections() == 1
    jobs = await aq.claim(len(job_ids))
    await aq.complete_many([(job, job.data * 2) for job in jobs])
    done = await asyncio.gather(*waits)
    assert sorted(job.result for job in done) == [i * 2 for i in range(250)]


def _calls(client: Any) -> tuple[int, int]:
    """(script calls, every command) the server has run so far (INFO commandstats,
    INFO itself excluded; commands a script runs count too)."""
    stats = client.info("commandstats")
    scripts = sum(stats.get(f"cmdstat_{c}", {}).get("calls", 0) for c in SCRIPT_COMMANDS)
    total = sum(v["calls"] for k, v in stats.items() if not k.startswith("cmdstat_info"))
    return scripts, total


@pytest.mark.no_cluster("INFO commandstats counts one server's calls")
def test_a_wait_makes_the_same_few_calls_however_long_it_lasts(
    backend_url: str, queue_name: str, redis_client: Any
) -> None:
    """Fails if wait polls: a 4 s wait must cost no more calls than a 0.5 s wait."""
    setup = SyncQueue(queue_name, backend_url)
    job_id = setup.add("never-run")

    def calls_of_a_wait(seconds: float) -> tuple[int, int]:
        async def one() -> None:
            async with Queue(queue_name, backend_url) as q:
                with pytest.raises(WaitTimeout):
                    await q.wait(job_id, timeout=seconds)

        scripts, total = _calls(redis_client)
        asyncio.run(one())
        after = _calls(redis_client)
        return after[0] - scripts, after[1] - total

    short, long = calls_of_a_wait(0.5), calls_of_a_wait(4.0)
    setup.close()
    assert long[0] == 1, long  # one register call, no re-reads while nothing happens
    # the rest is connecting and subscribing (and pruning the short wait's entry)
    assert long[1] <= short[1] + 2, (short, long)


def test_a_queue_waits_from_successive_event_loops(
    backend_url: str, queue_name: str, redis_client: Any
) -> None:
    q = Queue(queue_name, backend_url)

    async def add_and_wait(n: int) -> Any:
        job_id = await q.add("x", n)
        waiting = asyncio.create_task(q.wait(job_id, timeout=DEADLINE))
        await until(registered(redis_client, queue_name), "the wait to register")
        [job] = await q.claim()
        await q.complete(job, n + 100)
        return (await waiting).result

    assert asyncio.run(add_and_wait(1)) == 101
    assert asyncio.run(add_and_wait(2)) == 102
    asyncio.run(q.close())


def test_sync_queue_wait(sq: SyncQueue, queue_name: str, redis_client: Any) -> None:
    job_id = sq.add("x", 5)

    def finish() -> None:
        end = time.monotonic() + DEADLINE
        while not registered(redis_client, queue_name)() and time.monotonic() < end:
            time.sleep(0.01)
        [job] = sq.claim(1)
        sq.complete(job, 6)

    worker = threading.Thread(target=finish)
    worker.start()
    try:
        done = sq.wait(job_id, timeout=DEADLINE)
    finally:
        worker.join()
    assert done.result == 6 and done.state is State.COMPLETED
    assert sq.wait(job_id, timeout=0).result == 6
    with pytest.raises(WaitTimeout):
        sq.wait(sq.add("never-run"), timeout=0.3)
    with pytest.raises(JobNotFound):
        sq.wait(ids.new_id(), timeout=0.3)


def test_threads_waiting_on_one_sync_queue_share_its_subscription(
    make_sync: Callable[..., SyncQueue], queue_name: str, redis_client: Any
) -> None:
    sq, other = make_sync(), make_sync()
    job_ids = sq.add_many([{"name": "w", "data": i} for i in range(60)])
    single = not isinstance(redis_client, RedisCluster)  # CLIENT LIST of one server
    before = len(redis_client.client_list()) if single else 0
    results: dict[str, Any] = {}

    def wait_one(job_id: str) -> None:
        results[job_id] = sq.wait(job_id, timeout=DEADLINE).result

    threads = [threading.Thread(target=wait_one, args=(job_id,)) for job_id in job_ids]
    for thread in threads:
        thread.start()
    try:
        asyncio.run(until(registered(redis_client, queue_name, 60), "every wait to register"))
        if single:
            during = len(redis_client.client_list())
            assert during - before <= MAX_WATCHING + 2, (before, during)
        assert sq._waits.connections() == 1
        jobs = other.claim(60)
        other.complete_many([(job, job.data + 1) for job in jobs])
    finally:
        for thread in threads:
            thread.join(DEADLINE)
    assert sorted(results.values()) == list(range(1, 61))


def test_expired_wait_entries_are_pruned(sq: SyncQueue, queue_name: str, redis_client: Any) -> None:
    waiters = QueueKeys(queue_name).waiters
    job_ids = sq.add_many([{"name": "w"} for _ in range(30)])
    for job_id in job_ids:
        with pytest.raises(WaitTimeout):
            sq.wait(job_id, timeout=0.001)
    assert 0 < int(redis_client.zcard(waiters)) <= 30
    entries = redis_client.zrange(waiters, 0, -1, withscores=True)
    deadline = max(float(score) for _, score in entries)
    wait_past(redis_client, deadline)
    sq.maintain()
    assert int(redis_client.zcard(waiters)) == 0


async def test_wait_wakes_on_a_stall_past_max_stalls_and_on_cancel(
    aq: Queue, queue_name: str, redis_client: Any
) -> None:
    await aq.configure(max_stalls=0, keep_dead=0)
    stalled, running = await aq.add("stalls"), await aq.add("cancelled")
    waits = [asyncio.create_task(aq.wait(i, timeout=DEADLINE)) for i in (stalled, running)]
    await until(registered(redis_client, queue_name, 2), "both waits to register")
    [first] = await aq.claim(1, lease=0.05)
    [second] = await aq.claim(1, lease=30.0)
    assert first.id == stalled and second.id == running and first.lease_deadline is not None
    wait_past(redis_client, first.lease_deadline)
    await aq.maintain()  # the expired lease is its first stall: past max_stalls 0, dead
    assert await aq.cancel(running)  # a running job cancelled: dead
    dead_stalled, dead_cancelled = await asyncio.gather(*waits)
    # keep_dead=0, yet each waiter read its job
    assert dead_stalled.state is State.DEAD and "stalled" in str(dead_stalled.error)
    assert dead_cancelled.state is State.DEAD and "Cancelled" in str(dead_cancelled.error)


async def test_wait_on_a_blocked_job_wakes_when_its_dependency_dies(
    aq: Queue, queue_name: str, redis_client: Any
) -> None:
    """A blocked dependent that dies because its dependency died (and its own
    dependent, dead in turn) wakes its waiters, well before their timeout."""
    await aq.configure(keep_dead=0)
    dependency = await aq.add("extract", max_attempts=1)
    dependent = await aq.add("merge", depends_on=[dependency])
    chained = await aq.add("report", depends_on=[dependent])
    waits = [asyncio.create_task(aq.wait(i, timeout=DEADLINE)) for i in (dependent, chained)]
    await until(registered(redis_client, queue_name, 2), "both waits to register")
    [job] = await aq.claim()
    assert await aq.fail(job, "source down") is State.DEAD
    # maintenance sends the blocked dependents to dead, a link of the chain per
    # call, and runs again while some are left (as a worker does; lifecycle.md)
    for _ in range(10):
        if not (left := (await aq.maintain()).releasing):
            break
    assert not left
    _, pending = await asyncio.wait(waits, timeout=DEADLINE / 2)
    for task in pending:
        task.cancel()
    assert not pending, "a wait on a dependent killed by its dependency was not woken"
    merge, report = (task.result() for task in waits)
    # keep_dead=0, yet each waiter read its job
    assert merge.state is State.DEAD and dependency in str(merge.error)
    assert report.state is State.DEAD and dependent in str(report.error)


async def test_a_worker_wakes_the_wait_on_a_dependent_its_failing_dependency_kills(
    aq: Queue, backend_url: str, queue_name: str, redis_client: Any
) -> None:
    """The same through a running worker, whose periodic maintenance is 30 s away:
    the dying script rings the doorbell, the worker's maintenance kills the
    dependents at once, and their waits return within seconds."""
    dependency = await aq.add("extract", max_attempts=1)
    dependent = await aq.add("merge", depends_on=[dependency])
    waiting = asyncio.create_task(aq.wait(dependent, timeout=DEADLINE))
    await until(registered(redis_client, queue_name), "the wait to register")

    def extract(job: Any) -> None:
        raise RuntimeError("source down")

    async with Queue(queue_name, backend_url) as own:
        worker = Worker(own, {"extract": extract}, lease=30.0, maintenance_interval=30.0)
        task = asyncio.create_task(worker.run(install_signals=False))
        try:
            started = time.monotonic()
            merge = await asyncio.wait_for(waiting, DEADLINE)
            took = time.monotonic() - started
        finally:
            worker.stop(immediate=True)
            await asyncio.wait_for(task, DEADLINE)
    assert merge.state is State.DEAD and dependency in str(merge.error)
    assert took < 3.0, took
