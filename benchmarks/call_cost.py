"""Server time of one-job script calls: add of one job, claim(1), complete (issue 20).

Each round, on a private server of this harness, times ``--calls`` calls of
each kind one at a time and divides the scripts' own time (``INFO
commandstats``: fcall + fcall_ro + evalsha + eval, usec / calls) by the
calls:

- ``add_us``: ``add()`` of one job into an emptied queue (events on, the default);
- ``claim_us``: ``claim(1)`` with 1,000 + ``--calls`` jobs waiting;
- ``complete_us``: ``complete()`` of each job those claims leased;
- ``add_events_off_us``: ``add()`` with the stored ``event_stream_length`` at 0
  (``configure``: a setting written into the settings hash by hand lacks its
  letter in the feature word, and since format 3 the scripts would not read it).

Also ``*_commands``: the commands each script call ran inside it (from the same
counters; a figure the machine's load does not stretch), and ``*_cpu_us``: the
server's CPU time per call (``INFO cpu``, user + sys, reading the request and
writing the reply included), which a loaded machine stretches less than the
scripts' time (that is wall time: it includes waiting for a CPU). It prints one JSON line
with the median of ``--rounds`` and every round.
``ECHOMQ_BENCH_BY_SHA=1`` sends the scripts by EVALSHA instead of FCALL. To
compare two versions of echomq, run it under each (``PYTHONPATH=…/src``)
alternately: one process per run, so the runs interleave.

    python benchmarks/call_cost.py [--kind valkey|redis|valkey9] [--rounds 5] [--calls 2000]

This is a measurement, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from typing import Any

import harness

import echomq
from echomq import Queue

QUEUE = "bench"
LEASE = 30.0
BACKLOG = 1000
BY_SHA = os.environ.get("ECHOMQ_BENCH_BY_SHA") == "1"


def _queue(url: str) -> Queue:
    queue = Queue(QUEUE, url)
    queue.sender.scripts.functions = not BY_SHA
    return queue


async def _per_call(
    probe: harness.ServerProbe, op: Callable[[], Awaitable[Any]], n: int
) -> tuple[float, float, float]:
    """Server µs per script call over ``n`` calls of ``op``, the commands each
    script call ran inside it (not stretched by a busy machine), and the
    server's CPU µs per call."""
    before = probe.snapshot()
    for _ in range(n):
        await op()
    work = probe.work(before)
    calls = max(1, work.script_calls)
    return (
        work.script_usec / calls,
        (work.total_calls - work.script_calls) / calls,
        work.cpu_us / calls,
    )


async def one_round(probe: harness.ServerProbe, url: str, n: int) -> dict[str, float]:
    q = _queue(url)
    try:
        probe.flush()
        await q.add("noop")  # the library (or scripts) loaded before timing
        probe.flush()
        add = await _per_call(probe, lambda: q.add("noop"), n)
        probe.flush()
        # stored as configure() stores it: since format 3 a setting counts only
        # with its letter in the queue's feature word (docs/design.md §9)
        await q.configure(event_stream_length=0)
        add_off = await _per_call(probe, lambda: q.add("noop"), n)
        probe.flush()
        for start in range(0, BACKLOG + n, 1000):
            await q.add_many([{"name": "noop"} for _ in range(min(1000, BACKLOG + n - start))])
        leased: list[Any] = []

        async def claim() -> None:
            leased.extend(await q.claim(1, LEASE))

        claim_us = await _per_call(probe, claim, n)
        jobs = iter(leased)

        async def complete() -> None:
            await q.complete(next(jobs), None)

        complete_us = await _per_call(probe, complete, len(leased))
    finally:
        await q.close()
    return {
        "add_us": add[0],
        "claim_us": claim_us[0],
        "complete_us": complete_us[0],
        "add_events_off_us": add_off[0],
        "add_commands": add[1],
        "claim_commands": claim_us[1],
        "complete_commands": complete_us[1],
        "add_cpu_us": add[2],
        "claim_cpu_us": claim_us[2],
        "complete_cpu_us": complete_us[2],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--kind", default="valkey", choices=("valkey", "redis", "valkey9"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--label", default="", help="names the run in the output")
    args = parser.parse_args()
    with harness.probed_server(args.kind) as (server, probe):
        rounds = [asyncio.run(one_round(probe, server.url, args.calls)) for _ in range(args.rounds)]
        result: dict[str, Any] = {
            "label": args.label,
            "server": server.label,
            "echomq": echomq.__file__,
            "form": "EVALSHA" if BY_SHA else "FCALL",
            "calls": args.calls,
            "rounds": args.rounds,
            "load": round(os.getloadavg()[0], 2),
        }
        result.update(harness.medians_of_rounds(rounds))
        print(json.dumps(result))


if __name__ == "__main__":
    main()
