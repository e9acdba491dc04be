"""Celery with the Redis broker: task.apply_async, one worker process.

No result backend (ignore_result). Priorities on Redis need
``queue_order_strategy='priority'`` and ``priority_steps`` (BENCH-NOTES);
level L is sent as priority 3·L onto the default steps 0, 3, 6, 9 (0 runs
first). The priority drain uses prefetch multiplier 1, as Celery's docs advise
for priorities.
"""

from __future__ import annotations

import sys
from importlib.metadata import version
from typing import Any

import harness
from celery import Celery
from driver import DRAIN_CONCURRENCY, System, main, worker_concurrency

#: the solo pool runs one task at a time; other concurrencies run Celery's thread pool
SOLO = "solo"
THREADS = "threads"
STEPS = [0, 3, 6, 9]


def noop(seq: int, level: int) -> None:
    harness.current().hit(level, seq)


def make_app(url: str, mode: str = "drain") -> tuple[Celery, Any]:
    app = Celery("bench", broker=url)
    options: dict[str, Any] = {"priority_steps": STEPS}
    if mode == "priority":
        options["queue_order_strategy"] = "priority"
    app.conf.update(
        broker_transport_options=options,
        task_ignore_result=True,
        worker_prefetch_multiplier=1 if mode == "priority" else 4,
        worker_hijack_root_logger=False,
        broker_connection_retry_on_startup=True,
    )
    task = app.task(noop, name="noop", ignore_result=True)
    return app, task


class CeleryPeer(System):
    name = "celery"
    module = "peers.celery"
    blocking_add = True
    notes = (
        f"worker pool={THREADS} concurrency={DRAIN_CONCURRENCY} (sweep: 1-100; concurrency 1 "
        f"and the priority drain: pool={SOLO}), without gossip/mingle/heartbeat, "
        "prefetch multiplier 4 (default; priority drain: 1); ignore_result",
        "no bulk add; priority: queue_order_strategy='priority', steps 0,3,6,9",
    )

    def __init__(self) -> None:
        self.app: Celery | None = None
        self.task: Any = None

    def version(self) -> str:
        return version("celery")

    async def open(self, url: str) -> None:
        self.app, self.task = make_app(url)

    async def close(self) -> None:
        if self.app is not None:
            self.app.close()
            self.app = None

    async def add_one(self, seq: int, level: int) -> None:
        if level:
            self.task.apply_async((seq, level), priority=STEPS[level])
        else:
            self.task.apply_async((seq, level))

    def run_worker(self, url: str, mode: str, tally: harness.Tally) -> None:
        app, _ = make_app(url, mode)
        concurrency = worker_concurrency(mode)
        worker = app.Worker(
            pool=SOLO if concurrency == 1 else THREADS,
            concurrency=concurrency,
            loglevel="WARNING",
            without_gossip=True,
            without_mingle=True,
            without_heartbeat=True,
            quiet=True,
        )
        worker.start()


if __name__ == "__main__":
    sys.exit(main(CeleryPeer()))
