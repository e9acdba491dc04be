"""Heartbeat: renew the lease of every job the worker is running, in one call.

One ``extend_many`` per interval covers all in-flight jobs (in chunks of
``CHUNK``), so heartbeat traffic does not grow with concurrency. A job whose
lease the server refuses to renew (it expired, or the job was removed or
claimed again) is reported to ``on_lost`` once and forgotten.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from echomq.job import Job
from echomq.queue import Queue
from echomq.worker.resilience import TRANSIENT

log = logging.getLogger("echomq.worker")

#: most leases renewed by one script call, so no call runs long.
CHUNK = 500


class Heartbeat:
    """Keeps the leases of registered jobs alive while their handlers run."""

    def __init__(
        self, queue: Queue, *, lease: float, interval: float, on_lost: Callable[[Job], None]
    ) -> None:
        self._queue = queue
        self._lease = lease
        self.interval = interval
        self._on_lost = on_lost
        self._jobs: dict[str, Job] = {}

    def add(self, job: Job) -> None:
        self._jobs[job.id] = job

    def discard(self, job: Job) -> None:
        """Stop renewing; call it before recording the outcome, so a renewal
        that crosses the completion is not mistaken for a lost lease."""
        self._jobs.pop(job.id, None)

    def __len__(self) -> int:
        return len(self._jobs)

    async def run(self) -> None:
        """Renew every ``interval`` seconds until cancelled."""
        while True:
            await asyncio.sleep(self.interval)
            await self.beat()

    async def beat(self) -> None:
        """Renew all registered leases now (transient errors are logged, not raised)."""
        jobs = list(self._jobs.values())
        for start in range(0, len(jobs), CHUNK):
            chunk = jobs[start : start + CHUNK]
            try:
                deadlines = await self._queue.extend_many(chunk, self._lease)
            except Exception as exc:  # never let the heartbeat die: retry next interval
                log.warning(
                    "queue %s: heartbeat failed: %s",
                    self._queue.name,
                    exc,
                    exc_info=not isinstance(exc, TRANSIENT),
                )
                return
            for job, deadline in zip(chunk, deadlines, strict=True):
                if deadline is None and self._jobs.get(job.id) is job:
                    self.discard(job)
                    self._on_lost(job)
