"""What batches cost (issue 31): the figures docs/lifecycle.md "Batches" quotes.

On a private server (harness.BenchServer):

- server commands of a one-job add, claim(1) and complete: a plain job, and a
  child of an open batch (INFO commandstats, calls summed, the FCALL included);
- a batch of ``--children`` (default 100,000, the most a batch holds): the
  seconds of its adds (add_many in chunks of 5,000), of running it
  (claim(5000) + complete_many until the callbacks came), and one
  batch_status's wall time.

    python benchmarks/batch_cost.py [--server valkey|redis|valkey9] [--children N]

A measurement, not a test: nothing here asserts a figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import harness  # noqa: E402

from echomq import SyncQueue  # noqa: E402

CHUNK = 5000


def calls_of(probe: harness.ServerProbe, run: Any) -> int:
    before = probe.snapshot()
    run()
    return sum(probe.work(before).calls.values())


def per_call(probe: harness.ServerProbe, q: SyncQueue, add: Any) -> dict[str, int]:
    """Commands of add, claim(1) and complete with a backlog of 5 like jobs."""
    for _ in range(5):
        add()
    q.complete(q.claim(1)[0])  # warm up: the library loaded, the ring's turn settled
    out = {"add": calls_of(probe, add)}
    got: list[Any] = []
    out["claim"] = calls_of(probe, lambda: got.extend(q.claim(1)))
    out["complete"] = calls_of(probe, lambda: q.complete(got[0]))
    return out


def big_batch(q: SyncQueue, children: int) -> dict[str, float]:
    started = time.monotonic()
    b = q.batch(on_success={"name": "done"}, on_complete={"name": "done"})
    for first in range(0, children, CHUNK):
        b.add_many([{"name": "child"}] * min(CHUNK, children - first))
    added = time.monotonic()
    b.close()
    status_started = time.perf_counter()
    q.batch_status(b.id)
    status_ms = (time.perf_counter() - status_started) * 1000
    callbacks = 0
    while callbacks < 2:
        jobs = q.claim(CHUNK)
        children_claimed = [(job, None) for job in jobs if job.name == "child"]
        if children_claimed:
            q.complete_many(children_claimed)
        for job in jobs:
            if job.name == "done":
                callbacks += 1
                q.complete(job)
    ran = time.monotonic()
    return {"add_s": added - started, "run_s": ran - added, "status_ms": status_ms}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", default="valkey")
    parser.add_argument("--children", type=int, default=100_000)
    args = parser.parse_args()
    with harness.probed_server(args.server) as (server, probe):
        with SyncQueue("plain", server.url) as plain:
            plain_calls = per_call(probe, plain, lambda: plain.add("job", 1))
        with SyncQueue("batched", server.url) as q:
            b = q.batch(on_complete={"name": "done"})
            child_calls = per_call(probe, q, lambda: b.add("job", 1))
        with SyncQueue("big", server.url) as q:
            big = big_batch(q, args.children)
    line = {
        "benchmark": "batch_cost",
        "server": server.label,
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load1": round(os.getloadavg()[0], 1),
        "plain": plain_calls,
        "batch_child": child_calls,
        "children": args.children,
        **{k: round(v, 2) for k, v in big.items()},
    }
    print(json.dumps(line))
    print(f"commands   plain  batch child   ({server.label})")
    for call in ("add", "claim", "complete"):
        print(f"{call:9} {plain_calls[call]:6} {child_calls[call]:12}")
    print(
        f"{args.children:,} children: added in {big['add_s']:.1f} s, run in {big['run_s']:.1f} s,"
        f" batch_status {big['status_ms']:.2f} ms (load {line['load1']})"
    )


if __name__ == "__main__":
    main()
