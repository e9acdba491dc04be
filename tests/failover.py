"""A primary killed under load: what producers and workers see, and what is lost.

Why a module of its own: the failover test asserts on one run, and
benchmarks/cluster_scaling.py repeats the same run to measure how many
acknowledged adds a failover loses with and without ``durable=True``.

One run: producers (each its own Queue and cluster client) add jobs in a
loop; workers (echomq Workers, each its own Queue) complete them. After
``before`` seconds the primary that owns the queue's slot is SIGKILLed; its
replica is promoted by the cluster itself; a supervisor-like step restarts
the dead node, which rejoins as the new primary's replica. The load runs on
for ``after`` seconds after the promotion, then the producers stop and the
workers drain the queue. Nobody tells a client that anything happened: they
carry on through their own retries and topology refreshes.

``lagging_replica_loss`` is the other way to lose acknowledged adds: the
replica falls behind (here: SIGSTOP) while the primary goes on acknowledging,
then the primary dies and the stale replica takes over.

``durable_add_to_stalled_replica`` is the promise a durable add makes, seen
where it can fail: on loopback a replica has every write almost at once, so
an add that forgot to wait would still find its job there. With the replica
stopped (SIGSTOP) for the whole add, the add must block for its
``durable_timeout`` and raise ``NotReplicated``; sent with a longer timeout,
it must still be blocked while the replica is stopped and return once the
replica runs again (SIGCONT).

Accounting: an add is *acknowledged* when ``add`` returned its id. A job is
*lost* when it was acknowledged but no worker ever ran it. Failed adds (the
call raised) are counted, not acknowledged. Jobs run more than once (a claim
or a completion that the dead primary had not replicated yet) are counted as
``reruns``: echomq is at-least-once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

import redis

from echomq import Job, NotReplicated, Queue, SyncQueue, Worker
from echomq.keys import QueueKeys
from localcluster import LocalCluster
from servers import PrivateServer

#: how long the workers may take to run what is left once the producers stop.
DRAIN_TIMEOUT = 30.0
#: a producer's pause after a failed add, like an application's retry loop.
ERROR_PAUSE = 0.02


@dataclass
class FailoverReport:
    """What one failover run saw (times in seconds from the kill)."""

    durable: bool
    acknowledged: int = 0
    failed_adds: int = 0
    not_replicated: int = 0
    lost: list[str] = field(default_factory=list)
    acked_ids: list[str] = field(default_factory=list)
    reruns: int = 0
    promoted_after: float = 0.0
    first_ack_after_kill: float | None = None
    first_run_after_kill: float | None = None
    acks_after_promotion: int = 0
    runs_after_promotion: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    adds_per_second: float = 0.0  # acknowledged adds per second before the kill
    workers_stopped: list[str] = field(default_factory=list)  # run() ended by itself: why

    def summary(self) -> str:
        return (
            f"durable={self.durable} acked={self.acknowledged} lost={len(self.lost)} "
            f"failed_adds={self.failed_adds} (not replicated {self.not_replicated}) "
            f"reruns={self.reruns} promoted after {self.promoted_after:.2f}s, "
            f"first ack after kill {_fmt(self.first_ack_after_kill)}, first run after kill "
            f"{_fmt(self.first_run_after_kill)}; {self.adds_per_second:.0f} adds/s before; "
            f"errors {dict(self.errors)}; workers stopped by themselves: {self.workers_stopped}"
        )


@dataclass
class _Load:
    """Shared state of one run's producers and workers."""

    queue: str
    url: str
    durable: bool
    durable_timeout: float
    stop_adding: asyncio.Event = field(default_factory=asyncio.Event)
    acked: dict[str, float] = field(default_factory=dict)  # id -> monotonic time of the ack
    runs: Counter[str] = field(default_factory=Counter)
    run_times: list[float] = field(default_factory=list)
    failed: int = 0
    not_replicated: int = 0
    errors: Counter[str] = field(default_factory=Counter)

    async def produce(self) -> None:
        q = Queue(self.queue, self.url, durable=self.durable, durable_timeout=self.durable_timeout)
        try:
            while not self.stop_adding.is_set():
                try:
                    job_id = await q.add("tick")
                except NotReplicated:
                    self.failed += 1
                    self.not_replicated += 1
                    await asyncio.sleep(ERROR_PAUSE)
                except Exception as exc:  # what an application's retry loop would see
                    self.failed += 1
                    self.errors[type(exc).__name__] += 1
                    await asyncio.sleep(ERROR_PAUSE)
                else:
                    self.acked[job_id] = time.monotonic()
        finally:
            await q.close()

    def handle(self, job: Job) -> None:
        self.runs[job.id] += 1
        self.run_times.append(time.monotonic())


async def run_failover(
    cluster: LocalCluster,
    queue: str,
    *,
    durable: bool,
    producers: int = 4,
    workers: int = 2,
    before: float = 1.0,
    after: float = 2.0,
    durable_timeout: float = 1.0,
    promotion_timeout: float = 30.0,
) -> FailoverReport:
    """Kill the primary of ``queue``'s slot under load; see the module docstring."""
    load = _Load(queue, cluster.url, durable, durable_timeout)
    # a 2 s lease is shorter than a failover (about 2.5 s to promote): a job held
    # across the outage can expire twice, which max_stalls=1 would rightly bury;
    # the invariant check after the drain expects every surviving job completed
    queues = [Queue(queue, cluster.url, max_stalls=10) for _ in range(workers)]
    runners = [
        Worker(q, {"tick": load.handle}, concurrency=8, lease=2.0, maintenance_interval=0.5)
        for q in queues
    ]
    tasks = [asyncio.create_task(w.run(install_signals=False)) for w in runners]
    adding = [asyncio.create_task(load.produce()) for _ in range(producers)]
    report = FailoverReport(durable=durable)
    try:
        started = time.monotonic()
        await asyncio.sleep(before)
        report.adds_per_second = len(load.acked) / (time.monotonic() - started)
        killed_at = await asyncio.to_thread(_kill_and_heal, cluster, queue, promotion_timeout)
        promoted_at = time.monotonic()
        report.promoted_after = promoted_at - killed_at
        await asyncio.sleep(after)
        load.stop_adding.set()
        await asyncio.gather(*adding)
        await _drain(load)
        _account(report, load, killed_at, promoted_at)
        report.workers_stopped = [_why(t) for t in tasks if t.done()]
    finally:
        load.stop_adding.set()
        for w in runners:
            w.stop(immediate=True)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*tasks, *adding, return_exceptions=True), 15)
        for q in queues:
            await q.close()
    return report


def _kill_and_heal(cluster: LocalCluster, queue: str, timeout: float) -> float:
    """SIGKILL the queue's primary, wait for its replica's promotion, restart the dead
    node (it rejoins as a replica); returns the monotonic time of the kill."""
    with cluster.client() as client:
        slot = int(client.keyslot(f"emq:{{{queue}}}:meta"))
    victim = cluster.primary_for_slot(slot)
    assert victim is not None, f"no primary serves slot {slot}"
    [heir] = cluster.replicas_of(victim)
    killed_at = time.monotonic()
    cluster.kill(victim)
    cluster.wait_for(lambda: cluster.primary_for_slot(slot) is heir, timeout, "the promotion")
    cluster.restart(victim)
    return killed_at


async def _drain(load: _Load) -> None:
    """Wait until every acknowledged job ran (bounded); what never runs is lost."""
    deadline = time.monotonic() + DRAIN_TIMEOUT
    while time.monotonic() < deadline and any(i not in load.runs for i in load.acked):
        await asyncio.sleep(0.05)
    q = Queue(load.queue, load.url)
    try:  # and until the queue holds nothing runnable any more (reruns included)
        while time.monotonic() < deadline:
            counts = (await q.stats()).counts
            if counts["waiting"] + counts["active"] + counts["delayed"] == 0:
                return
            await asyncio.sleep(0.05)
    finally:
        await q.close()


def _account(report: FailoverReport, load: _Load, killed_at: float, promoted_at: float) -> None:
    report.acknowledged = len(load.acked)
    report.failed_adds = load.failed
    report.not_replicated = load.not_replicated
    report.errors = load.errors
    report.lost = sorted(i for i in load.acked if i not in load.runs)
    report.acked_ids = sorted(load.acked)
    report.reruns = sum(n - 1 for n in load.runs.values())
    acks_after = [t - killed_at for t in load.acked.values() if t > killed_at]
    runs_after = [t - killed_at for t in load.run_times if t > killed_at]
    report.first_ack_after_kill = min(acks_after, default=None)
    report.first_run_after_kill = min(runs_after, default=None)
    report.acks_after_promotion = sum(1 for t in load.acked.values() if t > promoted_at)
    report.runs_after_promotion = sum(1 for t in load.run_times if t > promoted_at)


def _why(task: asyncio.Task[None]) -> str:
    exc = task.exception()
    return "returned" if exc is None else f"{type(exc).__name__}: {exc}"


def _fmt(seconds: float | None) -> str:
    return "never" if seconds is None else f"{seconds:.2f}s"


@dataclass(frozen=True)
class LaggingReplicaLoss:
    acknowledged: int
    lost: int
    durable_refused: bool  # the durable add raised NotReplicated instead of returning


def lagging_replica_loss(
    cluster: LocalCluster, queue: str, *, adds: int = 600, payload_kib: int = 64
) -> LaggingReplicaLoss:
    """Stall the replica of ``queue``'s primary, add ``adds`` jobs (acknowledged by the
    primary alone), try one durable add, kill the primary, let the stale replica
    take over; count the acknowledged jobs it does not have.

    600 x 64 KiB outgrows what the kernel's socket buffers hold for the stalled
    replica, so most of it can only sit in the primary's memory when it dies.
    """
    with cluster.client() as client:
        slot = int(client.keyslot(QueueKeys(queue).meta))
    victim = cluster.primary_for_slot(slot)
    assert victim is not None, f"no primary serves slot {slot}"
    [heir] = cluster.replicas_of(victim)
    blob = "x" * payload_kib * 1024
    with (
        SyncQueue(queue, cluster.url) as plain,
        SyncQueue(queue, cluster.url, durable=True, durable_timeout=0.3) as durable,
    ):
        plain.add("warm-up")  # both clients know the topology before a node stalls
        durable.add("warm-up")
        heir.pause()
        try:
            acked = [plain.add("j", blob) for _ in range(adds)]
            try:
                durable.add("j")
                refused = False
            except NotReplicated:
                refused = True
        finally:
            cluster.kill(victim)
            heir.resume()
    cluster.wait_for(lambda: cluster.primary_for_slot(slot) is heir, 30, "the promotion")
    keys = QueueKeys(queue)
    with heir.client() as client:
        present = sum(int(client.exists(keys.job(i))) for i in acked)
    cluster.restart(victim)
    cluster.wait_until_healthy()
    return LaggingReplicaLoss(len(acked), len(acked) - present, refused)


@dataclass(frozen=True)
class StalledReplicaAdd:
    """A durable add sent while the queue's only replica was stopped."""

    refused: NotReplicated | None  # what the add raised (None: it returned)
    seconds: float  # how long the add took to raise
    on_primary: bool  # a refused add's job is written on the primary all the same
    blocked_until_resumed: bool  # the second add had not returned while the replica was stopped
    on_replica: bool  # ... and once it returned, the replica had its job


#: how long the second add is watched for returning while the replica is stopped.
BLOCKED_WATCH = 0.6


def durable_add_to_stalled_replica(
    url: str, replica: PrivateServer, queue: str, *, timeout: float = 1.0
) -> StalledReplicaAdd:
    """SIGSTOP ``replica``; a durable add with ``timeout`` (must raise NotReplicated
    after blocking that long); then a durable add with a long timeout, watched
    for BLOCKED_WATCH s (must not return), SIGCONT, and its result (must be on
    the replica). The replica runs again whatever happens.
    """
    keys = QueueKeys(queue)
    with (
        SyncQueue(queue, url, durable=True, durable_timeout=timeout) as short,
        SyncQueue(queue, url, durable=True, durable_timeout=8.0) as long,
    ):
        short.add("warm-up")  # both clients know the topology and scripts first
        long.add("warm-up")
        replica.pause()
        try:
            refused, seconds = _timed_refusal(short)
            on_primary = refused is not None and short.get(refused.ids[0]) is not None
            pool = ThreadPoolExecutor(1)
            second = pool.submit(long.add, "after")
            blocked = not _returns_within(second, BLOCKED_WATCH)
        finally:
            replica.resume()
        job_id = second.result(timeout=30)
        pool.shutdown()
        with replica.client() as client:
            with contextlib.suppress(redis.ResponseError):
                client.readonly()  # a cluster replica serves reads only after READONLY
            on_replica = client.hget(keys.job(job_id), "n") == "after"
    return StalledReplicaAdd(refused, seconds, on_primary, blocked, on_replica)


def _timed_refusal(queue: SyncQueue) -> tuple[NotReplicated | None, float]:
    started = time.monotonic()
    try:
        queue.add("stalled")
    except NotReplicated as exc:
        return exc, time.monotonic() - started
    return None, time.monotonic() - started


def _returns_within(future: Future[str], seconds: float) -> bool:
    """True if ``future`` finished (returned or raised) within ``seconds``."""
    try:
        future.exception(timeout=seconds)
    except FutureTimeout:
        return False
    return True


def check_after_failover(cluster: LocalCluster, queue: str, report: FailoverReport) -> None:
    """The whole invariant check on the new primary once the queue has drained.

    Every acknowledged job still on the server is completed, in exactly one
    state set that agrees with its hash; no lease is left; the ring holds
    exactly the non-empty lanes and the waiting count is their sum. A job
    counted lost must be gone from the server (not stuck in some state), and
    every job that is gone was either lost or pruned after it completed.
    """
    from faults import invariants

    keys = QueueKeys(queue)
    with cluster.client() as client:
        with client.pipeline(transaction=False) as pipe:
            for job_id in report.acked_ids:
                pipe.exists(keys.job(job_id))
            exists = pipe.execute()
        present = [i for i, n in zip(report.acked_ids, exists, strict=True) if n]
        check = invariants.check(client, queue, present, count_executions=False, fresh_queue=False)
    check.fail_if_any()
    stuck = set(report.lost) & set(present)
    assert not stuck, f"acknowledged jobs that never ran yet are still there: {sorted(stuck)[:5]}"
