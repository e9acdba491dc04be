"""A running worker's entry in the workers registry of each queue it serves
(echomq.registry): written when its session starts, refreshed every heartbeat
interval with the jobs it runs, removed when it stops; one call per interval
(workerBeat.lua), whatever the worker runs. An entry outlives its last beat
by three intervals, so a worker killed -9 is gone within three heartbeats.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable, Sequence

from echomq.queue import Queue
from echomq.registry import HEARTBEATS_KEPT, info_text
from echomq.worker.resilience import TRANSIENT

log = logging.getLogger("echomq.worker")

#: the longest wait for the entry's removal when the worker stops.
LEAVE_TIMEOUT = 2.0


class Registration:
    """Keeps worker ``worker_id``'s entry in ``queue``'s registry while it runs."""

    def __init__(
        self,
        queue: Queue,
        worker_id: str,
        *,
        queues: Sequence[str],
        concurrency: int,
        interval: float,
        running: Callable[[], list[str]],
    ) -> None:
        self._queue = queue
        self._id = worker_id
        self._queues = list(queues)
        self._concurrency = concurrency
        self.interval = interval
        self._running = running
        self._host = socket.gethostname()
        self._pid = os.getpid()

    async def beat(self) -> None:
        """Refresh the entry now (transient errors are logged, not raised)."""
        info = info_text(self._host, self._pid, self._queues, self._concurrency, self._running())
        try:
            await self._queue.worker_beat(self._id, HEARTBEATS_KEPT * self.interval, info)
        except Exception as exc:  # never let the registration stop the worker
            log.warning(
                "queue %s: worker registration failed: %s",
                self._queue.name,
                exc,
                exc_info=not isinstance(exc, TRANSIENT),
            )

    async def run(self) -> None:
        """Beat now and every ``interval`` seconds until cancelled."""
        while True:
            await self.beat()
            await asyncio.sleep(self.interval)

    async def leave(self) -> None:
        """Remove the entry (the worker stops); bounded, errors only logged."""
        try:
            await asyncio.wait_for(
                self._queue.worker_beat(self._id, HEARTBEATS_KEPT * self.interval, None),
                LEAVE_TIMEOUT,
            )
        except Exception as exc:
            name = self._queue.name
            log.warning("queue %s: worker entry not removed (%s); it expires", name, exc)
