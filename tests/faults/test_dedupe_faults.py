"""Deduplication under faults: ``kill -9`` of workers while ``latest`` jobs run.

A producer adds ``Dedupe(key, "latest")`` jobs for three keys, one every few
ms, while two ``echomq worker`` processes run them (1 s leases); some jobs kill
their own worker in the middle of their first attempt, and the test kills a
worker from outside too (each is replaced).

Promises under test (DESIGN §10): at most one job per key is active at any
moment (sampled from the server all along: a killed worker's job stays active
until its lease runs out, and the one held behind it must not start before);
and no trigger is lost: for each key, the job the last add returned completes,
with that add's data, in a run that started after that add.
"""

from __future__ import annotations

import random
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster

from echomq import Dedupe, State
from echomq.sync import SyncQueue
from faults import invariants
from faults.procs import Workers, wait_for
from servers import PrivateServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

KEYS = ("a", "b", "c")
PRODUCE_SECONDS = 5.0


def most_active_per_key(queue: SyncQueue) -> int:
    """The most jobs of one key active at once, as the server has them now."""
    per_key = Counter(job.key for job in queue.jobs("active", count=1000))
    return max(per_key.values(), default=0)


def server_ms(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


@dataclass
class Run:
    """The producer's side of the test: what it added last per key, and the most
    jobs of one key it saw active at once."""

    queue: SyncQueue
    workers: Workers
    client: redis.Redis
    rng: random.Random = field(default_factory=lambda: random.Random(34))
    seq: int = 0
    most: int = 0
    last: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # id, seq, ms before

    def add(self, key: str, kill: bool = False) -> str:
        self.seq += 1
        data: dict[str, object] = {"seq": self.seq, "sleep": 0.4}
        if kill:
            data["kill"] = "middle"  # its worker dies in the middle of its first attempt
        before = server_ms(self.client)
        job_id = self.queue.add("work", data, dedupe=Dedupe(key, "latest"))
        self.last[key] = (job_id, self.seq, before)
        return job_id

    def look(self) -> None:
        """Sample the server's active set; replace any dead worker."""
        self.most = max(self.most, most_active_per_key(self.queue))
        while len(self.workers.alive()) < 2:
            self.workers.spawn()

    def produce(self, seconds: float) -> None:
        end, kills = time.monotonic() + seconds, 0
        while time.monotonic() < end:
            self.add(self.rng.choice(KEYS), kill=self.rng.random() < 0.08)
            if self.rng.random() < 0.02 and kills < 3:
                self.workers.kill9(self.rng.choice(self.workers.alive()))
                kills += 1
            self.look()
            time.sleep(0.01)

    def settled(self) -> bool:
        self.look()
        finals = [self.queue.get(job_id) for job_id, _, _ in self.last.values()]
        return all(j is not None and j.state is State.COMPLETED for j in finals)

    def trigger_while_running(self, key: str) -> None:
        """Add for ``key`` until a job of it runs, then once more (the last trigger)."""
        running = self.add(key)

        def started() -> bool:
            job = self.queue.get(running)
            return job is not None and job.state is State.ACTIVE

        wait_for(started, 30, f"a job of key {key} running")
        self.add(key)


@pytest.mark.parametrize("backend", ["valkey", "redis", "cluster"], indirect=True)
def test_kill9_while_latest_jobs_run_never_two_active_never_a_lost_trigger(
    backend: PrivateServer,
    backend_url: str,
    queue_name: str,
    redis_client: redis.Redis,
    tmp_path: Path,
) -> None:
    side_url = None
    if isinstance(redis_client, RedisCluster):  # the side channel: the node of the queue's slot
        node = redis_client.get_node_from_key(invariants.side_key(queue_name))
        side_url = f"redis://{node.host}:{node.port}/0"
    workers = Workers(
        backend_url, queue_name, tmp_path, side_url=side_url, env={"FAULT_CONCURRENCY": "4"}
    )
    with SyncQueue(queue_name, backend_url) as queue:
        run = Run(queue, workers, redis_client)
        try:
            workers.spawn()
            workers.spawn()
            workers.wait_ready(2)
            run.produce(PRODUCE_SECONDS)
            wait_for(run.settled, 60, "the last job of every key completed")
            # then, with no killing job left, the last trigger of each key lands
            # while a job of that key runs: it must not be lost
            for key in KEYS:
                run.trigger_while_running(key)
            wait_for(run.settled, 60, "the last job of every key completed")
        finally:
            workers.stop_all()
        assert run.most <= 1, f"{run.most} jobs of one key were active at once"
        starts: dict[str, list[int]] = defaultdict(list)
        for record in invariants.executions(redis_client, queue_name):
            starts[str(record["id"])].append(int(record["ca"]))
        for key, (job_id, seq, before) in run.last.items():
            job = queue.get(job_id)
            assert job is not None and job.data == {"seq": seq, "sleep": 0.4}, (key, job)
            assert starts[job_id] and max(starts[job_id]) >= before, (
                f"key {key}: job {job_id} never ran after the last add"
            )
        assert queue.stats().counts["dead"] == 0
        stalled = [j for j in queue.jobs("completed", count=1000) if j.stalls > 0]
        assert stalled, "no job came back from a killed worker: the faults did not bite"
