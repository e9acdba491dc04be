"""Worker faults: ``kill -9`` at chosen and random points, SIGSTOP past the lease.

Promise under test (DESIGN §4): delivery is at-least-once, completion is
recorded once and only from the lease holder. Worker processes are real
``echomq worker`` subprocesses with 1 s leases so redelivery is fast.
"""

from __future__ import annotations

import random
import signal
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from echomq.job import Job
from echomq.keys import QueueKeys
from echomq.sync import SyncQueue
from faults import invariants
from faults.figures import record
from faults.procs import Workers, wait_for
from servers import PrivateServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

KILL_POINTS = ("start", "middle", "end")


def _completed(client: redis.Redis, queue: str) -> int:
    return int(client.zcard(QueueKeys(queue).completed))


@dataclass(frozen=True)
class Redelivery:
    """A job's first two recorded runs, by the server clock (ms)."""

    job_id: str
    first_claim: int
    first_deadline: int  # the deadline the first claim gave (heartbeats only move it later)
    second_claim: int

    @property
    def seconds(self) -> float:
        """From the first claim to the second."""
        return (self.second_claim - self.first_claim) / 1000


def _redeliveries(records: list[dict[str, Any]]) -> list[Redelivery]:
    """Every job recorded running twice or more: its first two runs' claims."""
    first: dict[str, dict[str, Any]] = {}
    out: list[Redelivery] = []
    for rec in records:
        job_id = str(rec["id"])
        if job_id not in first:
            first[job_id] = rec
        elif first[job_id]["ca"] != rec["ca"] and not any(r.job_id == job_id for r in out):
            one = first[job_id]
            out.append(Redelivery(job_id, int(one["ca"]), int(one["l"]), int(rec["ca"])))
    return out


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
    backend: PrivateServer,
    backend_url: str,
    queue_name: str,
    redis_client: redis.Redis,
    tmp_path: Path,
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
    again = _redeliveries(records)
    assert again, "no job was recorded running twice: nothing was redelivered"
    early = [r for r in again if r.second_claim < r.first_deadline]
    assert early == [], f"claimed again before the first lease's deadline: {early[:3]}"
    gaps = sorted(r.seconds for r in again)
    print(
        f"\n[kill -9 workers] jobs={len(ids)} random kills={kills} "
        f"self-kills={3 * len(KILL_POINTS)} duplicate executions={report.duplicate_executions} "
        f"redelivery after crash: max {gaps[-1]:.2f}s median {statistics.median(gaps):.2f}s"
    )
    record(
        "worker_kill9",
        server=backend.kind,
        jobs=len(ids),
        random_kills=kills,
        self_kills=3 * len(KILL_POINTS),
        lease_seconds=1.0,
        redeliveries=len(gaps),
        redelivery_seconds_min=round(gaps[0], 3),
        redelivery_seconds_median=round(statistics.median(gaps), 3),
        redelivery_seconds_max=round(gaps[-1], 3),
        duplicate_executions=report.duplicate_executions,
    )


def _run_record(client: redis.Redis, queue: str, pid: int, key_suffix: str = "") -> bool:
    records = client.lrange(invariants.side_key(queue) + key_suffix, 0, -1)
    return any(f'"pid": {pid}' in rec for rec in records)


@pytest.mark.parametrize("backend", ["valkey", "redis"], indirect=True)
def test_sigstop_worker_past_lease_late_heartbeat_and_ack_refused(
    backend: PrivateServer,
    backend_url: str,
    queue_name: str,
    redis_client: redis.Redis,
    tmp_path: Path,
) -> None:
    workers = Workers(backend_url, queue_name, tmp_path, env={"FAULT_CONCURRENCY": "1"})
    try:
        frozen = workers.spawn()
        with SyncQueue(queue_name, backend_url) as queue:
            job_id = queue.add("work", {"sleep": 2.0})
        wait_for(lambda: _run_record(redis_client, queue_name, frozen.pid), 15, "first start")
        workers.signal(frozen, signal.SIGSTOP)
        # the frozen worker's lease as the server has it now; a heartbeat still in
        # flight could only move it later
        frozen_deadline = int(redis_client.hget(QueueKeys(queue_name).job(job_id), "l") or 0)
        other = workers.spawn()
        wait_for(
            lambda: _completed(redis_client, queue_name) == 1, 20, "completion by the other worker"
        )
        workers.signal(frozen, signal.SIGCONT)
        resumed = time.monotonic()
        # the thawed worker's next heartbeat (or its ack) is refused: on_stalled fires there
        wait_for(
            lambda: _run_record(redis_client, queue_name, frozen.pid, ":stalled"),
            15,
            "the thawed worker to learn it lost the lease",
        )
        refused_after = time.monotonic() - resumed
        # a graceful stop of the thawed worker: once it has exited, anything it
        # would send (a late ack) has been sent
        frozen.terminate()
        frozen.wait(20)
        with SyncQueue(queue_name, backend_url) as queue:
            job = queue.get(job_id)
        assert job is not None and job.result == {"pid": other.pid}
    finally:
        workers.stop_all()
    report = invariants.check(redis_client, queue_name, [job_id])
    report.fail_if_any()
    assert report.executions[job_id] == 2
    runs = {int(r["pid"]): r for r in invariants.executions(redis_client, queue_name)}
    # by the server clock, the other worker claimed the job only once the frozen
    # worker's lease had run out
    assert frozen_deadline > 0 and runs[other.pid]["ca"] >= frozen_deadline
    assert runs[other.pid]["ca"] >= runs[frozen.pid]["l"]
    record(
        "worker_sigstop",
        server=backend.kind,
        lease_seconds=1.0,
        reclaimed_after_first_claim=(runs[other.pid]["ca"] - runs[frozen.pid]["ca"]) / 1000,
        refused_after_resume=round(refused_after, 3),
    )
