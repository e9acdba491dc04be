"""Network faults through the chaos proxy: resets, blackholes, lost replies.

Why: a reply lost after the server ran the command is the hardest case for
a producer. Retrying ``add`` with the same idempotency key must give the
same id (no duplicate job), and workers whose connections die under them
must recover on their own, with nothing lost.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
import redis
import redis.asyncio

from echomq import Queue, State, Worker
from echomq.errors import EchoMQError
from echomq.keys import QueueKeys
from echomq.sync import SyncQueue
from faults import invariants
from faults.figures import record
from faults.procs import Workers, wait_for
from faults.proxy import ChaosProxy, Odds
from servers import PrivateServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

JOBS = 150
ADD_TRIES = 50


async def _add_until_acked(proxy_url: str, queue_name: str) -> tuple[list[str], int]:
    """Add JOBS keyed jobs through the proxy, retrying each until it returns an id."""
    client = redis.asyncio.Redis.from_url(proxy_url, decode_responses=True, socket_timeout=1.0)
    queue = Queue(queue_name, client=client)
    ids, retries = [], 0
    try:
        for i in range(JOBS):
            for _ in range(ADD_TRIES):
                try:
                    ids.append(await queue.add("work", {"sleep": 0.1}, key=f"k-{i}"))
                    break
                except (redis.RedisError, EchoMQError, OSError):
                    retries += 1
            else:
                raise AssertionError(f"add k-{i} failed {ADD_TRIES} times")
    finally:
        await client.aclose()
    return ids, retries


@pytest.mark.parametrize("backend", ["valkey", "redis"], indirect=True)
def test_chaos_proxy_workers_recover_idempotent_adds_nothing_lost(
    backend: PrivateServer, queue_name: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    proxy = ChaosProxy(backend.port, Odds(reset=0.03, blackhole=0.01, drop_reply=0.03), seed=3)
    proxy.start()
    proxy.chaos = False  # the CLI's start-up check fails fast by design: chaos once running
    workers = Workers(proxy.url, queue_name, tmp_path, side_url=backend.url)
    completed = QueueKeys(queue_name).completed
    try:
        procs = [workers.spawn(), workers.spawn()]
        workers.wait_ready(2)
        # chaos once both are serving: idle, blocked on their doorbell wait (the
        # ready record comes before the worker's own Queue first greets the server)
        wait_for(
            lambda: sum(c["cmd"] == "blpop" for c in redis_client.client_list()) >= 2,
            20,
            "both workers waiting for work",
        )
        proxy.chaos = True
        started = time.monotonic()
        ids, retries = asyncio.run(_add_until_acked(proxy.url, queue_name))
        wait_for(lambda: redis_client.zcard(completed) == JOBS, 60, "every job completed")
        elapsed = time.monotonic() - started
        died = [(p.pid, p.returncode) for p in procs if p.poll() is not None]
        assert not died, f"workers died instead of recovering: {died}\n{workers.logs()}"
    finally:
        workers.stop_all()
        proxy.stop()
    with SyncQueue(queue_name, backend.url) as queue:  # the same keys again, directly
        again = [queue.add("work", {"sleep": 0.1}, key=f"k-{i}") for i in range(JOBS)]
    assert again == ids
    report = invariants.check(redis_client, queue_name, ids)
    report.fail_if_any()
    assert sum(proxy.faults.values()) >= 10, f"too little chaos to prove anything: {proxy.faults}"
    print(
        f"\n[{backend.kind} chaos proxy] faults={dict(proxy.faults)} add retries={retries} "
        f"drained {JOBS} jobs in {elapsed:.1f}s, "
        f"duplicate executions={report.duplicate_executions}"
    )
    record(
        "chaos_proxy",
        server=backend.kind,
        jobs=JOBS,
        faults=dict(proxy.faults),
        add_retries=retries,
        drain_seconds=round(elapsed, 2),
        duplicate_executions=report.duplicate_executions,
    )


async def _run_until(worker: Worker, events: list[tuple[str, str]], count: int) -> None:
    """Run ``worker`` until ``count`` hook events arrived (bounded), then stop it."""
    task = asyncio.create_task(worker.run(install_signals=False))
    deadline = time.monotonic() + 15
    while len(events) < count and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    worker.stop(immediate=True)
    await task


@pytest.mark.parametrize("backend", ["valkey"], indirect=True)
async def test_lost_reply_to_a_completion_is_still_reported_completed(
    backend: PrivateServer, queue_name: str
) -> None:
    proxy = ChaosProxy(backend.port)
    proxy.chaos = False
    proxy.start()
    events: list[tuple[str, str]] = []
    direct = Queue(queue_name, backend.url)
    queue = Queue(queue_name, proxy.url)
    try:
        worker = Worker(
            queue,
            {"work": lambda job: "LOSE-MY-REPLY" if job.data == "mark" else "ok"},
            lease=5.0,
            on_completed=lambda job: events.append(("completed", job.id)),
            on_stalled=lambda job: events.append(("stalled", job.id)),
        )
        await direct.add("work", "warm-up")  # its completion loads the scripts first
        await _run_until(worker, events, 1)
        proxy.drop_reply_to = b"LOSE-MY-REPLY"
        job_id = await direct.add("work", "mark")
        await _run_until(worker, events, 2)
        job = await direct.get(job_id)
    finally:
        await queue.close()
        await direct.close()
        proxy.stop()
    assert proxy.faults["drop_reply"] == 1
    assert job is not None and job.state is State.COMPLETED and job.attempts == 1
    assert events[1] == ("completed", job_id)
