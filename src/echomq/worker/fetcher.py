"""Getting work (Oban's producer): claim batches sized to the free slots, and
wait on the doorbell, never by polling, when there is none.

The doorbell is the list ``emq:{Q}:wake``, holding at most one element. The
scripts push to it when a queue's waiting count goes from 0 to more (add,
promotion of due jobs, a returned lease, a released job, retry of the dead)
and when a job enters the delayed set ahead of every other delayed job. An
idle worker blocks on it with BLPOP, on a connection of its own (the client's
pool hands every command its own connection), so the block holds up nothing
else.

One push wakes one worker. A woken worker whose claim filled all its free
slots may have left work behind, so it rings again (LPUSH + LTRIM, one round
trip) and the next idle worker wakes and does the same: under a burst, idle
workers wake one after another, each taking a batch, and once the queue
runs dry the chain stops. Rings nobody hears coalesce into the one element,
which the next worker to go idle consumes at once: a push is never lost
between a claim that found nothing and the BLPOP that follows it.

Delayed jobs need no timer here: maintenance runs at the next fire time and
its promotion rings the doorbell. An idle worker's BLPOP times out at its
next periodic maintenance, after which it claims once anyway (a safety net
for work that rang nobody, e.g. a queue resumed after a pause), and every
BLPOP is bounded below the client's socket timeout, so a dropped connection
surfaces as an error, never a hang.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time

from echomq.connection import AsyncClient, socket_timeout_of
from echomq.job import Job
from echomq.maintenance import Maintenance
from echomq.queue import Queue
from echomq.worker.resilience import TRANSIENT

log = logging.getLogger("echomq.worker")

#: margin between a BLPOP's own timeout and the guard around it (seconds).
GUARD = 2.0
#: longest BLPOP when the client has no socket timeout.
MAX_BLOCK = 60.0
#: a wait shorter than this is not worth a BLPOP (and BLPOP 0 blocks forever).
MIN_BLOCK = 0.002


class Doorbell:
    """The queue's wake list: wait for a ring, or ring it."""

    def __init__(self, queue: Queue) -> None:
        self._queue = queue
        self.key = queue.engine.keys.wake

    async def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds (capped below the socket timeout); True if rung."""
        client = await self._queue.client()
        block = min(timeout, _longest_block(client))
        block = max(MIN_BLOCK, math.ceil(block * 1000) / 1000)
        async with asyncio.timeout(block + GUARD):
            reply = await client.blpop([self.key], timeout=block)
        return reply is not None

    async def ring(self) -> None:
        """Wake one idle worker (the list keeps one element, like the scripts' ring)."""
        client = await self._queue.client()
        async with client.pipeline(transaction=True) as pipe:
            pipe.lpush(self.key, "1")
            pipe.ltrim(self.key, 0, 0)
            await pipe.execute()


def _longest_block(client: AsyncClient) -> float:
    """The longest BLPOP that ends before the client's socket timeout would cut it."""
    socket_timeout = socket_timeout_of(client)  # a cluster client has no single pool
    if not socket_timeout:
        return MAX_BLOCK
    limit = float(socket_timeout)
    return min(MAX_BLOCK, limit - 1.0 if limit >= 2.0 else limit / 2)


class Fetcher:
    """Claims jobs for the worker's free slots; waits for work when the queue is dry."""

    def __init__(self, queue: Queue, *, lease: float, maintenance: Maintenance) -> None:
        self._queue = queue
        self._lease = lease
        self._maintenance = maintenance
        self.doorbell = Doorbell(queue)
        self.idle = False  # True while blocked on the doorbell
        self._after_wait = True  # the next claim follows a wait
        self._rung = True  # the last wait ended by a ring (start: know nothing yet)

    async def claim(self, free: int) -> list[Job]:
        """Claim up to ``free`` jobs; after a wait, a full batch rings for the next worker."""
        jobs = await self._queue.claim(free, self._lease)
        if self._after_wait and len(jobs) == free:
            try:
                await self.doorbell.ring()
            except TRANSIENT as exc:  # the claimed jobs matter more than the ring
                log.warning("queue %s: could not ring the doorbell: %s", self._queue.name, exc)
        self._after_wait = False
        return jobs

    async def wait_for_work(self) -> None:
        """Return when the doorbell rings, or after one maintenance interval (then the
        worker claims once anyway: the safety net).

        After a ring that brought no work (a delayed job became the earliest)
        or when the last report is stale, runs maintenance first, so the
        worker's maintenance timer knows the next fire time.
        """
        if self._rung or self._maintenance.age() > self._maintenance.interval / 2:
            await self._maintenance.run_once()
        self._rung = False
        # delayed jobs need no timeout here: maintenance promotes them at their
        # fire time and the promotion rings the doorbell
        until = time.monotonic() + self._maintenance.interval
        try:
            while (timeout := until - time.monotonic()) >= MIN_BLOCK:
                self.idle = True
                if await self.doorbell.wait(timeout):
                    self._rung = True
                    break
        finally:
            self.idle = False
            self._after_wait = True
