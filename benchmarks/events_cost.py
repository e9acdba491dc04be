"""The server CPU the event stream adds to a job's lifecycle (issue 15: at most +5 µs).

The batched lifecycle of echomq_bench.py (``lifecycle_batched``: add_many of
1,000, claim(100), one complete_many per claim) on a private server of this
harness, with the queue's stored setting ``event_stream_length`` at 0 (no
events written) and absent (the default, 10,000), runs interleaved; server
CPU per job from ``INFO cpu`` around each run (harness.ServerProbe), medians
reported, with the per-command figures of ``INFO commandstats``.

    python benchmarks/events_cost.py                 # valkey, 20,000 jobs, 5 runs each
    python benchmarks/events_cost.py --kind redis --runs 3

This is a measurement, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics

import harness

from echomq import Queue
from echomq.keys import QueueKeys

QUEUE = "bench"
LEASE = 30.0
BATCH = 1000
CLAIM = 100


async def lifecycle(url: str, n: int, single: bool = False) -> None:
    """The batched lifecycle, or (``single``) one job per call: add, claim(1), complete."""
    batch, claim = (1, 1) if single else (BATCH, CLAIM)
    q = Queue(QUEUE, url)
    try:
        for start in range(0, n, batch):
            await q.add_many([{"name": "noop"} for _ in range(min(batch, n - start))])
        while jobs := await q.claim(claim, LEASE):
            await q.complete_many([(job, None) for job in jobs])
    finally:
        await q.close()


def one_run(
    probe: harness.ServerProbe, url: str, n: int, length: int | None, single: bool
) -> tuple[float, float]:
    """Server CPU (µs) per job of one lifecycle of ``n`` jobs, and the scripts'
    own time per job (commandstats: fcall, fcall_ro, evalsha, eval)."""
    probe.flush()
    if length is not None:
        probe.client.hset(QueueKeys(QUEUE).settings, "event_stream_length", length)
    with probe.measure() as box:
        asyncio.run(lifecycle(url, n, single))
    work = box[0]
    return work.cpu_us / n, work.script_usec / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--kind", default="valkey", choices=("valkey", "redis", "valkey9"))
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--single", action="store_true", help="one job per call (add, claim(1), complete)"
    )
    args = parser.parse_args()
    with harness.probed_server(args.kind) as (server, probe):
        asyncio.run(lifecycle(server.url, 1000))  # warm-up: scripts loaded
        off: list[float] = []
        on: list[float] = []
        off_scripts: list[float] = []
        on_scripts: list[float] = []
        for _ in range(args.runs):
            cpu, scripts = one_run(probe, server.url, args.jobs, 0, args.single)
            off.append(cpu)
            off_scripts.append(scripts)
            cpu, scripts = one_run(probe, server.url, args.jobs, None, args.single)
            on.append(cpu)
            on_scripts.append(scripts)
        result = {
            "server": server.label,
            "jobs": args.jobs,
            "lifecycle": "single" if args.single else "batched",
            "runs": args.runs,
            "events_off_us_per_job": round(statistics.median(off), 2),
            "events_on_us_per_job": round(statistics.median(on), 2),
            "added_us_per_job": round(statistics.median(on) - statistics.median(off), 2),
            "scripts_off_us_per_job": round(statistics.median(off_scripts), 2),
            "scripts_on_us_per_job": round(statistics.median(on_scripts), 2),
            "added_min_us_per_job": round(min(on) - min(off), 2),
            "off_runs": [round(x, 2) for x in off],
            "on_runs": [round(x, 2) for x in on],
        }
        print(json.dumps(result))


if __name__ == "__main__":
    main()
