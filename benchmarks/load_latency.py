"""Latency under load (issue 20): add → handler start while the worker drains a
steady half of the rate it can reach. echomq only.

Each round, on the server at ``url``:

1. the maximum: ``max_jobs`` jobs wait, one worker process (``echomq_bench
   worker --mode drain``: ``echomq.Worker`` at concurrency 10, default claim
   batching, as the headline ``drain``) drains them; its rate is taken from the
   first handler start to the last, as ``drain`` is;
2. under load: a fresh worker process with the same settings (mode
   ``latency``); a warm-up job is waited for (``Queue.wait``), then one
   producer offers jobs at LOAD_FRACTION of that rate for ``seconds``: each add
   is sent when it is due, not when the previous one returned (concurrent adds
   share calls, echomq.flows.coalescing), and carries the time it was sent;
   the handler records its start minus that time.

Figures (ms unless said): ``load_latency_p50``, ``load_latency_p99``,
``load_latency_max_rate`` (jobs/s, step 1), ``load_latency_rate`` (jobs/s the
producer reached), ``load_latency_fraction`` (that over the maximum: 0.5
when the producer kept up), and the server's commands and CPU µs per job
under load (``load_latency_server_calls_per_job``, ``…_cpu_us_per_job``: adds
and drain together), which say where the time went when the worker falls
behind.

    python benchmarks/load_latency.py [--server valkey|redis|valkey9] [--runs 3] [--seconds 5]
        [--fraction 0.5]

run.py takes the same figures through :func:`one_round` (echomq_bench.py
extras). A measurement, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import harness  # noqa: E402

from echomq import Queue  # noqa: E402

QUEUE = "bench"  # the queue echomq_bench's worker role serves
LOAD_FRACTION = 0.5
START_TIMEOUT = 60.0  # seconds a worker process may take to start and run its warm-up job


@dataclass(frozen=True, slots=True)
class LoadRound:
    max_rate: float
    rate: float
    latencies_ms: list[float]
    #: the server's commands and CPU µs per job while under load (adds and drain)
    calls_per_job: float
    cpu_us_per_job: float
    #: script calls (adds, claims, completions) per job, and the share of all
    #: CPUs' time the machine was busy under load (None off Linux)
    script_calls_per_job: float
    machine_busy: float | None

    @property
    def fraction(self) -> float:
        return self.rate / self.max_rate


def _start_worker(url: str, mode: str, expected: int, result: Path) -> subprocess.Popen[bytes]:
    """``echomq_bench worker``: echomq.Worker at the headline drain's settings."""
    cmd = [sys.executable, "-m", "echomq_bench", "worker", "--url", url, "--mode", mode]
    cmd += ["--jobs", str(expected), "--result", str(result)]
    return subprocess.Popen(cmd, cwd=HERE, stdin=subprocess.DEVNULL)


def _await_tally(
    process: subprocess.Popen[bytes], result: Path, timeout: float
) -> dict[str, Any] | None:
    try:
        done = harness.wait_for_file(result, timeout, lambda: process.poll() is None)
    finally:
        harness.stop_process(process)
    return harness.read_tally(result) if done else None


async def max_rate(q: Queue, url: str, jobs: int, folder: Path) -> float | None:
    """The worker's drain rate (jobs/s) over ``jobs`` waiting no-op jobs."""
    for start in range(0, jobs, 1000):
        batch = range(start, min(jobs, start + 1000))
        await q.add_many([{"name": "noop", "data": {"i": i, "p": 0}} for i in batch])
    result = folder / "max.json"
    process = _start_worker(url, "drain", jobs, result)
    tally = await asyncio.to_thread(_await_tally, process, result, START_TIMEOUT + jobs / 100)
    if tally is None or tally["last"] <= tally["first"]:
        return None
    return float((tally["count"] - 1) / (tally["last"] - tally["first"]))


def cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs from /proc/stat; None where it is absent."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return None
    idle = fields[3] + fields[4]  # idle, iowait
    return sum(fields) - idle, sum(fields)


def busy_between(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    if before is None or after is None or after[1] == before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


async def offer(q: Queue, rate: float, seconds: float) -> tuple[int, float]:
    """Add ``rate * seconds`` jobs, each sent when due; (jobs, jobs/s reached)."""
    n = max(1, int(rate * seconds))
    adds: list[asyncio.Future[str]] = []
    start = time.monotonic()
    for seq in range(n):
        wait = start + seq / rate - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        data = {"i": seq, "p": 0, "t": time.monotonic()}
        adds.append(asyncio.ensure_future(q.add("noop", data)))
    await asyncio.gather(*adds)
    return n, n / (time.monotonic() - start)


async def one_round(
    url: str, max_jobs: int, seconds: float, fraction: float = LOAD_FRACTION
) -> LoadRound | None:
    """One round on an emptied server (the caller flushes it before); None if a
    worker gave no result."""
    folder = Path(tempfile.mkdtemp(prefix="emq-bench-load-"))
    async with Queue(QUEUE, url) as q:
        top = await max_rate(q, url, max_jobs, folder)
        if top is None:
            return None
        n = max(1, int(top * fraction * seconds))
        result = folder / "load.json"
        process = _start_worker(url, "latency", n + 1, result)
        probe = harness.ServerProbe(url)
        try:
            warm = await q.add("noop", {"i": -1, "p": 0})
            await q.wait(warm, timeout=START_TIMEOUT)  # the worker is up and idle
            with probe.measure() as box:
                cpu_before = cpu_times()
                sent, reached = await offer(q, top * fraction, seconds)
                busy = busy_between(cpu_before, cpu_times())
                tally = await asyncio.to_thread(_await_tally, process, result, 30 + sent / 100)
        finally:
            harness.stop_process(process)
            probe.close()
    if tally is None:
        return None
    work = box[0]
    return LoadRound(
        top,
        reached,
        [x * 1000 for x in tally["latencies"]],
        work.total_calls / sent,
        work.cpu_us / sent,
        work.script_calls / sent,
        busy,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default="valkey", choices=("valkey", "redis", "valkey9"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds under load per round")
    parser.add_argument(
        "--fraction",
        type=float,
        default=LOAD_FRACTION,
        help="the load, as a share of the measured maximum (default 0.5)",
    )
    parser.add_argument("--max-jobs", type=int, default=10_000, help="jobs of the maximum's drain")
    args = parser.parse_args()
    rounds: list[LoadRound] = []
    with harness.BenchServer(args.server) as server:
        probe = harness.ServerProbe(server.url)
        for _ in range(args.runs):
            probe.flush()
            found = asyncio.run(one_round(server.url, args.max_jobs, args.seconds, args.fraction))
            if found is not None:
                rounds.append(found)
        probe.close()
    summary: dict[str, Any] = {
        "bench": "load_latency",
        "server": server.label,
        "runs": len(rounds),
        "p50_ms": [round(harness.percentile(r.latencies_ms, 50), 3) for r in rounds],
        "p99_ms": [round(harness.percentile(r.latencies_ms, 99), 3) for r in rounds],
        "max_rate": [round(r.max_rate) for r in rounds],
        "rate": [round(r.rate) for r in rounds],
        "server_calls_per_job": [round(r.calls_per_job, 2) for r in rounds],
        "server_cpu_us_per_job": [round(r.cpu_us_per_job, 1) for r in rounds],
        "script_calls_per_job": [round(r.script_calls_per_job, 3) for r in rounds],
        "machine_busy": [
            None if r.machine_busy is None else round(r.machine_busy, 3) for r in rounds
        ],
    }
    if rounds:
        summary["p50_ms_median"] = statistics.median(summary["p50_ms"])
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
