"""Which queues the dashboard shows, and one Queue object per queue.

Either the queues named at start (``--queue``), or every queue found on the
server by echomq.discovery (a SCAN for the queues' meta hashes). Discovery
never runs in a request: the app does one round before it serves, then the
sampler does one every ``rescan`` seconds. A round walks at most
``MAX_SCAN_CALLS`` × ``SCAN_COUNT`` keys (about a million: half a second of
server time in 1 ms slices) and the next round resumes where it stopped, so a
bigger keyspace takes several rounds; a queue once found stays listed until a
full pass no longer finds it. On a cluster the walk covers every primary, one
after the other. A queue asked for by name (``/api/queues/NAME``) is checked at
once with one EXISTS, so it never waits for the walk. Every queue shares the
client of the registry's ``home`` queue (the app's connection to the server).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from echomq.discovery import QueueWalk, walk_async
from echomq.errors import JobNotFound
from echomq.keys import check_name
from echomq.queue import Queue

T = TypeVar("T")

#: keys asked for per SCAN call, and most SCAN calls per round (≈ 1M keys).
SCAN_COUNT = 1000
MAX_SCAN_CALLS = 1000
#: most queues listed.
MAX_QUEUES = 500


class UnknownQueue(JobNotFound):
    """A queue the dashboard does not show (not named at start, or not on the server)."""


class QueueRegistry:
    """The shown queues, sharing the client of ``home`` (a Queue on the server:
    its name does not matter); discovery by echomq.discovery unless names were
    given."""

    def __init__(
        self, home: Queue, names: Sequence[str] | None = None, rescan: float = 30.0
    ) -> None:
        self.home = home
        self.fixed = [check_name("queue", n) for n in names] if names else None
        self.rescan = rescan
        self._known: set[str] = set()
        self._walk = QueueWalk(SCAN_COUNT)
        self._scanned_at = float("-inf")
        self._queues: dict[str, Queue] = {}

    def names(self) -> list[str]:
        """The queue names known now, sorted (no I/O)."""
        if self.fixed is not None:
            return list(self.fixed)
        return sorted(self._known)[:MAX_QUEUES]

    async def refresh(self, *, if_older_than: float = 0.0) -> None:
        """One discovery round, unless the last one is younger than ``if_older_than`` s."""
        if self.fixed is None and time.monotonic() - self._scanned_at >= if_older_than:
            await self._scan_round()
            self._scanned_at = time.monotonic()

    async def _scan_round(self) -> None:
        self._walk.step_keys = SCAN_COUNT
        if await walk_async(self.home, self._walk, MAX_SCAN_CALLS):
            assert self._walk.last_pass is not None  # a full pass: forget queues it did not find
            self._known = set(self._walk.last_pass)
        else:
            self._known |= self._walk.found

    async def get(self, name: str) -> Queue:
        """The Queue for ``name``; UnknownQueue if the dashboard does not show it."""
        check_name("queue", name)
        queue = self._queues.get(name)
        if queue is None:
            queue = Queue(name, client=await self.home.client())
        if name not in self.names():
            if self.fixed is not None or not await queue.exists():
                raise UnknownQueue(f"queue {name!r} is not shown by this dashboard")
            self._known.add(name)
            self._walk.found.add(name)
        self._queues[name] = queue
        return queue


#: most queue reads one dashboard request or sampling tick runs at once; the
#: client's connection pool (100 by default) must never be exhausted however
#: many queues the server holds.
FAN_OUT = 16


async def gather_bounded(
    calls: Sequence[Callable[[], Awaitable[T]]], limit: int = FAN_OUT
) -> list[T]:
    """Run ``call()`` for each, at most ``limit`` at once (like a bounded gather).

    Calls are started only once they get a slot, so a cancelled gather leaves
    no coroutine unawaited.
    """
    gate = asyncio.Semaphore(limit)

    async def one(call: Callable[[], Awaitable[T]]) -> T:
        async with gate:
            return await call()

    return list(await asyncio.gather(*(one(c) for c in calls)))
