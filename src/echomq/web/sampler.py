"""Throughput over the last minutes, and the claim latency sample.

The server keeps running totals per queue (added, completed, failed); the
sampler reads them every ``interval`` seconds and keeps ``history`` seconds of
samples in memory, so the page can draw rates without the server storing any
time series. The same tick feeds the claim latency histogram
(:mod:`echomq.web.metrics`) from the active and newest completed and dead jobs,
read as summaries (no payloads, results or tracebacks).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import deque
from dataclasses import dataclass
from functools import partial
from typing import Any

from echomq.web.guard import audit_text
from echomq.web.metrics import ClaimLatency
from echomq.web.registry import QueueRegistry, gather_bounded

log = logging.getLogger("echomq.web")

TOTALS = ("added", "completed", "failed")


@dataclass(frozen=True, slots=True)
class Sample:
    """The totals of one queue at one moment (the dashboard's clock: only used for rates)."""

    at: float
    totals: tuple[int, int, int]


class Throughput:
    """A bounded history of total samples per queue, turned into per-second rates."""

    def __init__(self, history: float, interval: float) -> None:
        self.maxlen = max(2, int(history / interval) + 1)
        self._samples: dict[str, deque[Sample]] = {}

    def record(self, queue: str, at: float, totals: dict[str, int]) -> None:
        samples = self._samples.setdefault(queue, deque(maxlen=self.maxlen))
        added, completed, failed = (totals.get(name, 0) for name in TOTALS)
        samples.append(Sample(at, (added, completed, failed)))

    def rates(self, queue: str) -> list[dict[str, Any]]:
        """Jobs per second between consecutive samples, oldest first (``t`` in ms)."""
        samples = list(self._samples.get(queue, ()))
        out = []
        for before, after in itertools.pairwise(samples):
            span = after.at - before.at
            if span <= 0:
                continue
            point: dict[str, Any] = {"t": round(after.at * 1000)}
            for name, a, b in zip(TOTALS, before.totals, after.totals, strict=True):
                # a negative step means the queue was deleted and recreated: no rate
                point[name] = round(max(0, b - a) / span, 3)
            out.append(point)
        return out

    def forget_others(self, keep: list[str]) -> None:
        for queue in set(self._samples) - set(keep):
            del self._samples[queue]


class Sampler:
    """Reads every shown queue each ``interval`` seconds until cancelled."""

    def __init__(
        self,
        registry: QueueRegistry,
        throughput: Throughput,
        latency: ClaimLatency,
        interval: float,
        observe: int = 50,
    ) -> None:
        self.registry = registry
        self.throughput = throughput
        self.latency = latency
        self.interval = interval
        self.observe = observe
        self.ticks = 0

    async def run(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await self.tick()
            except Exception as exc:  # the server may be down; the page shows that itself
                log.warning("dashboard sampling failed: %s", audit_text(exc))
            await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - started)))

    async def tick(self) -> None:
        await self.registry.refresh(if_older_than=self.registry.rescan)
        names = self.registry.names()
        self.throughput.forget_others(names)
        await gather_bounded([partial(self._sample, name) for name in names])
        self.ticks += 1

    async def _sample(self, name: str) -> None:
        queue = await self.registry.get(name)
        stats = await queue.stats(lane_limit=1)
        self.throughput.record(name, time.time(), stats.totals)
        for state in ("active", "completed", "dead"):
            jobs = await queue.jobs(state, count=self.observe, summary=True)
            self.latency.observe(name, jobs)
