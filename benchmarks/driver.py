"""The measurement protocol every system goes through, echomq and each peer alike.

A system module (``echomq_bench``, ``peers.<peer>``) defines a :class:`System`
and calls :func:`main`. It then runs in two roles, each its own process:

- ``producer`` (started by run.py with the system's interpreter): for each run,
  on a flushed server, it measures add one at a time, bulk add (where the
  system offers one), a drain of no-op jobs and a priority drain, and prints
  the medians as JSON lines.
- ``worker`` (started by the producer): runs the system's own worker on the
  queue at worker concurrency DRAIN_CONCURRENCY (``drain``: the same for every
  system, each with its library's default prefetch and batching), at another
  concurrency (``drain@N``, the ``drain_sweep``) or one job at a time
  (``priority``); every handler calls :meth:`harness.Tally.hit`.

Equal settings: the headline ``drain`` runs every system at concurrency 10.
``drain_sweep`` drains at each concurrency of SWEEP (``drain_c1``,
``drain_c50``, …; ``drain`` is the one at 10) and reports each system's best
(``drain_sweep``) and the concurrency that reached it
(``drain_sweep_concurrency``).

The drain rate is measured inside the worker, from the first handler start to
the last, so the worker's start-up is not counted; the server's CPU and
commands are measured around the whole drain, start-up included.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness

HERE = Path(__file__).resolve().parent
LEVELS = 4  # priority levels used by the priority drain: 0 (first) .. 3 (last)
BULK_BATCH = 1000  # jobs per bulk call
#: callers adding one job at a time at once, like a web server's request handlers:
#: asyncio tasks for a system with an asyncio client, threads for a blocking one.
CONCURRENT_TASKS = 100
CONCURRENT_THREADS = 16
Item = tuple[int, int]  # (arrival seq, priority level)
#: worker concurrency of the headline drain, the same for every system.
DRAIN_CONCURRENCY = 10
#: worker concurrencies of the drain sweep (the best is ``drain_sweep``).
SWEEP = (1, 10, 50, 100)


def worker_concurrency(mode: str) -> int:
    """The worker concurrency a mode asks for: 1 (``priority``), N (``drain@N``),
    else DRAIN_CONCURRENCY."""
    if mode == "priority":
        return 1
    if mode.startswith("drain@"):
        return int(mode.removeprefix("drain@"))
    return DRAIN_CONCURRENCY


@dataclass(frozen=True, slots=True)
class Sizes:
    single: int
    bulk: int
    drain: int
    priority: int
    runs: int
    concurrent: int
    sweep: tuple[int, ...] = ()

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Sizes:
        sweep = tuple(int(c) for c in args.sweep.split(",") if c.strip())
        return cls(
            args.single, args.bulk, args.jobs, args.priority, args.runs, args.concurrent, sweep
        )


@dataclass(frozen=True, slots=True)
class DrainVariant:
    """An extra drain with other worker settings (e.g. arq's default poll delay)."""

    metric: str
    mode: str
    max_jobs: int


class System:
    """One queue library, driven the way its docs recommend for speed."""

    name = "system"  # the package name, the ``system`` field of every line
    module = "system"  # ``python -m <module>`` runs this system's roles
    has_bulk = False
    #: add_one blocks (a sync client): concurrent adds run on threads, not tasks.
    blocking_add = False
    notes: tuple[str, ...] = ()  # how the system was configured, for RESULTS.md
    variants: tuple[DrainVariant, ...] = ()

    def version(self) -> str:
        raise NotImplementedError

    async def open(self, url: str) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def add_one(self, seq: int, level: int) -> None:
        raise NotImplementedError

    async def add_bulk(self, items: Sequence[Item]) -> None:
        raise NotImplementedError

    async def prefill(self, items: Sequence[Item]) -> None:
        """Load jobs before a drain by the fastest means (not measured)."""
        if self.has_bulk:
            for start in range(0, len(items), BULK_BATCH):
                await self.add_bulk(items[start : start + BULK_BATCH])
        else:
            for seq, level in items:
                await self.add_one(seq, level)

    def run_worker(self, url: str, mode: str, tally: harness.Tally) -> None:
        """Run the system's worker until SIGTERM; each handler calls tally.hit."""
        raise NotImplementedError


# -- the producer role ----------------------------------------------------------


class Producer:
    def __init__(self, system: System, url: str, label: str, sizes: Sizes) -> None:
        self.system = system
        self.url = url
        self.label = label
        self.sizes = sizes
        self.probe = harness.ServerProbe(url)
        self.rec = harness.Recorder(system.name)
        self.tmp = Path(tempfile.mkdtemp(prefix="emq-bench-"))

    async def run(self) -> None:
        s = self.system
        harness.emit(
            {
                "meta": {
                    "system": s.name,
                    "version": s.version(),
                    "notes": list(s.notes),
                    "python": sys.version.split()[0],
                }
            }
        )
        for run in range(self.sizes.runs):
            await self.one_run(run)
        for m in self.rec.measurements():
            harness.emit(m.line(self.label))
        self.probe.close()

    async def one_run(self, run: int) -> None:
        if self.sizes.concurrent:
            await self.measure_add_concurrent()
        add_work = await self.measure_add_single()
        if self.system.has_bulk:
            add_work = await self.measure_add_bulk()
        drained = len(self.rec.values("drain"))
        drain_work = await self.measure_drain("drain", "drain", self.sizes.drain)
        headline = self.rec.values("drain")[drained:]
        if drain_work is not None:
            self.rec.add("server_cpu_us_per_job", add_work[0] + drain_work[0], "us/job")
            self.rec.add("server_calls_per_job", add_work[1] + drain_work[1], "calls/job")
        await self.measure_sweep(headline[0] if headline else None)
        for variant in self.system.variants:
            await self.measure_drain(
                variant.metric, variant.mode, min(variant.max_jobs, self.sizes.drain)
            )
        await self.measure_priority(run)

    async def measure_sweep(self, headline: float | None) -> None:
        """Drain at each concurrency of the sweep (``headline``: the rate the drain at
        DRAIN_CONCURRENCY just measured); the best rate is ``drain_sweep``."""
        if not self.sizes.sweep:
            return
        rates: dict[int, float] = {}
        for concurrency in self.sizes.sweep:
            if concurrency == DRAIN_CONCURRENCY:
                if headline is not None:
                    rates[concurrency] = headline
                continue
            metric = f"drain_c{concurrency}"
            had = len(self.rec.values(metric))
            await self.measure_drain(metric, f"drain@{concurrency}", self.sizes.drain)
            got = self.rec.values(metric)
            if len(got) > had:
                rates[concurrency] = got[-1]
        if rates:
            best = max(rates, key=lambda c: rates[c])
            self.rec.add("drain_sweep", rates[best], "jobs/s")
            self.rec.add("drain_sweep_concurrency", float(best), "workers")

    async def _fresh(self) -> None:
        await self.system.close()
        self.probe.flush()
        await self.system.open(self.url)

    async def measure_add_single(self) -> tuple[float, float]:
        await self._fresh()
        n = self.sizes.single
        with self.probe.measure() as box:
            t0 = time.perf_counter()
            for seq in range(n):
                await self.system.add_one(seq, 0)
            elapsed = time.perf_counter() - t0
        self.rec.add("add_single", n / elapsed, "jobs/s")
        self.rec.add_work("add_single", box[0], n)
        return box[0].cpu_us / n, box[0].total_calls / n

    async def measure_add_concurrent(self) -> None:
        """Many callers at once, each adding one job at a time (a web server's pattern)."""
        await self._fresh()
        n = self.sizes.concurrent
        with self.probe.measure() as box:
            t0 = time.perf_counter()
            if self.system.blocking_add:
                await asyncio.to_thread(self._add_on_threads, n)
            else:
                await asyncio.gather(
                    *(self._add_share(i, n, CONCURRENT_TASKS) for i in range(CONCURRENT_TASKS))
                )
            elapsed = time.perf_counter() - t0
        self.rec.add("add_concurrent", n / elapsed, "jobs/s")
        self.rec.add_work("add_concurrent", box[0], n)

    async def _add_share(self, caller: int, n: int, callers: int) -> None:
        for seq in range(caller, n, callers):
            await self.system.add_one(seq, 0)

    def _add_on_threads(self, n: int) -> None:
        threads = [
            threading.Thread(target=asyncio.run, args=(self._add_share(i, n, CONCURRENT_THREADS),))
            for i in range(CONCURRENT_THREADS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    async def measure_add_bulk(self) -> tuple[float, float]:
        await self._fresh()
        n = self.sizes.bulk
        items = [(seq, 0) for seq in range(n)]
        with self.probe.measure() as box:
            t0 = time.perf_counter()
            for start in range(0, n, BULK_BATCH):
                await self.system.add_bulk(items[start : start + BULK_BATCH])
            elapsed = time.perf_counter() - t0
        self.rec.add("add_bulk", n / elapsed, "jobs/s")
        self.rec.add_work("add_bulk", box[0], n)
        return box[0].cpu_us / n, box[0].total_calls / n

    async def measure_drain(self, metric: str, mode: str, n: int) -> tuple[float, float] | None:
        await self._fresh()
        await self.system.prefill([(seq, 0) for seq in range(n)])
        with self.probe.measure() as box:
            tally = self.run_worker_process(mode, n)
        if tally is None:
            return None
        elapsed = tally["last"] - tally["first"]
        self.rec.add(metric, (tally["count"] - 1) / elapsed if elapsed > 0 else None, "jobs/s")
        self.rec.add_work(metric, box[0], n)
        return box[0].cpu_us / n, box[0].total_calls / n

    async def measure_priority(self, run: int) -> None:
        await self._fresh()
        n = self.sizes.priority
        pick = random.Random(run)
        await self.system.prefill([(seq, pick.randrange(LEVELS)) for seq in range(n)])
        tally = self.run_worker_process("priority", n)
        if tally is None:
            return
        order = [(level, seq) for level, seq in tally["order"]]
        self.rec.add("priority_inversions", harness.served_out_of_order(order), "jobs")
        elapsed = tally["last"] - tally["first"]
        self.rec.add("priority_drain", (n - 1) / elapsed if elapsed > 0 else None, "jobs/s")

    def run_worker_process(self, mode: str, n: int) -> dict[str, Any] | None:
        """Start the worker role, wait for its tally, stop it; None (and a note) on failure."""
        result = self.tmp / f"{mode}-{time.monotonic_ns()}.json"
        log = self.tmp / f"{result.stem}.log"
        cmd = [
            sys.executable,
            "-m",
            self.system.module,
            "worker",
            "--url",
            self.url,
            "--mode",
            mode,
            "--jobs",
            str(n),
            "--result",
            str(result),
        ]
        with log.open("wb") as out:
            process = subprocess.Popen(
                cmd, cwd=HERE, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
            )
            try:
                done = harness.wait_for_file(result, 30 + n / 100, lambda: process.poll() is None)
            finally:
                harness.stop_process(process, grace=5.0)
        if not done:
            tail = log.read_text(errors="replace")[-1500:]
            print(
                f"{self.system.name}: {mode} worker gave no result; log tail:\n{tail}",
                file=sys.stderr,
                flush=True,
            )
            return None
        return harness.read_tally(result)


# -- entry point -----------------------------------------------------------------


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=("producer", "worker"))
    parser.add_argument("--url", required=True)
    parser.add_argument("--label", default="")
    parser.add_argument("--mode", default="drain")
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs per drain")
    parser.add_argument("--single", type=int, default=2_000, help="jobs added one at a time")
    parser.add_argument("--bulk", type=int, default=20_000, help="jobs added in bulk")
    parser.add_argument("--priority", type=int, default=1_000, help="jobs in the priority drain")
    parser.add_argument(
        "--concurrent", type=int, default=20_000, help="jobs added by concurrent callers (0: skip)"
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--sweep",
        default=",".join(map(str, SWEEP)),
        help="worker concurrencies of the drain sweep, comma-separated ('' skips it)",
    )
    parser.add_argument("--result", type=Path)
    return parser.parse_args(argv)


def main(system: System, argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.role == "worker":
        tally = harness.Tally(args.jobs, args.result)
        harness.set_current(tally)
        system.run_worker(args.url, args.mode, tally)
        return 0
    producer = Producer(system, args.url, args.label, Sizes.from_args(args))
    try:
        asyncio.run(_produce(producer))
    except Exception as exc:  # a peer that breaks is reported, not fatal to the run
        print(json.dumps({"error": {"system": system.name, "detail": repr(exc)}}), flush=True)
        raise
    return 0


async def _produce(producer: Producer) -> None:
    try:
        await producer.run()
    finally:
        await producer.system.close()
