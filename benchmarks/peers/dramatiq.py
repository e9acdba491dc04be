"""Dramatiq (Redis broker): actor.send, one worker process with 10 threads (equal settings).

No bulk add. Priorities: Dramatiq's ``priority`` actor option (lower runs
first) orders the messages a worker has prefetched; the priority drain uses
one actor per level on one queue and one worker thread.
"""

from __future__ import annotations

import signal
import sys
import threading
from importlib.metadata import version
from typing import Any

import dramatiq
import harness
from dramatiq.brokers.redis import RedisBroker
from driver import DRAIN_CONCURRENCY, LEVELS, System, main, worker_concurrency


def noop(seq: int, level: int) -> None:
    harness.current().hit(level, seq)


def declare(url: str) -> tuple[RedisBroker, list[Any]]:
    """The broker and one actor per priority level (level 0 = the plain drain's actor)."""
    broker = RedisBroker(url=url)
    dramatiq.set_broker(broker)
    actors = [
        dramatiq.actor(
            noop,
            actor_name=f"noop_p{level}",
            queue_name="bench",
            priority=level,
            broker=broker,
            max_retries=0,
        )
        for level in range(LEVELS)
    ]
    return broker, actors


class Dramatiq(System):
    name = "dramatiq"
    module = "peers.dramatiq"
    blocking_add = True
    notes = (
        f"one worker process, {DRAIN_CONCURRENCY} threads (default 8; sweep: 1-100; "
        "priority drain: 1 thread), default prefetch",
        "no bulk add; priority: actor option priority=level (orders prefetched messages)",
    )

    def __init__(self) -> None:
        self.broker: RedisBroker | None = None
        self.actors: list[Any] = []

    def version(self) -> str:
        return version("dramatiq")

    async def open(self, url: str) -> None:
        self.broker, self.actors = declare(url)

    async def close(self) -> None:
        if self.broker is not None:
            self.broker.close()
            self.broker = None

    async def add_one(self, seq: int, level: int) -> None:
        self.actors[level].send(seq, level)

    def run_worker(self, url: str, mode: str, tally: harness.Tally) -> None:
        broker, _ = declare(url)
        worker = dramatiq.Worker(broker, worker_threads=worker_concurrency(mode))
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        worker.start()
        stop.wait()
        worker.stop()


if __name__ == "__main__":
    sys.exit(main(Dramatiq()))
