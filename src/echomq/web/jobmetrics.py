"""``echomq_job_run_seconds`` and ``echomq_job_wait_seconds``: the histograms of
/metrics, from the metrics the server keeps per minute and job name
(echomq.metrics, a queue with ``configure(metrics=True)``).

Prometheus histograms only grow; the server's minutes expire after 72 hours.
So the dashboard adds the minutes up: each scrape reads the minutes since the
previous one (and a few before, which may still have been filling then), keeps
the latest reading of each minute it has read, and folds a minute into the
running totals once it is past every later read. Every finished job is
counted once (not sampled); the totals start when the dashboard starts, like
any counter after a restart.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from echomq.metrics import BUCKETS, KEPT_MINUTES, Histogram, MetricPoint

#: minutes read again at each scrape (the present one may still fill, and the
#: one before it while the server's clock and this one's differ).
REREAD_MINUTES = 3


@dataclass(slots=True)
class _Totals:
    run: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))
    run_sum: float = 0.0
    wait: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))
    wait_sum: float = 0.0

    def add(self, point: MetricPoint) -> None:
        self.run = [a + b for a, b in zip(self.run, point.run.counts, strict=True)]
        self.wait = [a + b for a, b in zip(self.wait, point.wait.counts, strict=True)]
        self.run_sum += point.run.sum
        self.wait_sum += point.wait.sum


class JobHistograms:
    """The running histograms of every queue and job name the dashboard reads."""

    def __init__(self) -> None:
        self._folded: dict[tuple[str, str], _Totals] = {}
        self._open: dict[tuple[str, str, int], MetricPoint] = {}
        self._last_read: dict[str, float] = {}

    def minutes_to_read(self, queue: str, now: float | None = None) -> int:
        """How many minutes ``queue``'s next read covers (since its last, and a few more)."""
        now = time.time() if now is None else now
        last = self._last_read.get(queue)
        gap = 0 if last is None else math.ceil((now - last) / 60)
        return min(KEPT_MINUTES, gap + REREAD_MINUTES)

    def update(self, queue: str, points: list[MetricPoint], now: float | None = None) -> None:
        """Take in one read of ``queue``'s last minutes (oldest first)."""
        now = time.time() if now is None else now
        self._last_read[queue] = now
        for point in points:
            minute = int(point.minute.timestamp() // 60)
            self._open[(queue, point.name, minute)] = point
        # a minute older than every minute the next read covers is final: fold it
        oldest_reread = int(now // 60) - REREAD_MINUTES + 1
        for key in [k for k in self._open if k[0] == queue and k[2] < oldest_reread]:
            point = self._open.pop(key)
            self._folded.setdefault((queue, point.name), _Totals()).add(point)

    def totals(self) -> dict[tuple[str, str], _Totals]:
        out: dict[tuple[str, str], _Totals] = {}
        for key, folded in self._folded.items():
            both = out.setdefault(key, _Totals())
            both.run, both.wait = list(folded.run), list(folded.wait)
            both.run_sum, both.wait_sum = folded.run_sum, folded.wait_sum
        for (queue, name, _), point in self._open.items():
            out.setdefault((queue, name), _Totals()).add(point)
        return out


def _buckets(counts: list[int]) -> list[tuple[str, float]]:
    cumulative = Histogram(tuple(counts), 0.0).cumulative()
    return [("+Inf" if math.isinf(le) else repr(le), float(n)) for le, n in cumulative]


class JobHistogramCollector(Collector):
    """The two histogram families of one scrape, and how long each lane's
    longest-waiting job has been due (``oldest``: queue → lane label → seconds)."""

    def __init__(
        self, histograms: JobHistograms, oldest: dict[str, dict[str, float]] | None = None
    ) -> None:
        self.histograms = histograms
        self.oldest = oldest or {}

    def collect(self) -> Iterator[Metric]:
        run = HistogramMetricFamily(
            "echomq_job_run_seconds",
            "Run time of finished jobs (claim to outcome, server clock), every job of a "
            "queue with metrics on (configure(metrics=True)), since the dashboard started.",
            labels=["queue", "name"],
        )
        wait = HistogramMetricFamily(
            "echomq_job_wait_seconds",
            "Wait of finished jobs from due to claim (server clock), every job of a queue "
            "with metrics on, since the dashboard started.",
            labels=["queue", "name"],
        )
        for (queue, name), t in sorted(self.histograms.totals().items()):
            run.add_metric([queue, name], _buckets(t.run), t.run_sum)
            wait.add_metric([queue, name], _buckets(t.wait), t.wait_sum)
        oldest = GaugeMetricFamily(
            "echomq_oldest_waiting_seconds",
            "How long the longest-waiting job of a lane has been due (server clock; 0: none "
            "waits): what autoscalers such as KEDA scale on. The lanes of echomq_lane_backlog.",
            labels=["queue", "lane"],
        )
        for queue, lanes in self.oldest.items():
            for lane, seconds in lanes.items():
                oldest.add_metric([queue, lane], seconds)
        yield from (run, wait, oldest)
