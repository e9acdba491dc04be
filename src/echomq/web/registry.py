"""Which queues the dashboard shows, and one Queue object per queue.

Either the queues named at start (``--queue``), or every queue found on the
server: each queue that ever held a job has a meta hash ``emq:{Q}:meta``, so
a SCAN for that pattern lists them. Discovery never runs in a request: the
app does one round before it serves, then the sampler does one every
``rescan`` seconds. A round walks at most ``MAX_SCAN_CALLS`` × ``SCAN_COUNT``
keys (about a million: half a second of server time in 1 ms slices) and the
next round resumes where it stopped, so a bigger keyspace takes several
rounds; a queue once found stays listed until a full pass no longer finds
it. On a cluster the walk covers every primary, one after the other. A queue
asked for by name (``/api/queues/NAME``) is checked at once with one EXISTS,
so it never waits for the walk.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from echomq.errors import JobNotFound
from echomq.keys import META_PATTERN, check_name, queue_of_meta
from echomq.queue import Queue
from echomq.sending import AsyncSender
from echomq.sending.sender import Node

T = TypeVar("T")

#: keys asked for per SCAN call, and most SCAN calls per round (≈ 1M keys).
SCAN_COUNT = 1000
MAX_SCAN_CALLS = 1000
#: most queues listed.
MAX_QUEUES = 500


class UnknownQueue(JobNotFound):
    """A queue the dashboard does not show (not named at start, or not on the server)."""


class QueueRegistry:
    """The shown queues, sharing one sender's client; discovery by SCAN unless names
    were given."""

    def __init__(
        self, sender: AsyncSender, names: Sequence[str] | None = None, rescan: float = 30.0
    ) -> None:
        self.sender = sender
        self.fixed = [check_name("queue", n) for n in names] if names else None
        self.rescan = rescan
        self._known: set[str] = set()
        self._this_pass: set[str] = set()
        self._pending: list[tuple[Node, int]] = []  # (node, cursor) still to walk this pass
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
        if not self._pending:
            self._pending = [(node, 0) for node in await self.sender.nodes()]
        for _ in range(MAX_SCAN_CALLS):
            node, cursor = self._pending[0]
            cursor, keys = await self.sender.scan_page(node, cursor, META_PATTERN, SCAN_COUNT)
            found = {q for q in map(queue_of_meta, keys) if q is not None}
            self._this_pass |= found
            self._known |= found
            if cursor != 0:
                self._pending[0] = (node, cursor)
                continue
            self._pending.pop(0)
            if not self._pending:  # a full pass: forget queues it no longer found
                self._known, self._this_pass = self._this_pass, set()
                return

    async def get(self, name: str) -> Queue:
        """The Queue for ``name``; UnknownQueue if the dashboard does not show it."""
        check_name("queue", name)
        queue = self._queues.get(name)
        if queue is None:
            queue = Queue(name, client=await self.sender.client())
        if name not in self.names():
            if self.fixed is not None or not await queue.exists():
                raise UnknownQueue(f"queue {name!r} is not shown by this dashboard")
            self._known.add(name)
            self._this_pass.add(name)
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
