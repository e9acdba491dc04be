"""Worker faults: ``kill -9`` at chosen and random points, SIGSTOP past the lease.

Promise under test (DESIGN §4): delivery is at-least-once, completion is
recorded once and only from the lease holder. Worker processes are real
``echomq worker`` subprocesses with 1 s leases so redelivery is fast.
"""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from echomq.job import Job
from echomq.keys import QueueKeys
from echomq.sync import SyncQueue
from faults import invariants
from faults.procs import Workers, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

KILL_POINTS = ("start", "middle", "end")


def _completed(client: redis.Redis, queue: str) -> int:
    return int(client.zcard(QueueKeys(queue).completed))


def _redelivery_gaps(records: list[dict[str, object]]) -> list[float]:
    """Seconds between a job's first and second execution start (server clock)."""
    first: dict[str, int] = {}
    gaps = []
    for rec in records:
        job_id, t = str(rec["id"]), int(str(rec["t"]))
        if job_id in first:
            gaps.append((t - first.pop(job_id)) / 1000)
            first[job_id] = 10**18  # count only the first redelivery
        else:
            first[job_id] = t
    return [g for g in gaps if g >= 0]


def _assert_redelivered(job_id: str, job: Job | None, records: list[dict[str, Any]]) -> None:
    """A kill job's first attempt died with its worker: a later attempt, after the
    lease ran out, is the one that completed it.

    The first attempt's start record may be missing: its worker can die between
    the claim and the handler's record (a sibling job's self-kill in the same
    batch, or a random kill), so the redelivery is proven from the server (the
    lease expired, the job was claimed again) and the recorded runs must end on
    an attempt after the first.
    """
    assert job is not None, f"{job_id} is gone"
    runs = sorted(int(r["a"]) for r in records if r["id"] == job_id)
    assert job.stalls >= 1 and job.attempts >= 2, f"{job_id} was not redelivered: {job}"
    assert runs and runs[-1] >= 2, f"{job_id} completed on its first attempt: runs {runs}"


def _chaos(workers: Workers, client: redis.Redis, queue: str, total: int, kills: int) -> int:
    """Kill -9 a random worker every 0.3–0.8 s (``kills`` times), keep three alive."""
    rng = random.Random()
    done = 0
    deadline = time.monotonic() + 60
    while _completed(client, queue) < total and time.monotonic() < deadline:
        for _ in range(3 - len(workers.alive())):
            workers.spawn()
        time.sleep(rng.uniform(0.3, 0.8))
        alive = workers.alive()
        if done < kills and alive:
            workers.kill9(rng.choice(alive))
            done += 1
    return done


@pytest.mark.parametrize("backend", ["valkey", "redis"], indirect=True)
def test_kill9_workers_every_job_completes_once(
    backend_url: str, queue_name: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    rng = random.Random(7)
    with SyncQueue(queue_name, backend_url) as queue:
        # three jobs per kill point die with their worker on the first attempt
        ids = [
            queue.add("work", {"kill": point, "sleep": 0.3})
            for point in KILL_POINTS
            for _ in range(3)
        ]
        ids += [queue.add("work", {"sleep": rng.uniform(0.05, 0.4)}) for _ in range(51)]
    workers = Workers(backend_url, queue_name, tmp_path)
    try:
        kills = _chaos(workers, redis_client, queue_name, len(ids), kills=6)
        wait_for(
            lambda: _completed(redis_client, queue_name) == len(ids), 30, "every job completed"
        )
    finally:
        workers.stop_all()
    report = invariants.check(redis_client, queue_name, ids)
    report.fail_if_any()
    records = invariants.executions(redis_client, queue_name)
    with SyncQueue(queue_name, backend_url) as queue:
        for job_id in ids[: 3 * len(KILL_POINTS)]:
            _assert_redelivered(job_id, queue.get(job_id), records)
    gaps = _redelivery_gaps(records)
    assert min(gaps) > 0.9, "a job was redelivered before its 1 s lease ran out"
    print(
        f"\n[kill -9 workers] jobs={len(ids)} random kills={kills} "
        f"self-kills={3 * len(KILL_POINTS)} duplicate executions={report.duplicate_executions} "
        f"redelivery after crash: max {max(gaps):.2f}s median {sorted(gaps)[len(gaps) // 2]:.2f}s"
    )


def _run_record(client: redis.Redis, queue: str, pid: int, key_suffix: str = "") -> bool:
    records = client.lrange(invariants.side_key(queue) + key_suffix, 0, -1)
    return any(f'"pid": {pid}' in rec for rec in records)


@pytest.mark.parametrize("backend", ["valkey", "redis"], indirect=True)
def test_sigstop_worker_past_lease_late_heartbeat_and_ack_refused(
    backend_url: str, queue_name: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    workers = Workers(backend_url, queue_name, tmp_path, env={"FAULT_CONCURRENCY": "1"})
    try:
        frozen = workers.spawn()
        with SyncQueue(queue_name, backend_url) as queue:
            job_id = queue.add("work", {"sleep": 2.0})
        wait_for(lambda: _run_record(redis_client, queue_name, frozen.pid), 15, "first start")
        workers.signal(frozen, signal.SIGSTOP)
        stopped_at = time.monotonic()
        other = workers.spawn()
        wait_for(
            lambda: _completed(redis_client, queue_name) == 1, 20, "completion by the other worker"
        )
        assert time.monotonic() - stopped_at > 1.0  # only after the 1 s lease ran out
        workers.signal(frozen, signal.SIGCONT)
        # the thawed worker's next heartbeat (or its ack) is refused: on_stalled fires there
        wait_for(
            lambda: _run_record(redis_client, queue_name, frozen.pid, ":stalled"),
            15,
            "the thawed worker to learn it lost the lease",
        )
        time.sleep(2.5)  # give a late ack every chance to (wrongly) land
        with SyncQueue(queue_name, backend_url) as queue:
            job = queue.get(job_id)
        assert job is not None and job.result == {"pid": other.pid}
    finally:
        workers.stop_all()
    report = invariants.check(redis_client, queue_name, [job_id])
    report.fail_if_any()
    assert report.executions[job_id] == 2
