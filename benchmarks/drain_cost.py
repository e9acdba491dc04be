"""Server CPU per drained job at worker concurrency 10, with its make-up (issue 20).

Each round, on a private server of this harness: load ``--jobs`` no-op jobs
with ``add_many``, then drain them with ``echomq.Worker`` at ``--concurrency``
(the headline drain's 10) in this process, and read the server's counters
around the drain (start-up and shutdown of the worker included, as in the
headline ``drain_server_cpu_us_per_job``):

- ``cpu_us_per_job``: the server's CPU (``used_cpu_user + used_cpu_sys``) per job;
- ``script_us_per_job``: the scripts' own time (``commandstats`` of fcall,
  evalsha: nested commands included) per job;
- ``commands_per_job``: every command the server ran (nested ones included) per job;
- ``claims`` / ``completes``: script calls of each kind, and the jobs per call
  (counted in the client: ``Queue.claim``, ``wait_and_claim``, ``complete_many``).

It prints one JSON line with the median of ``--rounds`` and every round. To
compare two versions of echomq, run it under each (``PYTHONPATH=…/src``)
alternately: one process per run, so the runs interleave.

    python benchmarks/drain_cost.py [--kind valkey|redis|valkey9] [--rounds 3] [--jobs 5000]

This is a measurement, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections import Counter
from typing import Any

import harness

import echomq
from echomq import Job, Queue

QUEUE = "bench"
LEASE = 30.0


class _Counting:
    """Counts the worker's script calls and the jobs each carries (wraps the queue's methods)."""

    def __init__(self, queue: Queue) -> None:
        self.claims: Counter[int] = Counter()
        self.completes: Counter[int] = Counter()
        claim, wait_and_claim, complete_many = (
            queue.claim,
            queue.wait_and_claim,
            queue.complete_many,
        )

        async def counted_claim(n: int, lease: float) -> Any:
            jobs = await claim(n, lease)
            self.claims[len(jobs)] += 1
            return jobs

        async def counted_wait(*args: Any, **kwargs: Any) -> Any:
            woke_by, jobs = await wait_and_claim(*args, **kwargs)
            self.claims[len(jobs)] += 1
            return woke_by, jobs

        async def counted_complete(items: Any, **kwargs: Any) -> Any:
            self.completes[len(items)] += 1
            return await complete_many(items, **kwargs)

        queue.claim = counted_claim  # type: ignore[method-assign]
        queue.wait_and_claim = counted_wait  # type: ignore[method-assign]
        queue.complete_many = counted_complete  # type: ignore[method-assign]


async def drain_noops(queue: Queue, n: int, *, concurrency: int, lease: float) -> None:
    """Run ``echomq.Worker`` on ``queue`` until it has run ``n`` "noop" jobs, then stop it
    (its start-up and shutdown included: measure around this call)."""
    done = asyncio.Event()
    seen = 0

    async def noop(job: Job) -> None:
        nonlocal seen
        seen += 1
        if seen >= n:
            done.set()

    worker = echomq.Worker(queue, {"noop": noop}, concurrency=concurrency, lease=lease)
    running = asyncio.ensure_future(worker.run(install_signals=False))
    await done.wait()
    worker.stop()
    await running


def _per_call(counts: Counter[int]) -> tuple[int, float]:
    calls = sum(counts.values())
    jobs = sum(size * times for size, times in counts.items())
    return calls, jobs / max(1, calls)


async def one_round(
    probe: harness.ServerProbe, url: str, n: int, concurrency: int
) -> dict[str, float]:
    probe.flush()
    queue = Queue(QUEUE, url)
    try:
        for start in range(0, n, 1000):
            await queue.add_many(
                [
                    {"name": "noop", "data": {"p": 0, "i": i}}
                    for i in range(start, min(n, start + 1000))
                ]
            )
        counting = _Counting(queue)
        before = probe.snapshot()
        await drain_noops(queue, n, concurrency=concurrency, lease=LEASE)
        work = probe.work(before)
    finally:
        await queue.close()
    claims, per_claim = _per_call(counting.claims)
    completes, per_complete = _per_call(counting.completes)
    return {
        "cpu_us_per_job": work.cpu_us / n,
        "script_us_per_job": work.script_usec / n,
        "commands_per_job": work.total_calls / n,
        "script_calls_per_job": work.script_calls / n,
        "claims": claims,
        "jobs_per_claim": per_claim,
        "completes": completes,
        "jobs_per_complete": per_complete,
        "nested_us_per_job": sum(
            us for name, us in work.usec.items() if name not in harness.SCRIPT_COMMANDS
        )
        / n,
        **{f"per_job_{name}": count / n for name, count in work.top(12)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--kind", default="valkey", choices=("valkey", "redis", "valkey9"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--label", default="", help="names the run in the output")
    args = parser.parse_args()
    with harness.probed_server(args.kind) as (server, probe):
        rounds = [
            asyncio.run(one_round(probe, server.url, args.jobs, args.concurrency))
            for _ in range(args.rounds)
        ]
        result: dict[str, Any] = {
            "label": args.label,
            "server": server.label,
            "echomq": echomq.__file__,
            "jobs": args.jobs,
            "concurrency": args.concurrency,
            "rounds": args.rounds,
            "load": round(os.getloadavg()[0], 2),
        }
        result.update(harness.medians_of_rounds(rounds, lambda key: not key.startswith("per_job_")))
        print(json.dumps(result))


if __name__ == "__main__":
    main()
