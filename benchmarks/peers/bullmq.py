"""BullMQ's Python package: Queue.add / Queue.addBulk, Worker with concurrency 10.

Priorities: BullMQ ranks 1 (highest) … 2^21; level L is sent as priority L + 1.
Completed jobs are kept like echomq keeps them (the last 1000).
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

import harness
from bullmq import Queue, Worker
from driver import DRAIN_CONCURRENCY, Item, System, main, worker_concurrency

NAME = "bench"
KEEP = {"removeOnComplete": 1000}


class BullMQ(System):
    name = "bullmq"
    module = "peers.bullmq"
    has_bulk = True
    notes = (
        f"Worker concurrency {DRAIN_CONCURRENCY} (sweep: 1-100; priority drain: 1); "
        "removeOnComplete=1000",
        "add_bulk: Queue.addBulk, 1000 jobs per call; priority: opts.priority = level + 1",
    )

    def __init__(self) -> None:
        self.queue: Queue | None = None

    def version(self) -> str:
        return version("bullmq")

    async def open(self, url: str) -> None:
        self.queue = Queue(NAME, {"connection": url})

    async def close(self) -> None:
        if self.queue is not None:
            await self.queue.close()
            self.queue = None

    @staticmethod
    def _opts(level: int) -> dict[str, Any]:
        return {**KEEP, "priority": level + 1} if level else dict(KEEP)

    async def add_one(self, seq: int, level: int) -> None:
        assert self.queue is not None
        await self.queue.add("noop", {"i": seq, "p": level}, self._opts(level))

    async def add_bulk(self, items: Sequence[Item]) -> None:
        assert self.queue is not None
        await self.queue.addBulk(
            [{"name": "noop", "data": {"i": s, "p": p}, "opts": self._opts(p)} for s, p in items]
        )

    async def prefill(self, items: Sequence[Item]) -> None:
        if any(level for _, level in items):
            # every job gets a priority, so level 0 is not left unprioritised
            assert self.queue is not None
            for start in range(0, len(items), 1000):
                await self.queue.addBulk(
                    [
                        {
                            "name": "noop",
                            "data": {"i": s, "p": p},
                            "opts": {**KEEP, "priority": p + 1},
                        }
                        for s, p in items[start : start + 1000]
                    ]
                )
        else:
            await super().prefill(items)

    def run_worker(self, url: str, mode: str, tally: harness.Tally) -> None:
        asyncio.run(_serve(url, worker_concurrency(mode), tally))


async def _serve(url: str, concurrency: int, tally: harness.Tally) -> None:
    async def noop(job: Any, token: str) -> None:
        tally.hit(job.data["p"], job.data["i"])

    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    worker = Worker(NAME, noop, {"connection": url, "concurrency": concurrency, **KEEP})
    await stop.wait()
    await worker.close()


if __name__ == "__main__":
    sys.exit(main(BullMQ()))
