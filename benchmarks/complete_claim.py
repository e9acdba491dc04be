"""A worker's completion and its next claim in one call, or apart (issue 29).

The worker at concurrency 1 (``echomq.worker.worker.COMPLETE_AND_CLAIM_UP_TO``)
records a finished job and claims the job for the slot it frees with one
``completeClaim`` call; above it, completions are coalesced into
``completeMany`` calls and claims go apart. This measures both ways at
concurrency 1, 10 and 50: each round drains ``--jobs`` no-op jobs (loaded
with ``add_many`` first) with ``echomq.Worker`` in this process, on a private
Valkey 8.1 (``--kind``), once with the combined call ("combined") and once
without ("apart"), the two in alternating order round by round (the machine
is shared: a pair of runs sees the same load), and reads:

- ``jobs_per_s``: jobs drained per second of wall time (the worker's start
  and stop included);
- ``cpu_us_per_job``: the server's CPU (INFO cpu, user + sys) per job;
- ``script_us_per_job``: the scripts' own time (INFO commandstats, fcall) per job;
- ``script_calls_per_job`` and ``commands_per_job``: FCALLs, and every command
  the server ran (nested ones included), per job.

Each figure is the median of ``--rounds`` rounds; ``ratio`` is combined over
apart per round, then its median (paired). ``--write-results`` puts the table
into benchmarks/RESULTS.md (section "complete_claim").

    python benchmarks/complete_claim.py [--rounds 7] [--jobs 3000] [--write-results]

This is a measurement, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from typing import Any

import harness

import echomq
import echomq.worker.worker as worker_module
from echomq import Job, Queue

QUEUE = "bench"
LEASE = 30.0
CONCURRENCIES = (1, 10, 50)
VARIANTS = {"combined": 1_000_000, "apart": 0}  # COMPLETE_AND_CLAIM_UP_TO for each
START = "<!-- complete_claim:start -->"
END = "<!-- complete_claim:end -->"
METRICS = ("jobs_per_s", "cpu_us_per_job", "script_us_per_job", "script_calls_per_job")


async def drain(url: str, n: int, concurrency: int) -> float:
    """Load ``n`` no-op jobs, then drain them with a Worker; seconds the drain took."""
    queue = Queue(QUEUE, url)
    try:
        for start in range(0, n, 1000):
            await queue.add_many(
                [{"name": "noop", "data": i} for i in range(start, min(n, start + 1000))]
            )
        done = asyncio.Event()
        seen = 0

        async def noop(job: Job) -> None:
            nonlocal seen
            seen += 1
            if seen >= n:
                done.set()

        worker = echomq.Worker(
            queue, {"noop": noop}, concurrency=concurrency, lease=LEASE, log_jobs=False
        )
        began = time.perf_counter()
        running = asyncio.ensure_future(worker.run(install_signals=False))
        await done.wait()
        worker.stop()
        await running
        return time.perf_counter() - began
    finally:
        await queue.close()


def one_run(
    probe: harness.ServerProbe, url: str, n: int, concurrency: int, variant: str
) -> dict[str, float]:
    probe.flush()
    worker_module.COMPLETE_AND_CLAIM_UP_TO = VARIANTS[variant]
    before = probe.snapshot()
    took = asyncio.run(drain(url, n, concurrency))
    # the loading add_many calls are in the window too: the same in both variants
    work = probe.work(before)
    return {
        "jobs_per_s": n / took,
        "cpu_us_per_job": work.cpu_us / n,
        "script_us_per_job": work.script_usec / n,
        "script_calls_per_job": work.script_calls / n,
        "commands_per_job": work.total_calls / n,
    }


def measure(kind: str, rounds: int, n: int, concurrencies: list[int]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with harness.probed_server(kind) as (server, probe):
        for concurrency in concurrencies:
            runs: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
            for r in range(rounds):
                order = list(VARIANTS) if r % 2 == 0 else list(reversed(VARIANTS))
                for variant in order:
                    runs[variant].append(one_run(probe, server.url, n, concurrency, variant))
            row: dict[str, Any] = {}
            for variant, got in runs.items():
                row[variant] = {key: statistics.median(run[key] for run in got) for key in got[0]}
                row[variant]["all_jobs_per_s"] = [round(run["jobs_per_s"]) for run in got]
            row["ratio"] = {
                key: statistics.median(
                    c[key] / a[key] for c, a in zip(runs["combined"], runs["apart"], strict=True)
                )
                for key in METRICS
            }
            results[str(concurrency)] = row
        return {"server": server.label, "jobs": n, "rounds": rounds, "results": results}


def render(report: dict[str, Any]) -> str:
    lines = [
        START,
        "### A completion and the next claim in one call (benchmarks/complete_claim.py)",
        "",
        f"{report['server']}, {report['jobs']} no-op jobs drained per run by one Worker, "
        f"{report['rounds']} paired runs per concurrency (the two variants alternating "
        f"first), load average {report['load']} at the start; medians. *combined*: each "
        "finished job's `completeClaim` call also claims the job for its slot; *apart*: "
        "coalesced `completeMany` calls and separate claims. Server CPU is INFO cpu "
        "(user + sys) per job, script time INFO commandstats' fcall usec per job (the "
        "loading `add_many` calls included in both).",
        "",
        "| concurrency | variant | jobs/s | server CPU µs/job | script µs/job "
        "| FCALLs/job | commands/job |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for concurrency, row in report["results"].items():
        for variant in VARIANTS:
            v = row[variant]
            lines.append(
                f"| {concurrency} | {variant} | {v['jobs_per_s']:,.0f} | "
                f"{v['cpu_us_per_job']:.1f} | {v['script_us_per_job']:.1f} | "
                f"{v['script_calls_per_job']:.2f} | {v['commands_per_job']:.1f} |"
            )
        ratio = row["ratio"]
        lines.append(
            f"| {concurrency} | combined ÷ apart (paired median) | "
            f"{ratio['jobs_per_s']:.3f} | {ratio['cpu_us_per_job']:.3f} | "
            f"{ratio['script_us_per_job']:.3f} | {ratio['script_calls_per_job']:.3f} | |"
        )
    lines += ["", END]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--kind", default="valkey", choices=("valkey", "redis", "valkey9"))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, nargs="*", default=list(CONCURRENCIES))
    parser.add_argument("--write-results", action="store_true")
    args = parser.parse_args()
    load = round(os.getloadavg()[0], 2)
    report = measure(args.kind, args.rounds, args.jobs, args.concurrency)
    report["load"] = load
    if args.write_results:
        harness.write_results_section(START, END, render(report))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
