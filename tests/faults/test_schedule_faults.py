"""Schedules under faults: two worker processes race on the same schedules across
a ``kill -9`` of one of them and a ``kill -9`` + restart of the server (AOF with
``appendfsync always``); each fire time still yields exactly one job.

Why: a fire is a compare-and-set on the stored next fire time (fireSchedules.lua),
and with fsync always a fire acknowledged before the crash is on disk, so no
firer can see the same fire time due again after the restart.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from echomq.job import Job
from echomq.sync import SyncQueue
from faults.procs import Workers, wait_for
from faults.test_server_crash import PERSISTENCE
from servers import ServerFactory

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

EVERY = 0.5  # seconds between fire times
STATES = ("waiting", "active", "completed", "failed", "dead")


def scheduled(queue: SyncQueue) -> list[Job]:
    """Every job the schedules added, in any state."""
    out: list[Job] = []
    for state in STATES:
        out += [j for j in queue.jobs(state, count=10_000) if j.schedule_id]
    return out


@pytest.mark.parametrize("kind", ["valkey", "redis"])
def test_each_fire_time_once_across_worker_and_server_kills(
    server_factory: ServerFactory, queue_name: str, kind: str, tmp_path: Path
) -> None:
    server = server_factory(kind, PERSISTENCE["always"])
    workers = Workers(server.url, queue_name, tmp_path)
    firsts = {}
    with SyncQueue(queue_name, server.url) as queue:
        for sid in ("a", "b"):
            nxt = queue.schedule(sid, every=EVERY, name="work", data={})
            assert nxt is not None
            firsts[sid] = round(nxt.timestamp() * 1000)
    try:
        victim, _ = workers.spawn(), workers.spawn()
        workers.wait_ready(2)

        def fired_at_least(n: int) -> bool:
            with SyncQueue(queue_name, server.url) as q:
                return len(scheduled(q)) >= n

        wait_for(lambda: fired_at_least(8), 30, "fires before the worker kill")
        workers.kill9(victim)
        wait_for(lambda: fired_at_least(16), 30, "fires with one worker left")
        server.kill()
        time.sleep(2 * EVERY)  # the fault itself: fire times pass while the server is down
        server.start()
        with SyncQueue(queue_name, server.url) as q:
            after_restart = len(scheduled(q))
        wait_for(lambda: fired_at_least(after_restart + 6), 30, "fires after the restart")
    finally:
        workers.stop_all()
    with SyncQueue(queue_name, server.url) as queue:
        for sid in firsts:
            queue.unschedule(sid)
        jobs = scheduled(queue)
    seen = Counter(
        (j.schedule_id, round(j.fire_time.timestamp() * 1000)) for j in jobs if j.fire_time
    )
    assert sum(seen.values()) == len(jobs)
    assert max(seen.values()) == 1, (seen.most_common(3), workers.logs())
    for sid, first in firsts.items():
        times = sorted(t for s, t in seen if s == sid)
        assert times[0] == first
        # every fire time is on the schedule's grid; a gap only where nothing could fire
        assert all((t - first) % round(EVERY * 1000) == 0 for t in times)
        assert len(times) >= 8
