"""The workers registry (DESIGN §10 "Workers"): a running worker lists itself in
each queue it serves, with the jobs it runs, refreshed by its heartbeat; it
leaves when it stops and is gone within three heartbeats of its death; each job
names the worker of its latest attempt."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import redis

from echomq import InvalidOption, Job, Queue, State, SyncQueue, Worker
from echomq.registry import info_text
from integration.test_worker import job_in, running, wait_for

pytestmark = pytest.mark.timeout(90)

TESTS_DIR = Path(__file__).resolve().parents[1]


async def test_a_running_worker_lists_itself_with_the_jobs_it_runs(aq: Queue) -> None:
    gate = asyncio.Event()

    async def held(job: Job) -> str:
        await gate.wait()
        return "ok"

    job_id = await aq.add("held")
    worker = Worker(aq, {"held": held}, concurrency=3, lease=3.0, heartbeat=0.2)
    async with running(worker):
        await job_in(aq, job_id, State.ACTIVE)

        async def lists_the_job() -> bool:
            listed = await aq.workers()
            return len(listed) == 1 and listed[0].running == [job_id]

        await wait_for(lists_the_job, timeout=10)
        [info] = await aq.workers()
        assert info.id == worker.id
        assert (info.host, info.pid) == (socket.gethostname(), os.getpid())
        assert info.queues == [aq.name] and info.concurrency == 3
        assert info.started_at <= info.seen_at
        gate.set()
        done = await job_in(aq, job_id, State.COMPLETED)

        async def lists_no_job() -> bool:
            return [w.running for w in await aq.workers()] == [[]]

        await wait_for(lists_no_job, timeout=10)
    assert done.worker == worker.id
    assert done.duration is not None and 0 <= done.duration < 30
    assert done.claimed_at is not None and done.finished_at is not None
    assert await aq.workers() == []  # it stopped: it left at once


async def test_a_worker_of_two_queues_lists_itself_in_each(
    aq: Queue, backend_url: str, queue_name: str
) -> None:
    other = Queue(queue_name + "-2", backend_url)
    try:
        worker = Worker([aq, other], {"x": lambda job: None}, concurrency=2)
        async with running(worker):

            async def in_both() -> bool:
                listed = [[w.id for w in await q.workers()] for q in (aq, other)]
                return listed == [[worker.id], [worker.id]]

            await wait_for(in_both, timeout=10)
            for q in (aq, other):
                [info] = await q.workers()
                assert info.queues == [aq.name, other.name]
    finally:
        await other.close()


WORKER = """
import asyncio, sys
from echomq import Queue, Worker

async def slow(job):
    await asyncio.sleep(60)

asyncio.run(Worker(Queue(sys.argv[1], sys.argv[2]), {"slow": slow}, lease=1.5,
                   heartbeat=float(sys.argv[3])).run())
"""


def test_a_killed_worker_is_gone_within_three_heartbeats(
    sq: SyncQueue, backend_url: str, queue_name: str
) -> None:
    heartbeat = 0.5
    job_id = sq.add("slow")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS_DIR), *sys.path])}
    worker = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(WORKER), queue_name, backend_url, str(heartbeat)],
        env=env,
    )
    try:
        deadline = time.monotonic() + 30
        while [w.running for w in sq.workers()] != [[job_id]]:
            assert time.monotonic() < deadline, "the worker never listed its job"
            time.sleep(0.05)
        [info] = sq.workers()
        assert info.pid == worker.pid
        job = sq.get(job_id)
        assert job is not None and job.worker == info.id
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(10)
        killed = time.monotonic()
        while sq.workers():
            # its entry lives three heartbeats past its last beat, which came
            # before the kill (the poll's own round trips: the 0.5 s margin)
            assert time.monotonic() - killed < 3 * heartbeat + 0.5, "still listed"
            time.sleep(0.02)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)


def test_a_beat_prunes_expired_entries_so_the_registry_stays_bounded(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    info = info_text("host", 1, [sq.name], 1, [])
    for i in range(5):
        sq.worker_beat(f"gone-{i}", 0.3, info)
    assert redis_client.zcard(sq.engine.keys.workers) == 5
    time.sleep(0.6)  # past their ttl (server clock: a bounded wait past it)
    assert sq.workers() == []
    sq.worker_beat("alive", 30.0, info)
    assert redis_client.zrange(sq.engine.keys.workers, 0, -1) == ["alive"]
    assert [w.id for w in sq.workers()] == ["alive"]
    sq.worker_beat("alive", 30.0, None)  # it stops
    assert sq.workers() == [] and not redis_client.exists(sq.engine.keys.worker("alive"))


def test_bad_worker_ids_are_refused(sq: SyncQueue) -> None:
    sq.add("x")
    with pytest.raises(InvalidOption, match="worker id 'a b'"):
        sq.claim(1, worker="a b")
    with pytest.raises(InvalidOption, match="worker id ''"):
        sq.worker_beat("", 10.0, None)
    with pytest.raises(InvalidOption, match="worker ttl"):
        sq.worker_beat("w", 0.0, None)
    assert sq.stats().counts["waiting"] == 1  # nothing was claimed
