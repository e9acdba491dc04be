"""Periodic maintenance that every worker runs: promote, reap, prune (Oban's plugins).

``queue.maintain()`` is one atomic script (promote due delayed jobs, return
expired leases, prune finished jobs past retention), so any number of
workers can run it at the same time; it also fires the queue's due
schedules (each fire a compare-and-set, so racing workers add one job per
fire time). It runs once per ``interval`` and also at the fire time of the
next delayed job or schedule: its report says when that is, in server
time, and :class:`Maintenance` turns it into a relative offset on the
local monotonic clock (no wall clock is compared with the server's). The
promotion rings the queue's doorbell, so an idle worker starts the job at
once. (A blocked BLPOP's own timeout would not do: servers check those on
their ``hz`` timer, 100 ms apart by default.)
"""

from __future__ import annotations

import asyncio
import logging
import random
import time

from echomq.queue import Queue
from echomq.reports import MaintenanceReport
from echomq.worker.resilience import TRANSIENT, Pauses

log = logging.getLogger("echomq.maintenance")

#: spread of the period (a fraction), so workers started together drift apart.
JITTER = 0.1
#: how long after a fire time (by the last report) the promoting run starts, so the
#: server's clock has surely passed it.
FIRE_MARGIN = 0.001


class Maintenance:
    """Runs ``queue.maintain()`` once per ``interval`` seconds and at each fire time.

    ``run_once`` may also be called at any time (an idle worker calls it before
    it sleeps, to learn the next fire time); a run from anywhere resets the
    period.
    """

    def __init__(self, queue: Queue, interval: float) -> None:
        self._queue = queue
        self.interval = interval
        self.report: MaintenanceReport | None = None
        self._sent_at = 0.0  # monotonic time the last report's request was sent
        self._due_at = 0.0  # monotonic time the next periodic run is due
        self._replanned = asyncio.Event()  # set by every run: the sleep must be re-planned

    async def run_once(self) -> MaintenanceReport:
        sent_at = time.monotonic()
        report = await self._queue.maintain()
        self.report, self._sent_at = report, sent_at
        self._due_at = sent_at + self.interval * (1 - JITTER * random.random())
        self._replanned.set()
        if report.reaped:
            log.info("queue %s: returned %d expired lease(s)", self._queue.name, report.reaped)
        if report.promoted:
            log.debug("queue %s: promoted %d due job(s)", self._queue.name, report.promoted)
        if report.fired:
            log.debug("queue %s: %d schedule fire(s)", self._queue.name, report.fired)
        return report

    def age(self) -> float:
        """Seconds since the last report's request was sent (inf before the first)."""
        return float("inf") if self.report is None else time.monotonic() - self._sent_at

    def due_in(self) -> float:
        """Seconds until the next periodic run is due (<= 0: due now)."""
        return self._due_at - time.monotonic()

    def next_fire_in(self) -> float | None:
        """Seconds until the earliest delayed job or schedule fires, as of the last
        report, or None.

        Server time difference (fire − server now) minus the local monotonic
        time elapsed since the request was sent: no wall clock is compared.
        """
        report = self.report
        if report is None:
            return None
        fires = [t for t in (report.next_fire, report.next_schedule) if t is not None]
        if not fires:
            return None
        ahead = (min(fires) - report.server_time).total_seconds()
        return ahead - (time.monotonic() - self._sent_at)

    def next_run_in(self) -> float:
        """Seconds until the next run: the period, or just past the next fire time;
        at once while the last run left expired leases behind (it reaps a budget)."""
        report = self.report
        deadline = None if report is None else report.next_deadline
        if report is not None and deadline is not None and deadline <= report.server_time:
            return 0.0
        if report is not None and report.releasing:  # dependents left to release
            return 0.0
        fire_in = self.next_fire_in()
        due_in = self.due_in()
        return due_in if fire_in is None else min(due_in, fire_in + FIRE_MARGIN)

    async def run_periodically(self) -> None:
        """Run whenever due, until cancelled; transient errors are logged and retried.

        A run from elsewhere (an idle worker's) may bring the next fire time
        forward, so the sleep is re-planned after every run.
        """
        pauses = Pauses(first=0.1, cap=self.interval)
        while True:
            wait = self.next_run_in()
            if wait > 0:
                await self._sleep_unless_replanned(wait)
                continue
            try:
                await self.run_once()
                pauses.reset()
            except Exception as exc:  # never let maintenance die: retry after a pause
                log.warning(
                    "queue %s: maintenance failed: %s",
                    self._queue.name,
                    exc,
                    exc_info=not isinstance(exc, TRANSIENT),
                )
                await asyncio.sleep(pauses.next())

    async def _sleep_unless_replanned(self, seconds: float) -> None:
        # asyncio.wait, not asyncio.timeout: on Python 3.11 a cancel that lands as
        # the timeout expires can be swallowed, and this loop would never end
        self._replanned.clear()
        waiter = asyncio.ensure_future(self._replanned.wait())
        try:
            await asyncio.wait({waiter}, timeout=seconds)
        finally:
            waiter.cancel()
