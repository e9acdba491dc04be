"""Getting work (Oban's producer): claim batches sized to the free slots, and
wait on the doorbell, never by polling, when there is none.

The doorbell is the list ``emq:{Q}:wake``, holding at most one element. The
scripts push to it when a lane joins a ring that held no lane (add, promotion
of due jobs, a returned lease, a released job, retry of the dead: work became
claimable while none was, whatever parked lanes hold), when a parked lane
goes back into the ring or its time becomes the earliest, and when a job
enters the delayed set ahead of every other delayed job (docs/lifecycle.md
"How an idle worker wakes"). An
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
that claim all the same: the safety net for work that rang nobody (a
resume rings the doorbell itself: scripts/pauseQueue.lua). Every BLPOP is bounded below the client's
socket timeout, so a dropped connection surfaces as an error, never a hang.

A stopping worker does not cancel its wait (a cancelled pipeline could have
claimed jobs nobody would see): it pushes its own stop bell
(``emq:{Q}:stop:<worker id>``), which the same BLPOP watches; the wait
returns at once, and the worker releases whatever the claim brought.

Delayed jobs and schedules need no timer here: maintenance runs at the next
fire time and its promotion (or the job a schedule fire adds) rings the
doorbell. A schedule created or resumed with a fire time before every other
one rings it too, so an idle worker re-runs maintenance and learns it.

Lane and queue controls: a claim that leases fewer than asked because
backlogged lanes are ineligible (paused, capped, throttled, over a rate) or
the queue is at its queue-wide limit says when the server's clock alone lets
something be served again (a throttle's end, a rate window's end:
``Claimed.retry_in``). The next wait
ends then at the latest, and its pipelined claim puts the lanes whose time
came back into the ring itself. A freed slot, a resume or a changed control
rings the doorbell, so those wake a worker at once.
"""

from __future__ import annotations

import asyncio
import logging

from echomq.job import Job
from echomq.queue import Queue
from echomq.worker.maintenance import Maintenance
from echomq.worker.resilience import TRANSIENT

log = logging.getLogger("echomq.worker")

#: added to a claim's retry_in before waking for it (the BLPOP timeout is rounded to ms)
RETRY_MARGIN = 0.005


class Fetcher:
    """Claims jobs for the worker's free slots; waits for work when the queue is dry."""

    def __init__(
        self, queue: Queue, *, lease: float, maintenance: Maintenance, worker_id: str
    ) -> None:
        self._queue = queue
        self._lease = lease
        self._maintenance = maintenance
        self._worker_id = worker_id
        self.idle = False  # True while blocked on the doorbell
        self._rung = True  # the last wait ended by a ring (start: know nothing yet)
        self._retry_in: float | None = None  # the last empty claim's retry_in

    async def claim(self, free: int) -> list[Job]:
        """Claim up to ``free`` jobs."""
        jobs = await self._queue.claim(free, self._lease, worker=self._worker_id)
        self._retry_in = jobs.retry_in
        return jobs

    def note(self, jobs: list[Job]) -> None:
        """A claim made for this worker elsewhere (a completion's call that claimed
        for the slot it freed): its retry_in bounds the next wait as ours do."""
        self._retry_in = getattr(jobs, "retry_in", None)

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
        # a lane or the queue that the clock alone frees (the last claim said
        # when) bounds the wait; a little after, so the server's clock has passed it
        timeout = self._maintenance.interval
        if self._retry_in is not None:
            timeout = min(timeout, self._retry_in + RETRY_MARGIN)
        self.idle = True
        try:
            woke_by, jobs = await self._queue.wait_and_claim(
                self._worker_id, timeout, free, self._lease
            )
        finally:
            self.idle = False
        self._rung = woke_by == "ring"
        self._retry_in = jobs.retry_in
        if len(jobs) == free and woke_by != "stop":
            try:
                await self._queue.ring()
            except TRANSIENT as exc:  # the claimed jobs matter more than the ring
                log.warning("queue %s: could not ring the doorbell: %s", self._queue.name, exc)
        return jobs

    async def interrupt(self) -> None:
        """Make a wait in progress return now: ring this worker's own stop bell (a
        cancelled wait could have claimed jobs nobody would see)."""
        await self._queue.ring_stop_bell(self._worker_id)
