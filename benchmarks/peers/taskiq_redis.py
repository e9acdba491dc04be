"""taskiq with taskiq-redis's RedisStreamBroker (acknowledged delivery), one receiver.

No bulk add, no priorities (FIFO). The worker runs taskiq's receiver with
max_async_tasks=100 (the CLI default) in one process.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from importlib.metadata import version
from typing import Any

import harness
from driver import DRAIN_CONCURRENCY, Item, System, main, worker_concurrency
from taskiq.api import run_receiver_task
from taskiq_redis import RedisStreamBroker


async def noop(seq: int, level: int) -> None:
    harness.current().hit(level, seq)


def make_broker(url: str) -> tuple[RedisStreamBroker, Any]:
    broker = RedisStreamBroker(url, queue_name="bench")
    return broker, broker.register_task(noop, task_name="noop")


class TaskiqRedis(System):
    name = "taskiq-redis"
    module = "peers.taskiq_redis"
    notes = (
        f"RedisStreamBroker; receiver max_async_tasks={DRAIN_CONCURRENCY} (CLI default 100: "
        "see drain_sweep; priority drain: 1), one process, default prefetch",
        "no bulk add; no priorities (FIFO)",
    )

    def __init__(self) -> None:
        self.broker: RedisStreamBroker | None = None
        self.task: Any = None

    def version(self) -> str:
        return f"{version('taskiq-redis')} (taskiq {version('taskiq')})"

    async def open(self, url: str) -> None:
        self.broker, self.task = make_broker(url)
        await self.broker.startup()  # creates the consumer group before any job is sent

    async def close(self) -> None:
        if self.broker is not None:
            await self.broker.shutdown()
            self.broker = None

    async def add_one(self, seq: int, level: int) -> None:
        await self.task.kiq(seq, level)

    async def prefill(self, items: list[Item]) -> None:  # type: ignore[override]
        for start in range(0, len(items), 200):
            await asyncio.gather(*(self.add_one(s, p) for s, p in items[start : start + 200]))

    def run_worker(self, url: str, mode: str, tally: harness.Tally) -> None:
        asyncio.run(_serve(url, worker_concurrency(mode)))


async def _serve(url: str, max_async: int) -> None:
    broker, _ = make_broker(url)
    await broker.startup()
    receiving = asyncio.ensure_future(run_receiver_task(broker, max_async_tasks=max_async))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    receiving.cancel()
    await broker.shutdown()


if __name__ == "__main__":
    sys.exit(main(TaskiqRedis()))
