"""RQ: Queue.enqueue / Queue.enqueue_many, SimpleWorker (its fast path: no fork per job).

RQ has no job priorities; its docs' way is one queue per priority, listed in
order to the worker, so the priority drain uses queues p0 … p3.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.metadata import version

import harness
from driver import LEVELS, Item, System, main
from redis import Redis
from rq import Queue, SimpleWorker

FUNC = "peers.rq.noop"


def noop(seq: int, level: int) -> None:
    harness.current().hit(level, seq)


class RQ(System):
    name = "rq"
    module = "peers.rq"
    has_bulk = True
    blocking_add = True
    notes = (
        "SimpleWorker (one job at a time, no fork); default result_ttl; RQ has no "
        "in-process concurrency, so drain and every drain_sweep level run one job at a time",
        "add_bulk: Queue.enqueue_many (one pipeline per 1000 jobs); "
        "priority: one queue per level, worker listens to p0..p3 in order",
    )

    def __init__(self) -> None:
        self.redis: Redis | None = None
        self.queues: list[Queue] = []

    def version(self) -> str:
        return version("rq")

    async def open(self, url: str) -> None:
        self.redis = Redis.from_url(url)
        self.queues = [Queue(f"p{level}", connection=self.redis) for level in range(LEVELS)]

    async def close(self) -> None:
        if self.redis is not None:
            self.redis.close()
            self.redis = None

    async def add_one(self, seq: int, level: int) -> None:
        self.queues[level].enqueue(FUNC, seq, level)

    async def add_bulk(self, items: Sequence[Item]) -> None:
        by_level: dict[int, list[Item]] = {}
        for item in items:
            by_level.setdefault(item[1], []).append(item)
        for level, chunk in by_level.items():
            self.queues[level].enqueue_many([Queue.prepare_data(FUNC, (s, p)) for s, p in chunk])

    async def prefill(self, items: Sequence[Item]) -> None:
        for start in range(0, len(items), 1000):
            await self.add_bulk(items[start : start + 1000])

    def run_worker(self, url: str, mode: str, tally: harness.Tally) -> None:
        redis = Redis.from_url(url)
        names = [f"p{level}" for level in range(LEVELS)] if mode == "priority" else ["p0"]
        worker = SimpleWorker([Queue(n, connection=redis) for n in names], connection=redis)
        worker.work(logging_level="WARNING")


if __name__ == "__main__":
    sys.exit(main(RQ()))
