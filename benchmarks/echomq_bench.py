"""echomq in the common protocol (driver.py), plus the measurements only echomq gets.

Roles (``python -m echomq_bench ROLE`` from the benchmarks directory):

- ``producer`` / ``worker``: the protocol every system goes through.
- ``extras``: echomq-only figures: claim cost at a backlog of 10^3 vs 10^6
  jobs, with 1 vs 10^5 lanes and with 99 % of 10^4 lanes paused or capped
  (lane_caps.py), add cost at a 10^6 backlog vs an empty queue, idle latency
  from add to handler start, the same under load (load_latency.py), ``wait``
  latency (wait_latency.py), server memory per waiting job, ``ordering="mint"``
  vs ``"composite"``, and the server CPU of the whole lifecycle when batched.
  ``--only STEP,…`` runs some of the steps (run.py: ``memory_per_job`` on
  Valkey 9).

The worker is ``echomq.Worker`` when the package has it; otherwise (and for
the ``drain_batched_loop`` figure) a loop that claims in batches, completes
each batch with one ``complete_many`` call and, when idle, blocks on the
queue's doorbell key.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

import harness
import lane_caps
import load_latency
import report
import wait_latency
from driver import DRAIN_CONCURRENCY, DrainVariant, Item, System, worker_concurrency
from driver import main as driver_main

import echomq
from echomq import Job, Queue, SyncQueue

QUEUE = "bench"
LOOP_BATCH = 50  # jobs claimed (and completed) per call by drain_batched_loop
LEASE = 30.0


#: ECHOMQ_BENCH_BY_SHA=1 sends the scripts by EVALSHA instead of the function library
#: (FCALL), to compare the two on one machine.
BY_SHA = os.environ.get("ECHOMQ_BENCH_BY_SHA") == "1"


def _queue(url: str, **options: Any) -> Queue:
    queue = Queue(QUEUE, url, **options)
    queue.sender.scripts.functions = not BY_SHA
    return queue


def _sync_queue(url: str) -> SyncQueue:
    queue = SyncQueue(QUEUE, url)
    queue.sender.scripts.functions = not BY_SHA
    return queue


#: the commands that run a script: the function library's, or EVALSHA/EVAL without it.
SCRIPT_COMMANDS = ("fcall", "fcall_ro", "evalsha", "eval")


def _lane_name(lanes: int, i: int) -> str:
    return f"t{i % lanes}"


def has_worker() -> bool:
    return hasattr(echomq, "Worker")


class EchoMQ(System):
    name = "echomq"
    module = "echomq_bench"
    has_bulk = True
    variants = (DrainVariant("drain_batched_loop", "loop", 1_000_000),)

    def __init__(self, ordering: str = "composite") -> None:
        self.ordering = ordering
        self.queue: Queue | None = None
        runtime = "echomq.Worker" if has_worker() else "claim/complete loop"
        self.notes = (
            f"drain: {runtime}, concurrency {DRAIN_CONCURRENCY} (drain_sweep: 1, 10, 50, 100), "
            f"default claim batching, lease {LEASE:g}s; priority drain: concurrency 1",
            "add_bulk: Queue.add_many, 1000 jobs per call",
            f"drain_batched_loop: claim({LOOP_BATCH}) + one complete_many per batch, "
            "doorbell BLPOP when idle (no heartbeats): what a batching worker could reach",
            f"ordering={ordering!r}, default retention (keep_completed=1000)",
        )

    def version(self) -> str:
        return echomq.__version__

    async def open(self, url: str) -> None:
        self.queue = _queue(url, ordering=self.ordering)  # type: ignore[arg-type]

    async def close(self) -> None:
        if self.queue is not None:
            await self.queue.close()
            self.queue = None

    def _q(self) -> Queue:
        assert self.queue is not None, "open() first"
        return self.queue

    async def add_one(self, seq: int, level: int) -> None:
        await self._q().add("noop", {"i": seq, "p": level}, priority=level)

    async def add_bulk(self, items: Sequence[Item]) -> None:
        await self._q().add_many(
            [{"name": "noop", "data": {"i": s, "p": p}, "priority": p} for s, p in items]
        )

    def run_worker(self, url: str, mode: str, tally: harness.Tally) -> None:
        concurrency = LOOP_BATCH if mode == "loop" else worker_concurrency(mode)
        asyncio.run(serve(url, self.ordering, concurrency, tally, batched=mode == "loop"))


def _handler(tally: harness.Tally) -> Callable[[Job], Awaitable[None]]:
    async def noop(job: Job) -> None:
        data = job.data
        tally.hit(data["p"], data["i"], data.get("t"))

    return noop


async def serve(
    url: str, ordering: str, concurrency: int, tally: harness.Tally, *, batched: bool = False
) -> None:
    """Run echomq.Worker (or, ``batched`` or without Worker, the claim loop) until SIGTERM."""
    queue = _queue(url, ordering=ordering)  # type: ignore[arg-type]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    try:
        if has_worker() and not batched:
            await _serve_with_worker(queue, concurrency, tally, stop)
        else:
            await _serve_with_loop(queue, concurrency, tally, stop)
    finally:
        await queue.close()


async def _serve_with_worker(
    queue: Queue, concurrency: int, tally: harness.Tally, stop: asyncio.Event
) -> None:
    worker = echomq.Worker(queue, {"noop": _handler(tally)}, concurrency=concurrency, lease=LEASE)
    running = asyncio.ensure_future(worker.run(install_signals=False))
    await stop.wait()
    worker.stop()
    await running


async def _serve_with_loop(
    queue: Queue, batch: int, tally: harness.Tally, stop: asyncio.Event
) -> None:
    """Claim up to ``batch`` jobs, run them, complete them all in one pipelined round trip."""
    client = await queue.client()
    handler = _handler(tally)
    while not stop.is_set():
        jobs = await queue.claim(batch, LEASE)
        if not jobs:
            # idle: block on the doorbell (pushed when waiting goes 0 -> >0)
            await client.blpop([queue.engine.keys.wake], timeout=1)
            continue
        for job in jobs:
            await handler(job)
        await queue.complete_many([(job, None) for job in jobs])


# -- echomq-only measurements ---------------------------------------------------------


class Extras:
    """The echomq-only figures, on one private server."""

    def __init__(
        self,
        url: str,
        label: str,
        *,
        quick: bool,
        runs: int,
        unix_url: str | None = None,
        only: Sequence[str] = (),
    ) -> None:
        self.url = url
        self.unix_url = unix_url
        self.label = label
        self.quick = quick
        self.runs = runs
        self.probe = harness.ServerProbe(url)
        self.rec = harness.Recorder("echomq")
        # --quick stays under 3 minutes with its peers: smaller backlogs and lane counts
        self.backlog = 30_000 if quick else 1_000_000
        self.lanes = 5_000 if quick else 100_000
        self.bulk = 5_000 if quick else 20_000  # jobs of the mint/composite and lifecycle runs
        self.sample = 500 if quick else 2_000  # operations timed per round
        # cost figures are short, and the 2 cores are shared with everything else on
        # the machine: take the median of at least 5 rounds
        self.rounds = max(runs, 1 if quick else 5)
        self.only = tuple(only)

    def steps(self) -> list[Callable[[], Awaitable[None]]]:
        return [
            self.claim_and_add_vs_backlog,
            self.claim_vs_lanes,
            self.claim_vs_capped_lanes,
            self.memory_per_job,
            self.mint_vs_composite,
            self.lifecycle_batched,
            self.idle_latency,
            self.latency_under_load,
            self.wait_latency,
            self.add_single_blocking,
            self.round_trip_floor,
        ]

    async def run(self) -> None:
        for step in self.steps():
            if not self.only or step.__name__ in self.only:
                began = time.monotonic()
                await step()
                took = time.monotonic() - began
                print(f"# extras {step.__name__}: {took:.1f}s", file=sys.stderr, flush=True)
        for m in self.rec.measurements():
            harness.emit(m.line(self.label))
        self.probe.close()

    # helpers
    def queue(self, ordering: str = "composite") -> Queue:
        self.probe.flush()
        return _queue(self.url, ordering=ordering)  # type: ignore[arg-type]

    async def fill(
        self,
        q: Queue,
        n: int,
        group: Callable[[int], str | None] = lambda i: None,
        data: Any = None,
    ) -> None:
        for start in range(0, n, 1000):
            await q.add_many(
                [
                    {"name": "noop", "data": data, "group": group(i)}
                    for i in range(start, min(n, start + 1000))
                ]
            )

    async def script_cost(
        self, op: Callable[[], Awaitable[Any]], count: int
    ) -> tuple[float, float]:
        """(server µs per script call from commandstats, client round trip µs) over ``count``."""
        before = self.probe.snapshot()
        t0 = time.perf_counter()
        for _ in range(count):
            await op()
        rtt = (time.perf_counter() - t0) / count * 1e6
        work = self.probe.work(before)
        calls = sum(work.calls.get(c, 0) for c in SCRIPT_COMMANDS)
        usec = sum(work.usec.get(c, 0) for c in SCRIPT_COMMANDS)
        return usec / max(1, calls), rtt

    def record_cost(self, metric: str, cost: tuple[float, float]) -> None:
        """``metric`` (server µs in the script) and ``metric + "_rtt"`` (client round trip µs)."""
        self.rec.add(metric, cost[0], "us")
        self.rec.add(f"{metric}_rtt", cost[1], "us")

    def ratio(self, metric: str, numerator: str, denominator: str) -> None:
        by_name = {m.metric: m for m in self.rec.measurements()}
        top, bottom = by_name[numerator].values, by_name[denominator].values
        for a, b in zip(top, bottom, strict=True):
            self.rec.add(metric, a / b if b else None, "ratio")

    # measurements
    async def claim_and_add_vs_backlog(self) -> None:
        """Claim(n=1) and add() cost at a 10^3 and a 10^6 backlog; add into an empty queue."""
        k = min(self.sample, 1_000)  # claims per round: the backlog stays within [N, N + k]
        for backlog in (1_000, self.backlog):
            q = self.queue()
            await self.fill(q, backlog)
            for _ in range(self.rounds):
                await self.fill(q, k)
                self.record_cost(
                    f"claim_us_backlog_{backlog}",
                    await self.script_cost(partial(q.claim, 1, LEASE), k),
                )
            if backlog == self.backlog:
                for _ in range(self.rounds):
                    self.record_cost(
                        f"add_us_backlog_{backlog}",
                        await self.script_cost(partial(q.add, "noop"), k),
                    )
            await q.close()
        q = self.queue()
        for _ in range(self.rounds):
            self.probe.flush()
            self.record_cost("add_us_backlog_0", await self.script_cost(partial(q.add, "noop"), k))
        await q.close()
        self.ratio(
            "claim_cost_ratio_backlog", f"claim_us_backlog_{self.backlog}", "claim_us_backlog_1000"
        )
        self.ratio("add_cost_ratio_backlog", f"add_us_backlog_{self.backlog}", "add_us_backlog_0")

    async def claim_vs_lanes(self) -> None:
        """Claim(n=1) cost with one lane vs many lanes (two waiting jobs per lane)."""
        k = self.sample
        for lanes in (1, self.lanes):
            q = self.queue()
            jobs = max(2 * lanes, k * self.rounds + 1000)
            await self.fill(q, jobs, group=partial(_lane_name, lanes))
            for _ in range(self.rounds):
                self.record_cost(
                    f"claim_us_lanes_{lanes}", await self.script_cost(partial(q.claim, 1, LEASE), k)
                )
            await q.close()
        self.ratio("claim_cost_ratio_lanes", f"claim_us_lanes_{self.lanes}", "claim_us_lanes_1")

    async def claim_vs_capped_lanes(self) -> None:
        """Claim(1) server time with 99 % of the lanes paused or at their cap vs one
        uncapped lane (lane_caps.py; 10^4 lanes, --quick: 2,000)."""
        lanes = 2_000 if self.quick else lane_caps.LANES
        for _ in range(self.runs):
            self.probe.flush()
            found = await asyncio.to_thread(lane_caps.measure, self.url, self.sample, lanes)
            self.rec.add("claim_us_one_lane", found["one_lane_server_us"], "us")
            self.rec.add(f"claim_us_lanes_capped_{lanes}", found["parked_99_server_us"], "us")
            self.rec.add("claim_cost_ratio_lanes_capped", found["ratio_server"], "ratio")

    async def memory_per_job(self) -> None:
        """Server memory per waiting job (INFO memory delta / jobs) less its JSON payload:
        with a 100 B payload at the embedded server's hash-max-listpack-value
        (``memory_*_per_waiting_job``), and at the server's default settings with
        100 B and 1 KiB payloads under each ordering (``…_default_ORDERING_SIZEb``)."""
        n = 5_000 if self.quick else 100_000
        client = self.probe.client
        for _ in range(self.runs):
            per_job = await self._memory_round("composite", 100, n)
            self.rec.add("memory_bytes_per_waiting_job", per_job, "bytes")
            self.rec.add("memory_overhead_bytes_per_waiting_job", per_job - 100, "bytes")
        client.config_set("hash-max-listpack-value", harness.SERVER_DEFAULT_LISTPACK_VALUE)
        try:
            for _ in range(self.runs):
                for ordering, payload in report.MEMORY_CASES:
                    per_job = await self._memory_round(ordering, payload, n)
                    metric = report.memory_metric(ordering, payload)
                    self.rec.add(metric, per_job - payload, "bytes")
        finally:
            client.config_set("hash-max-listpack-value", harness.LISTPACK_VALUE)

    async def _memory_round(self, ordering: str, payload: int, n: int) -> float:
        """Bytes per job of ``n`` waiting jobs whose data is JSON of ``payload`` bytes."""
        data = "x" * (payload - 2)  # JSON-encoded: '"xxx…"' is exactly ``payload`` bytes
        q = self.queue(ordering)
        try:
            await q.add("noop")  # the queue's fixed keys exist before the baseline
            before = self.probe.snapshot()
            await self.fill(q, n, data=data)
            return self.probe.work(before).memory_delta / n
        finally:
            await q.close()

    async def mint_vs_composite(self) -> None:
        """Bulk add rate, add CPU and claim cost under each ordering."""
        n, k = self.bulk, self.sample
        for ordering in ("composite", "mint"):
            for _ in range(self.runs):
                q = self.queue(ordering)
                with self.probe.measure() as box:
                    t0 = time.perf_counter()
                    await self.fill(q, n)
                    rate = n / (time.perf_counter() - t0)
                self.rec.add(f"{ordering}_add_bulk", rate, "jobs/s")
                self.rec.add(f"{ordering}_add_server_cpu_us_per_job", box[0].cpu_us / n, "us/job")
                self.record_cost(
                    f"{ordering}_claim_us", await self.script_cost(partial(q.claim, 1, LEASE), k)
                )
                await q.close()
        self.ratio(
            "mint_vs_composite_add_cpu_ratio",
            "mint_add_server_cpu_us_per_job",
            "composite_add_server_cpu_us_per_job",
        )
        self.ratio("mint_vs_composite_claim_ratio", "mint_claim_us", "composite_claim_us")

    async def lifecycle_batched(self) -> None:
        """add_many + claim(100) + pipelined complete, in one process: server CPU per job."""
        n = self.bulk
        for _ in range(self.runs):
            q = self.queue()
            with self.probe.measure() as box:
                await self.fill(q, n)
                while jobs := await q.claim(100, LEASE):
                    await q.complete_many([(job, None) for job in jobs])
            self.rec.add_work("lifecycle_batched", box[0], n)
            await q.close()

    async def add_single_blocking(self) -> None:
        """add() one at a time with SyncQueue (blocking client), as sync peers add."""
        n = self.sample
        for _ in range(self.runs):
            self.probe.flush()
            rate = await asyncio.to_thread(_sync_adds, self.url, n)
            self.rec.add("add_single_sync", rate, "jobs/s")

    async def round_trip_floor(self) -> None:
        """Plain redis-py PINGs one at a time (asyncio and blocking): the most
        one-at-a-time calls per second any client of this library can make here,
        i.e. the ceiling of every system's add_single."""
        import redis.asyncio

        n = self.sample
        for _ in range(self.rounds):
            client = redis.asyncio.Redis.from_url(self.url)
            await client.ping()
            t0 = time.perf_counter()
            for _ in range(n):
                await client.ping()
            self.rec.add("ping_async", n / (time.perf_counter() - t0), "calls/s")
            await client.aclose()
            self.rec.add("ping_sync", await asyncio.to_thread(_sync_pings, self.url, n), "calls/s")

    async def idle_latency(self) -> None:
        """Add one job at a time to an idle worker; handler start - add start, in ms.

        Over TCP (as every system is measured), and over the same server's unix
        socket (how echomq reaches its embedded server)."""
        n = 60 if self.quick else 300
        transports = [(self.url, "")]
        if self.unix_url and not self.quick:  # --quick stays under 2 minutes
            transports.append((self.unix_url, "_unix"))
        for _ in range(self.runs):
            for url, suffix in transports:
                self.probe.flush()
                q = _queue(url)
                tally = await self._latency_round(q, url, n)
                await q.close()
                if tally is None:
                    continue
                ms = [x * 1000 for x in tally["latencies"]]
                self.rec.add(f"idle_latency{suffix}_p50", harness.percentile(ms, 50), "ms")
                self.rec.add(f"idle_latency{suffix}_p99", harness.percentile(ms, 99), "ms")

    async def latency_under_load(self) -> None:
        """Add → handler start while the worker drains a steady half of its maximum
        (load_latency.py), in ms; the maximum and the rate reached in jobs/s."""
        max_jobs, seconds = (2_000, 2.0) if self.quick else (10_000, 8.0)
        for _ in range(self.runs):
            self.probe.flush()
            found = await load_latency.one_round(self.url, max_jobs, seconds)
            if found is None:
                continue
            ms = found.latencies_ms
            self.rec.add("load_latency_p50", harness.percentile(ms, 50), "ms")
            self.rec.add("load_latency_p99", harness.percentile(ms, 99), "ms")
            self.rec.add("load_latency_max_rate", found.max_rate, "jobs/s")
            self.rec.add("load_latency_rate", found.rate, "jobs/s")
            self.rec.add("load_latency_fraction", found.fraction, "ratio")
            self.rec.add("load_latency_server_calls_per_job", found.calls_per_job, "calls/job")
            self.rec.add("load_latency_server_cpu_us_per_job", found.cpu_us_per_job, "us/job")
            self.rec.add(
                "load_latency_script_calls_per_job", found.script_calls_per_job, "calls/job"
            )
            if found.machine_busy is not None:
                self.rec.add("load_latency_machine_busy", found.machine_busy, "ratio")

    async def wait_latency(self) -> None:
        """A job's final transition → ``wait()`` returns, in ms (wait_latency.py)."""
        n = 100 if self.quick else 300
        for _ in range(self.runs):
            self.probe.flush()
            latencies, _calls = await wait_latency.measure(self.url, n)
            ms = [x * 1000 for x in latencies]
            self.rec.add("wait_latency_p50", harness.percentile(ms, 50), "ms")
            self.rec.add("wait_latency_p99", harness.percentile(ms, 99), "ms")

    async def _latency_round(self, q: Queue, url: str, n: int) -> dict[str, Any] | None:
        import subprocess
        import tempfile
        from pathlib import Path

        result = Path(tempfile.mkdtemp(prefix="emq-bench-")) / "latency.json"
        cmd = [
            sys.executable,
            "-m",
            "echomq_bench",
            "worker",
            "--url",
            url,
            "--mode",
            "latency",
            "--jobs",
            str(n + 1),
            "--result",
            str(result),
        ]
        process = subprocess.Popen(cmd, cwd=Path(__file__).parent, stdin=subprocess.DEVNULL)
        try:
            # warm-up job: the worker is up once it ran (a fixed sleep was too short on a
            # busy machine: jobs then waited for the worker's start-up, not for the doorbell)
            warm = await q.add("noop", {"i": -1, "p": 0})
            await q.wait(warm, timeout=load_latency.START_TIMEOUT)
            await asyncio.sleep(0.05)  # back to blocking on the doorbell
            for seq in range(n):
                await q.add("noop", {"i": seq, "p": 0, "t": time.monotonic()})
                await asyncio.sleep(0.02)  # the worker goes idle (blocks) between jobs
                if result.exists():
                    break
            done = harness.wait_for_file(result, 10, lambda: process.poll() is None)
        finally:
            harness.stop_process(process)
        return harness.read_tally(result) if done else None


def _sync_pings(url: str, n: int) -> float:
    """round trips/s of ``n`` plain redis-py PINGs, each waiting for its reply."""
    import redis

    with redis.Redis.from_url(url) as client:
        client.ping()
        t0 = time.perf_counter()
        for _ in range(n):
            client.ping()
        return n / (time.perf_counter() - t0)


def _sync_adds(url: str, n: int) -> float:
    """jobs/s of ``n`` SyncQueue.add calls, each waiting for its reply."""
    with _sync_queue(url) as queue:
        queue.add("noop")  # connect and load the script first
        t0 = time.perf_counter()
        for seq in range(n):
            queue.add("noop", {"i": seq, "p": 0})
        return n / (time.perf_counter() - t0)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "extras":
        return extras_main(args[1:])
    ordering = "composite"
    with contextlib.suppress(ValueError):
        i = args.index("--ordering")
        ordering = args[i + 1]
        del args[i : i + 2]
    return driver_main(EchoMQ(ordering), args)


def extras_main(argv: Sequence[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="echomq_bench extras")
    parser.add_argument("--url", required=True)
    parser.add_argument("--unix-url", default=None, help="the same server's unix socket")
    parser.add_argument("--label", default="")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated steps to run (default: all)")
    args = parser.parse_args(argv)
    only = [step.strip() for step in args.only.split(",") if step.strip()]
    extras = Extras(
        args.url, args.label, quick=args.quick, runs=args.runs, unix_url=args.unix_url, only=only
    )
    known = {step.__name__ for step in extras.steps()}
    if unknown := sorted(set(only) - known):
        parser.error(f"unknown steps {unknown}; choose from {', '.join(sorted(known))}")
    asyncio.run(extras.run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
