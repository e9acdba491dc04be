"""SAQ: Queue.enqueue, Worker(concurrency=10) (its default).

SAQ has no bulk add, and job priorities only on its Postgres queue: the
Redis queue is FIFO.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from importlib.metadata import version
from typing import Any

import harness
from driver import DRAIN_CONCURRENCY, Item, System, main, worker_concurrency
from saq import Queue, Worker


async def noop(ctx: dict[str, Any], *, seq: int, level: int) -> None:
    harness.current().hit(level, seq)


class Saq(System):
    name = "saq"
    module = "peers.saq"
    notes = (
        f"Worker concurrency {DRAIN_CONCURRENCY} (default; sweep: 1-100; priority drain: 1)",
        "no bulk add; no priorities on Redis (FIFO)",
    )

    def __init__(self) -> None:
        self.queue: Any = None

    def version(self) -> str:
        return version("saq")

    async def open(self, url: str) -> None:
        self.queue = Queue.from_url(url, name="bench")
        await self.queue.connect()

    async def close(self) -> None:
        if self.queue is not None:
            await self.queue.disconnect()
            self.queue = None

    async def add_one(self, seq: int, level: int) -> None:
        await self.queue.enqueue("noop", seq=seq, level=level)

    async def prefill(self, items: list[Item]) -> None:  # type: ignore[override]
        for start in range(0, len(items), 200):
            await asyncio.gather(*(self.add_one(s, p) for s, p in items[start : start + 200]))

    def run_worker(self, url: str, mode: str, tally: harness.Tally) -> None:
        asyncio.run(_serve(url, worker_concurrency(mode)))


async def _serve(url: str, concurrency: int) -> None:
    queue = Queue.from_url(url, name="bench")
    worker = Worker(queue, functions=[noop], concurrency=concurrency)
    running = asyncio.ensure_future(worker.start())
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await worker.stop()
    running.cancel()


if __name__ == "__main__":
    sys.exit(main(Saq()))
