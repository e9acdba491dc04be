"""arq (its own venv: arq pins redis<6): enqueue_job, Worker(max_jobs=10, poll_delay=0.01).

arq has no bulk add and no priorities (its queue is ordered by enqueue time).
Its default poll_delay (0.5 s) caps a drain near 200 jobs/s (BENCH-NOTES), so
``drain`` uses poll_delay=0.01, its fast setting, and ``drain_default_poll``
reports the default on at most 1000 jobs.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

import harness
from arq import Worker, create_pool
from arq.connections import ArqRedis, RedisSettings
from arq.worker import func
from driver import DRAIN_CONCURRENCY, DrainVariant, Item, System, main, worker_concurrency

FAST_POLL = 0.01


class Arq(System):
    name = "arq"
    module = "peers.arq"
    notes = (
        f"Worker max_jobs={DRAIN_CONCURRENCY} (default; sweep: 1-100; priority drain: 1), "
        f"poll_delay={FAST_POLL} "
        "(default 0.5 s: see drain_default_poll)",
        "no bulk add; no priorities (FIFO by enqueue time)",
    )
    variants = (DrainVariant("drain_default_poll", "drain-default-poll", 1_000),)

    def __init__(self) -> None:
        self.pool: ArqRedis | None = None

    def version(self) -> str:
        return version("arq")

    async def open(self, url: str) -> None:
        self.pool = await create_pool(RedisSettings.from_dsn(url))

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.aclose()
            self.pool = None

    async def add_one(self, seq: int, level: int) -> None:
        assert self.pool is not None
        await self.pool.enqueue_job("noop", seq, level)

    async def prefill(self, items: Sequence[Item]) -> None:
        # not measured: concurrent enqueues to load the queue quickly
        for start in range(0, len(items), 200):
            await asyncio.gather(*(self.add_one(s, p) for s, p in items[start : start + 200]))

    def run_worker(self, url: str, mode: str, tally: harness.Tally) -> None:
        async def noop(ctx: dict[str, Any], seq: int, level: int) -> None:
            tally.hit(level, seq)

        worker = Worker(
            functions=[func(noop, name="noop")],
            redis_settings=RedisSettings.from_dsn(url),
            max_jobs=worker_concurrency(mode),
            poll_delay=0.5 if mode == "drain-default-poll" else FAST_POLL,
            handle_signals=True,
        )
        worker.run()


if __name__ == "__main__":
    sys.exit(main(Arq()))
