"""Server faults: ``kill -9`` and restart under an add load, SIGSTOP past the lease.

Why: an id returned by ``add`` is a promise the job exists. With
``appendonly yes`` + ``appendfsync always`` it must survive a server crash in
exactly one state; the other persistence settings are measured, not asserted,
and the figures go to docs/delivery.md (tests/faults/figures.py; the number
of kill cycles is ECHOMQ_FAULT_KILLS, default 3). A paused server must cost time only:
workers reconnect by themselves and nothing is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from pathlib import Path

import pytest
import redis

from echomq import Queue
from echomq.errors import EchoMQError
from echomq.keys import QueueKeys
from echomq.sync import SyncQueue
from faults import invariants
from faults.figures import KILLS_ENV, env_int, record
from faults.procs import Workers, wait_for
from servers import PrivateServer, ServerFactory

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

PERSISTENCE: Mapping[str, Mapping[str, str]] = {
    "always": {"appendonly": "yes", "appendfsync": "always"},
    "everysec": {"appendonly": "yes", "appendfsync": "everysec"},
    "none": {"appendonly": "no", "save": ""},
}
CYCLES = env_int(KILLS_ENV, 3, high=50)
LOAD_SECONDS = 0.7
PAUSE_SECONDS = 2.0


async def _steady_adds(queue: Queue, acked: list[str], stop: asyncio.Event) -> None:
    """Add jobs back to back; keep only the ids whose add returned."""
    while not stop.is_set():
        try:
            acked.append(await queue.add("work", {"n": len(acked)}))
        except (redis.RedisError, EchoMQError, OSError):
            await asyncio.sleep(0.01)


def _existing(client: redis.Redis, queue: str, ids: list[str]) -> set[str]:
    keys = QueueKeys(queue)
    with client.pipeline(transaction=False) as pipe:
        for job_id in ids:
            pipe.exists(keys.job(job_id))
        found = pipe.execute()
    return {job_id for job_id, n in zip(ids, found, strict=True) if n}


async def _kill_cycles(
    server: PrivateServer, queue_name: str
) -> tuple[list[str], list[int], list[float]]:
    """CYCLES × (steady adds, kill -9 mid-load, restart); ids acked, lost per cycle, and
    the seconds each restart took until the server answered (the AOF replayed)."""
    acked: list[str] = []
    lost_per_cycle: list[int] = []
    restarts: list[float] = []
    queue = Queue(queue_name, server.url)
    try:
        for _ in range(CYCLES):
            before = len(acked)
            stop = asyncio.Event()
            load = asyncio.create_task(_steady_adds(queue, acked, stop))
            await asyncio.sleep(LOAD_SECONDS)
            await asyncio.to_thread(server.kill)
            stop.set()
            await load
            started = time.monotonic()
            await asyncio.to_thread(server.start)
            restarts.append(time.monotonic() - started)
            with server.client() as client:
                cycle = acked[before:]
                lost_per_cycle.append(len(cycle) - len(_existing(client, queue_name, cycle)))
    finally:
        with contextlib.suppress(redis.RedisError, EchoMQError, OSError):
            await queue.close()
    return acked, lost_per_cycle, restarts


def _record_kills(
    kind: str, setting: str, acked: list[str], lost: list[int], restarts: list[float]
) -> None:
    record(
        "server_kill9",
        server=kind,
        setting=setting,
        kills=CYCLES,
        load_seconds=LOAD_SECONDS,
        acked=len(acked),
        lost=sum(lost),
        lost_per_kill=lost,
        restart_seconds_max=round(max(restarts), 3),
    )


@pytest.mark.parametrize("kind", ["valkey", "redis"])
async def test_kill9_server_with_fsync_always_loses_no_acknowledged_add(
    server_factory: ServerFactory, queue_name: str, kind: str
) -> None:
    server = server_factory(kind, PERSISTENCE["always"])
    acked, lost, restarts = await _kill_cycles(server, queue_name)
    print(f"\n[{kind} appendfsync always] acked adds={len(acked)} lost per kill={lost}")
    _record_kills(kind, "always", acked, lost, restarts)
    assert len(acked) > 100 * CYCLES
    with server.client() as client:
        report = invariants.check(
            client,
            queue_name,
            acked,
            expect=("waiting",),
            count_executions=False,
            fresh_queue=False,
        )
        added_total = int(client.hget(QueueKeys(queue_name).meta, "added") or 0)
    report.fail_if_any()
    assert lost == [0] * CYCLES
    # an add in flight at the kill may have been applied without its reply: never fewer
    assert len(acked) <= added_total <= len(acked) + CYCLES


@pytest.mark.parametrize("setting", ["everysec", "none"])
@pytest.mark.parametrize("kind", ["valkey", "redis"])
async def test_kill9_server_measure_what_weaker_persistence_loses(
    server_factory: ServerFactory, queue_name: str, kind: str, setting: str
) -> None:
    server = server_factory(kind, PERSISTENCE[setting])
    acked, lost, restarts = await _kill_cycles(server, queue_name)
    print(f"\n[{kind} {setting}] acked adds={len(acked)} lost per kill={lost}")
    _record_kills(kind, setting, acked, lost, restarts)
    with server.client() as client:
        survivors = sorted(_existing(client, queue_name, acked))
        report = invariants.check(
            client,
            queue_name,
            survivors,
            expect=("waiting",),
            count_executions=False,
            fresh_queue=False,
        )
    report.fail_if_any()  # whatever survived is consistent
    if setting == "none":
        assert survivors == []  # no persistence: a crash loses every job


@pytest.mark.parametrize("kind", ["valkey", "redis"])
def test_sigstop_server_twice_the_lease_nothing_lost_workers_resume(
    server_factory: ServerFactory, queue_name: str, kind: str, tmp_path: Path
) -> None:
    server = server_factory(kind, None)
    with SyncQueue(queue_name, server.url) as queue:
        ids = [queue.add("work", {"sleep": 0.25}) for _ in range(80)]
    workers = Workers(server.url, queue_name, tmp_path)
    completed = QueueKeys(queue_name).completed
    with server.client(socket_timeout=15) as client:
        try:
            procs = [workers.spawn(), workers.spawn()]
            wait_for(lambda: client.zcard(completed) >= 10, 20, "workers under way")
            server.pause()
            time.sleep(PAUSE_SECONDS)  # the fault itself: twice the 1 s lease
            server.resume()
            resumed = time.monotonic()
            done_at_pause = int(client.zcard(completed))
            wait_for(lambda: client.zcard(completed) > done_at_pause, 30, "first completion")
            recovery = time.monotonic() - resumed
            wait_for(lambda: client.zcard(completed) == len(ids), 45, "every job completed")
            assert all(p.poll() is None for p in procs), "a worker died instead of recovering"
        finally:
            workers.stop_all()
        report = invariants.check(client, queue_name, ids)
    report.fail_if_any()
    print(
        f"\n[{kind} SIGSTOP 2 s] first completion {recovery:.2f}s after resume, "
        f"duplicate executions={report.duplicate_executions}"
    )
    record(
        "server_sigstop",
        server=kind,
        pause_seconds=PAUSE_SECONDS,
        lease_seconds=1.0,
        jobs=len(ids),
        first_completion_after_resume=round(recovery, 3),
        duplicate_executions=report.duplicate_executions,
    )
