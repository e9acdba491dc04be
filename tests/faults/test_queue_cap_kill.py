"""kill -9 a worker holding every slot of a queue-wide cap (configure): the
queue is served again once the leases run out (the queue's active count is the
active set, which the expired leases leave in the script that returns them)."""

from __future__ import annotations

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


@pytest.mark.parametrize("backend", ["valkey", "redis"], indirect=True)
def test_kill9_worker_holding_the_queue_cap_frees_it_after_the_lease(
    backend: PrivateServer,
    backend_url: str,
    queue_name: str,
    redis_client: redis.Redis,
    tmp_path: Path,
) -> None:
    with SyncQueue(queue_name, backend_url) as queue:
        queue.configure(concurrency=2)
        ids = [queue.add("work", {"kill": "middle", "sleep": 0.3}, group=g) for g in "ab"]
        ids += [queue.add("work", {"sleep": 0.05}, group=g) for g in "abcabc"]
    workers = Workers(backend_url, queue_name, tmp_path)
    try:
        first = workers.spawn()
        wait_for(lambda: first.poll() is not None, 20, "the worker killed itself")
        workers.spawn()
        wait_for(lambda: _completed(redis_client, queue_name) == len(ids), 30, "every job done")
    finally:
        workers.stop_all()
    invariants.check(redis_client, queue_name, ids).fail_if_any()
    assert len(invariants.executions(redis_client, queue_name)) >= len(ids) + 2
    with SyncQueue(queue_name, backend_url) as queue:
        assert queue.stats().counts["active"] == 0
        assert len(queue.claim(5)) == 0  # nothing left, and nothing held
        for job_id in ids[:2]:
            job = queue.get(job_id)
            assert job is not None and job.stalls >= 1  # came back after its lease
