"""What a find() costs the server in a large queue (issue 30's find target).

A private server (harness.BenchServer) gets one queue of ``--jobs`` waiting
jobs (default 10^6), each tagged ``customer=<i mod --customers>`` (default
10^4 customers: 100 jobs each) and ``plan=pro`` or ``plan=free`` (half
each). Then each query below runs ``--calls`` times with a random customer,
and the server time of each call (the ``usec`` of ``FCALL_RO`` in INFO
commandstats, read before and after that one call) is reported as median,
p90 and max, in ms:

- ``customer``: ``find({"customer": c}, count=50)`` (the target: ≤ 5 ms);
- ``customer+plan``: two tags, the smaller index drives;
- ``customer, state=waiting``: a state filter every job passes;
- ``customer, state=dead``: a state filter no job passes (the whole index
  of the customer is looked at, within the per-call budget);
- ``plan, page 1`` / ``plan, page 50``: a tag half the queue carries, the
  first page and the page the cursor reaches after 49 pages;
- ``plan, state=dead (budget)``: that tag with a filter no job passes: the
  worst case, one call looks at its whole budget (1,000 entries) and
  returns an empty page with a cursor;
- ``jobs(waiting) page 50``: a state listing by cursor, 50 pages deep.

The memory the tag indexes take is reported per job (``used_memory`` of the
filled queue less the same queue filled without tags).

    python benchmarks/find_cost.py [--server valkey|redis|valkey9] [--jobs N]

A measurement, not a test: nothing here asserts a figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import harness  # noqa: E402

from echomq import Queue  # noqa: E402

CHUNK = 1000


async def fill(q: Queue, jobs: int, customers: int, *, tagged: bool) -> None:
    for start in range(0, jobs, CHUNK):
        items: list[Any] = []
        for i in range(start, min(jobs, start + CHUNK)):
            item: dict[str, Any] = {"name": "invoice", "data": i}
            if tagged:
                item["tags"] = {"customer": str(i % customers), "plan": ("pro", "free")[i % 2]}
            items.append(item)
        await q.add_many(items)


async def timed(probe: harness.ServerProbe, call: Callable[[], Awaitable[Any]]) -> float:
    """One call's server time in ms (the script commands' usec)."""
    before = probe.snapshot()
    await call()
    return probe.work(before).script_usec / 1000


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_ms": round(statistics.median(ordered), 3),
        "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))], 3),
        "max_ms": round(ordered[-1], 3),
    }


async def deep_cursor(pages: int, page: Callable[[str], Awaitable[Any]]) -> str:
    cursor = ""
    for _ in range(pages):
        result = await page(cursor)
        if result.cursor is None:
            break
        cursor = result.cursor
    return cursor


async def run(kind: str, jobs: int, customers: int, calls: int) -> dict[str, Any]:
    rng = random.Random(7)
    with harness.probed_server(kind) as (server, probe):
        async with Queue("plain", server.url) as q:
            await q.add("x")
            base = probe.snapshot().memory
            await fill(q, jobs, customers, tagged=False)
            untagged = probe.snapshot().memory - base
        probe.flush()
        async with Queue("find", server.url) as q:
            await q.add("x")
            base = probe.snapshot().memory
            started = time.monotonic()
            await fill(q, jobs, customers, tagged=True)
            fill_s = time.monotonic() - started
            tagged = probe.snapshot().memory - base

            def customer() -> str:
                return str(rng.randrange(customers))

            plan_cursor = await deep_cursor(49, lambda c: q.find({"plan": "pro"}, cursor=c))
            list_cursor = await deep_cursor(49, lambda c: q.jobs("waiting", cursor=c, count=50))
            queries: dict[str, Callable[[], Awaitable[Any]]] = {
                "customer": lambda: q.find({"customer": customer()}),
                "customer+plan": lambda: q.find({"customer": customer(), "plan": "pro"}),
                "customer, state=waiting": lambda: q.find(
                    {"customer": customer()}, state="waiting"
                ),
                "customer, state=dead": lambda: q.find({"customer": customer()}, state="dead"),
                "plan, page 1": lambda: q.find({"plan": "pro"}),
                "plan, state=dead (budget)": lambda: q.find({"plan": "pro"}, state="dead"),
                "plan, page 50": lambda: q.find({"plan": "pro"}, cursor=plan_cursor),
                "jobs(waiting) page 50": lambda: q.jobs("waiting", cursor=list_cursor, count=50),
            }
            results: dict[str, Any] = {}
            for label, query in queries.items():
                samples = [await timed(probe, query) for _ in range(calls)]
                results[label] = summary(samples)
    return {
        "server": server.label,
        "jobs": jobs,
        "customers": customers,
        "calls_per_query": calls,
        "fill_seconds": round(fill_s, 1),
        "tag_index_bytes_per_job": round((tagged - untagged) / jobs, 1),
        "queries": results,
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "python": platform.python_version(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="valkey", choices=("valkey", "redis", "valkey9"))
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--customers", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    result = asyncio.run(run(args.server, args.jobs, args.customers, args.calls))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
