"""Wait latency: a job's final transition → ``await q.wait(job_id)`` returns.

One asyncio Queue waits for a job; once its wait is registered on the
server, another client (a SyncQueue in a thread) claims the job and
completes it. Measured per job: from the moment the completing call is sent
to the moment ``wait`` returns, so the figure includes the complete call's
own round trip and script (an upper bound on final transition → return).
The transition publishes the id on the queue's shard channel, the waiter's
one subscription wakes it, and it reads the job in one more call.

    python benchmarks/wait_latency.py                 # 300 jobs, private Valkey
    python benchmarks/wait_latency.py --jobs 1000 --server redis
    python benchmarks/wait_latency.py --url redis://host:6379/0

Prints JSON lines (``wait_latency_p50``, ``wait_latency_p99`` in ms, and
``complete_call_p50`` for scale) like run.py's, which takes the first two
through :func:`measure` (echomq_bench.py extras).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import queue as threadq
import statistics
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import harness  # noqa: E402

from echomq import Queue, SyncQueue  # noqa: E402
from echomq.keys import QueueKeys  # noqa: E402

QUEUE = "bench-wait"


def completer(url: str, jobs: threadq.Queue[str | None], sent: threadq.Queue[float]) -> None:
    """Claim and complete each job it is told of; report when each complete was sent."""
    with SyncQueue(QUEUE, url) as q:
        while (job_id := jobs.get()) is not None:
            [job] = q.claim(1)
            assert job.id == job_id
            started = time.monotonic()
            q.complete(job, {"n": 1})
            sent.put(started)
            sent.put(time.monotonic() - started)


async def measure(url: str, count: int) -> tuple[list[float], list[float]]:
    jobs: threadq.Queue[str | None] = threadq.Queue()
    sent: threadq.Queue[float] = threadq.Queue()
    worker = threading.Thread(target=completer, args=(url, jobs, sent), daemon=True)
    worker.start()
    latencies, calls = [], []
    waiters = QueueKeys(QUEUE).waiters
    async with Queue(QUEUE, url) as q:
        await q.drop()
        client = await q.client()
        for _ in range(count):
            job_id = await q.add("bench")
            waiting = asyncio.create_task(q.wait(job_id, timeout=10))
            while await client.zscore(waiters, job_id) is None:  # registered: go
                await asyncio.sleep(0.001)
            jobs.put(job_id)
            await waiting
            woke = time.monotonic()
            started = await asyncio.to_thread(sent.get)
            calls.append(await asyncio.to_thread(sent.get))
            latencies.append(woke - started)
        await q.drop()
    jobs.put(None)
    worker.join()
    return latencies, calls


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--server", default="valkey", choices=("valkey", "redis", "valkey9"))
    parser.add_argument("--url", help="use this server instead of a private one")
    args = parser.parse_args()
    server = None if args.url else harness.BenchServer(args.server).start()
    try:
        url = args.url or server.url  # type: ignore[union-attr]
        label = args.url or server.label  # type: ignore[union-attr]
        latencies, calls = asyncio.run(measure(url, args.jobs))
    finally:
        if server is not None:
            server.stop()
    for metric, value in (
        ("wait_latency_p50", percentile(latencies, 0.50)),
        ("wait_latency_p99", percentile(latencies, 0.99)),
        ("complete_call_p50", statistics.median(calls)),
    ):
        row = {
            "system": "echomq",
            "metric": metric,
            "value": round(value * 1000, 3),
            "unit": "ms",
            "runs": len(latencies),
            "server": label,
        }
        print(json.dumps(row))


if __name__ == "__main__":
    main()
