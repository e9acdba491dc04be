"""kill -9 a worker holding every slot of a cap: the cap is free again once the
leases run out, whether it is a lane's cap (``set_lane``; issue 16: a lane's
active count cannot drift) or the queue-wide cap (``configure``).

The handler of each "kill" job SIGKILLs its own worker while it runs (both
slots of the cap 2 held by the dead process). Nothing under the cap can run
until the 1 s leases expire; then the expired leases give their slots back
in the same script that returns the jobs (the queue's active count is the
active set), and a new worker finishes the rest; afterwards a capped lane's
active count is 0 (no slot leaked).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from echomq.keys import QueueKeys
from echomq.sync import SyncQueue
from faults import invariants
from faults.procs import Workers, wait_for
from servers import PrivateServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


def _completed(client: redis.Redis, queue: str) -> int:
    return int(client.zcard(QueueKeys(queue).completed))


def _fill_lane_cap(queue: SyncQueue) -> list[str]:
    """Two jobs that kill their worker hold both slots of lane t, six wait behind."""
    queue.set_lane("t", concurrency=2)
    ids = [queue.add("work", {"kill": "middle", "sleep": 0.3}, group="t") for _ in range(2)]
    return ids + [queue.add("work", {"sleep": 0.05}, group="t") for _ in range(6)]


def _fill_queue_cap(queue: SyncQueue) -> list[str]:
    """Two jobs that kill their worker hold both slots of the queue, six wait behind."""
    queue.configure(concurrency=2)
    ids = [queue.add("work", {"kill": "middle", "sleep": 0.3}, group=g) for g in "ab"]
    return ids + [queue.add("work", {"sleep": 0.05}, group=g) for g in "abcabc"]


@pytest.mark.parametrize("fill", [_fill_lane_cap, _fill_queue_cap], ids=["lane", "queue"])
@pytest.mark.parametrize("backend", ["valkey", "redis"], indirect=True)
def test_kill9_worker_holding_every_slot_of_a_cap_frees_it_after_the_lease(
    backend: PrivateServer,
    backend_url: str,
    queue_name: str,
    redis_client: redis.Redis,
    tmp_path: Path,
    fill: Callable[[SyncQueue], list[str]],
) -> None:
    with SyncQueue(queue_name, backend_url) as queue:
        ids = fill(queue)
    workers = Workers(backend_url, queue_name, tmp_path)
    try:
        first = workers.spawn()
        wait_for(lambda: first.poll() is not None, 20, "the worker killed itself")
        workers.spawn()
        wait_for(lambda: _completed(redis_client, queue_name) == len(ids), 30, "every job done")
    finally:
        workers.stop_all()
    invariants.check(redis_client, queue_name, ids).fail_if_any()
    runs = invariants.executions(redis_client, queue_name)
    assert len(runs) >= len(ids) + 2  # the two killed runs ran again
    with SyncQueue(queue_name, backend_url) as queue:
        if fill is _fill_lane_cap:
            [lane] = [x for x in queue.lanes() if x.group == "t"]
            assert lane.active == 0 and not lane.parked
        for job_id in ids[:2]:
            job = queue.get(job_id)
            assert job is not None and job.stalls >= 1  # came back after its lease
