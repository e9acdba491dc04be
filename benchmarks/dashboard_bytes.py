"""Bytes the server sends for one dashboard refresh and one sampler tick, with large jobs.

    python benchmarks/dashboard_bytes.py            # print the figures
    python benchmarks/dashboard_bytes.py --write    # also rewrite the block in docs/dashboard.md

A private Valkey (benchmarks/harness.py) gets one queue with 50 jobs in each
of waiting, active, completed and dead, every job with a 500 KiB payload, the
completed ones a 500 KiB result, the dead ones a 100 KiB error and a 100 KiB
traceback. The dashboard app runs in this process (Starlette's TestClient,
its sampler set to one tick an hour so that only what is measured runs).

- **refresh**: the requests the page makes every ``--interval`` seconds with
  the queue open: the queue list, the queue view, a page of 50 waiting jobs,
  a page of 50 dead jobs and the audit list.
- **sampler tick**: what the dashboard reads every ``--interval`` seconds even
  with no browser open (totals, and the active, completed and dead jobs for
  the claim latency histogram).
- **whole records**: the same three lists read as whole records, which is
  what the dashboard did before it read summaries (issue 14).

Bytes are the server's ``total_net_output_bytes`` (INFO stats) before and
after, less what the INFO replies themselves add.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import warnings
from pathlib import Path

import redis

with warnings.catch_warnings():  # starlette would rather have httpx2; httpx works
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from echomq import Queue, SyncQueue
from echomq.web.app import create_app

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import BenchServer

DOCS = Path(__file__).resolve().parents[1] / "docs" / "dashboard.md"
BEGIN, END = "<!-- dashboard-bytes:begin -->", "<!-- dashboard-bytes:end -->"
QUEUE = "bytes-demo"
PER_STATE = 50
PAYLOAD = 500 * 1024
ERROR = 100 * 1024


def fill(q: SyncQueue) -> None:
    blob = {"blob": "x" * PAYLOAD}
    for _ in range(3):  # active, then completed, then dead
        q.add_many([{"name": "big", "data": blob, "max_attempts": 1} for _ in range(PER_STATE)])
    jobs = q.claim(3 * PER_STATE, lease=3600)
    for job in jobs[PER_STATE : 2 * PER_STATE]:
        q.complete(job, blob)
    for job in jobs[2 * PER_STATE :]:
        q.fail(job, "E" * ERROR, "T" * ERROR, retry=False)
    q.add_many([{"name": "big", "data": blob} for _ in range(PER_STATE)])  # waiting


class Meter:
    """total_net_output_bytes, corrected for the INFO replies that read it."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        first, second = self._read(), self._read()
        self.info_cost = second - first

    def _read(self) -> int:
        return int(self.client.info("stats")["total_net_output_bytes"])

    def since(self, before: int) -> int:
        return self._read() - before - self.info_cost

    def now(self) -> int:
        return self._read()


def measure(url: str) -> dict[str, int]:
    client = redis.Redis.from_url(url)
    meter = Meter(client)
    app = create_app(url, [QUEUE], interval=3600.0)
    base = f"/api/queues/{QUEUE}"
    refresh = [
        "/api/queues",
        base,
        base + "/jobs?state=waiting&count=50&offset=0&group=(default)",
        base + "/jobs?state=dead&count=50&offset=0",
        "/api/audit",
    ]
    with TestClient(app) as http:
        for path in refresh:  # warm up: scripts loaded, first sampler tick done
            http.get(path).raise_for_status()
        before = meter.now()
        for path in refresh:
            http.get(path).raise_for_status()
        page = meter.since(before)
    tick = asyncio.run(sampler_tick(url, meter))
    whole = asyncio.run(whole_records(url, meter))
    client.close()
    return {"refresh": page, "tick": tick, "whole": whole}


async def sampler_tick(url: str, meter: Meter) -> int:
    from echomq import Queue
    from echomq.web.metrics import ClaimLatency
    from echomq.web.registry import QueueRegistry
    from echomq.web.sampler import Sampler, Throughput

    home = Queue(QUEUE, url)
    registry = QueueRegistry(home, [QUEUE])
    await registry.refresh()
    sampler = Sampler(registry, Throughput(600, 2), ClaimLatency(), 2)
    await sampler.tick()  # warm up
    before = meter.now()
    await sampler.tick()
    sent = meter.since(before)
    await home.close()
    return sent


async def whole_records(url: str, meter: Meter) -> int:
    """The three lists of one tick read as whole records (the former behaviour)."""
    q = Queue(QUEUE, url)
    await q.jobs("dead", count=1)  # warm up
    before = meter.now()
    for state in ("active", "completed", "dead"):
        await q.jobs(state, count=PER_STATE)
    sent = meter.since(before)
    await q.close()
    return sent


def block(figures: dict[str, int]) -> str:
    mb = 1_000_000
    return "\n".join(
        [
            BEGIN,
            f"With {PER_STATE} jobs in each of waiting, active, completed and dead, every one "
            f"carrying a {PAYLOAD // 1024} KiB payload (results {PAYLOAD // 1024} KiB, dead "
            f"jobs' errors and tracebacks {ERROR // 1024} KiB each), the server sends "
            f"**{figures['refresh']:,} bytes** for one page refresh (queue list, queue view, "
            f"a page of 50 waiting and 50 dead jobs, the audit list) and "
            f"**{figures['tick']:,} bytes** for one sampler tick. Reading the sampler's three "
            f"lists as whole records, as the dashboard once did, costs "
            f"{figures['whole'] / mb:,.1f} MB per tick. (Measured by "
            "`python benchmarks/dashboard_bytes.py --write` on a private Valkey.)",
            END,
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite docs/dashboard.md")
    args = parser.parse_args()
    with BenchServer("valkey") as server:
        q = SyncQueue(QUEUE, server.url)
        fill(q)
        q.close()
        figures = measure(server.url)
    text = block(figures)
    print(text)
    if args.write:
        docs = DOCS.read_text(encoding="utf-8")
        head, _, rest = docs.partition(BEGIN)
        _, _, tail = rest.partition(END)
        if not rest:
            raise SystemExit(f"{DOCS} has no {BEGIN} … {END} block")
        DOCS.write_text(head + text + tail, encoding="utf-8")


if __name__ == "__main__":
    main()
