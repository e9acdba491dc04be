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

Each BLPOP is pipelined with a claim: the server runs the claim the moment
the BLPOP returns, so a ring reaches a handler in one round trip, not two.
A BLPOP that times out (at the next periodic maintenance) is followed by
that claim all the same: the safety net for work that rang nobody, e.g. a
queue resumed after a pause. Every BLPOP is bounded below the client's
socket timeout, so a dropped connection surfaces as an error, never a hang.

A stopping worker does not cancel its wait (a cancelled pipeline could have
claimed jobs nobody would see): it pushes its own stop bell
(``emq:{Q}:stop:<worker id>``), which the same BLPOP watches; the wait
returns at once, and the worker releases whatever the claim brought.

Delayed jobs need no timer here: maintenance runs at the next fire time and
its promotion rings the doorbell.
"""

from __future__ import annotations

import asyncio
import logging
import math

import redis.asyncio
from redis.exceptions import NoScriptError

from echomq.connection import AsyncClient, socket_timeout_of
from echomq.engine import Call
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
#: how long a stop bell nobody popped is kept (milliseconds).
STOP_BELL_TTL_MS = 10_000


class Doorbell:
    """The queue's wake list: wait for a ring and claim in the same round trip, or ring it."""

    def __init__(self, queue: Queue, worker_id: str) -> None:
        self._queue = queue
        self.key = queue.engine.keys.wake
        self.stop_key = queue.engine.keys.stop_bell(worker_id)

    async def wait_and_claim(
        self, timeout: float, claim: Call[list[Job]]
    ) -> tuple[str | None, list[Job]]:
        """Block up to ``timeout`` seconds (capped below the socket timeout) on the
        doorbell and this worker's stop bell, then run ``claim``.

        Returns (the key that woke the wait, or None on timeout; the claimed jobs).
        On a single server the BLPOP and the claim go in one pipeline: the server
        runs the claim the moment the BLPOP returns, which saves the worker a
        round trip between a ring and its first job. A cluster client sends
        them one after the other.
        """
        client = await self._queue.client()
        block = min(timeout, _longest_block(client))
        block = max(MIN_BLOCK, math.ceil(block * 1000) / 1000)
        keys = [self.stop_key, self.key]
        async with asyncio.timeout(block + GUARD):
            if isinstance(client, redis.asyncio.Redis):
                async with client.pipeline(transaction=False) as pipe:
                    pipe.blpop(keys, timeout=block)
                    pipe.execute_command(*claim.wire())
                    popped, reply = await pipe.execute(raise_on_error=False)
                if isinstance(popped, Exception):
                    raise popped
                if isinstance(reply, NoScriptError):  # the script is not loaded there yet
                    jobs = await self._queue._send(claim)
                elif isinstance(reply, Exception):
                    raise reply
                else:
                    jobs = claim.parse(reply)
            else:
                popped = await client.blpop(keys, timeout=block)
                jobs = await self._queue._send(claim)
        return (None if popped is None else str(popped[0])), jobs

    async def ring(self) -> None:
        """Wake one idle worker (the list keeps one element, like the scripts' ring)."""
        client = await self._queue.client()
        async with client.pipeline(transaction=True) as pipe:
            pipe.lpush(self.key, "1")
            pipe.ltrim(self.key, 0, 0)
            await pipe.execute()

    async def interrupt(self) -> None:
        """End this worker's own wait at once (a stopping worker); the pushed
        element expires on its own should nobody pop it."""
        client = await self._queue.client()
        async with client.pipeline(transaction=True) as pipe:
            pipe.lpush(self.stop_key, "1")
            pipe.pexpire(self.stop_key, STOP_BELL_TTL_MS)
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

    def __init__(
        self, queue: Queue, *, lease: float, maintenance: Maintenance, worker_id: str
    ) -> None:
        self._queue = queue
        self._lease = lease
        self._maintenance = maintenance
        self.doorbell = Doorbell(queue, worker_id)
        self.idle = False  # True while blocked on the doorbell
        self._rung = True  # the last wait ended by a ring (start: know nothing yet)

    async def claim(self, free: int) -> list[Job]:
        """Claim up to ``free`` jobs."""
        return await self._queue.claim(free, self._lease)

    async def wait_and_claim(self, free: int) -> list[Job]:
        """Wait for the doorbell (or one maintenance interval, or this worker's stop
        bell) and claim up to ``free`` jobs as it ends: the claim after a timeout
        is the safety net for work that rang nobody (e.g. a queue resumed after a
        pause). A claim that fills every free slot rings again for the next worker.

        After a ring that brought no work (a delayed job became the earliest)
        or when the last report is stale, runs maintenance first, so the
        worker's maintenance timer knows the next fire time.
        """
        if self._rung or self._maintenance.age() > self._maintenance.interval / 2:
            await asyncio.sleep(0)  # the jobs just started run first; this is no hurry
            await self._maintenance.run_once()
        self._rung = False
        # delayed jobs need no timeout here: maintenance promotes them at their
        # fire time and the promotion rings the doorbell
        timeout = max(MIN_BLOCK, self._maintenance.interval)
        claim = self._queue.engine.claim(free, self._lease)
        self.idle = True
        try:
            woke_by, jobs = await self.doorbell.wait_and_claim(timeout, claim)
        finally:
            self.idle = False
        self._rung = woke_by == self.doorbell.key
        if len(jobs) == free and woke_by != self.doorbell.stop_key:
            try:
                await self.doorbell.ring()
            except TRANSIENT as exc:  # the claimed jobs matter more than the ring
                log.warning("queue %s: could not ring the doorbell: %s", self._queue.name, exc)
        return jobs

    async def interrupt(self) -> None:
        """Make a wait in progress return now (see Doorbell.interrupt)."""
        await self.doorbell.interrupt()
