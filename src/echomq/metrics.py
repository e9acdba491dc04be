"""Metrics kept on the server (DESIGN §10): per minute and job name, how many
jobs completed, failed (a retry follows), died and were cancelled before they
ran, and histograms of their run and wait times in fixed Prometheus buckets,
kept 72 hours.

On for a queue with the stored setting ``metrics`` (``configure(metrics=True)``):
every script that ends a job counts it in the same call
(scripts/includes/metrics.lua: one read and one write of the minute's hash per
call, however many jobs), so nothing is sampled and no other process is
needed. A queue without it pays nothing (DESIGN §9): not one command more.
Run time: from a job's claim to its outcome; wait time: from when it was due
(its creation, or its ``run_at`` / retry time) to its claim; both on the
server clock.

What each count includes (docs/metrics.md):

- ``completed``: jobs completed (``complete``, ``complete_many``).
- ``failed``: failed attempts followed by a retry (``fail`` with attempts
  left), and a running job cancelled with ``cancel(..., retry=True)``.
- ``dead``: jobs that died: ``fail`` with no attempt left or ``retry=False``;
  a running job cancelled (``cancel``, or ``cancel_batch`` of its batch); a job
  past its ``expires`` time when a claim meets it; a job whose lease expired
  more than ``max_stalls`` times; a blocked job whose dependency died, was
  removed or was cancelled (``depends_on``).
- ``cancelled``: jobs cancelled before they ran (waiting, delayed, retry
  pending or blocked): ``cancel`` of such a job, ``cancel_batch`` of its batch.

Not counted: ``remove``, ``drop``, ``purge_dead``, pruning by retention,
``retry_dead``, ``release`` (nothing ends there, or the job's end was counted
when it happened). The run and wait histograms hold the runs that ended by
completion, failure or a cancel of the running job; a job that never ran, or
whose lease expired (its end is not known), adds no run.

``q.metrics(name=None, minutes=60)`` reads them as :class:`MetricPoint` s;
``echomq metrics`` draws them; the dashboard's ``/metrics`` exports
``echomq_job_run_seconds`` and ``echomq_job_wait_seconds`` from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from echomq.errors import InvalidOption

#: the histograms' bucket bounds, seconds (the +Inf bucket follows the last).
BUCKETS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    900.0,
    3600.0,
)
#: how many minutes the server keeps (72 hours).
KEPT_MINUTES = 72 * 60
#: the counts kept per minute and name, in their stored order (includes/metrics.lua;
#: "cancelled" is stored only when not 0: a field of an older echomq has three).
COUNTS = ("completed", "failed", "dead", "cancelled")
#: numbers kept per minute and name (includes/metrics.lua: counts, two histograms
#: with their sums); stored sparse, the empty buckets left out.
WIDTH = len(COUNTS) + 2 * (len(BUCKETS) + 2)


@dataclass(frozen=True, slots=True)
class Histogram:
    """One histogram: ``counts[i]`` jobs took at most ``BUCKETS[i]`` seconds and more
    than the bound before it (the last: more than the last bound); ``sum`` seconds."""

    counts: tuple[int, ...]
    sum: float

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, jobs at most that long) per bucket, +Inf last (Prometheus' form)."""
        out, running = [], 0
        for bound, n in zip((*BUCKETS, float("inf")), self.counts, strict=True):
            running += n
            out.append((bound, running))
        return out

    def quantile(self, q: float) -> float | None:
        """The upper bound of the bucket holding quantile ``q`` (None: empty)."""
        total = self.count
        if total == 0:
            return None
        for bound, running in self.cumulative():
            if running >= q * total:
                return bound
        return float("inf")


@dataclass(frozen=True, slots=True)
class MetricPoint:
    """One minute of one job name (``minute``: its start, server clock).

    ``cancelled``: jobs cancelled before they ran (0 in minutes stored by an
    older echomq, which did not count them)."""

    minute: datetime
    name: str
    completed: int
    failed: int
    dead: int
    run: Histogram
    wait: Histogram
    cancelled: int = 0


def check_minutes(minutes: object) -> int:
    if (
        isinstance(minutes, bool)
        or not isinstance(minutes, int)
        or not (1 <= minutes <= KEPT_MINUTES)
    ):
        raise InvalidOption(f"minutes {minutes!r:.40} is out of range; allowed 1 … {KEPT_MINUTES}")
    return minutes


def decode_point(minute: Any, name: Any, text: Any) -> MetricPoint:
    """One stored field (includes/metrics.lua): "c f d [k] r<sum> b:n … w<sum> b:n …"."""
    counts = [0] * len(COUNTS)
    buckets = {"r": [0] * (len(BUCKETS) + 1), "w": [0] * (len(BUCKETS) + 1)}
    sums = {"r": 0, "w": 0}
    current: str | None = None
    for i, token in enumerate(str(text).split()):
        if token[0] in "rw":
            current = token[0]
            sums[current] = int(token[1:])
        elif current is None:
            if i < len(COUNTS):
                counts[i] = int(token)
        else:
            bucket, _, n = token.partition(":")
            if 1 <= int(bucket) <= len(BUCKETS) + 1:
                buckets[current][int(bucket) - 1] += int(n)
    return MetricPoint(
        datetime.fromtimestamp(int(minute) * 60, tz=UTC),
        str(name),
        counts[0],
        counts[1],
        counts[2],
        Histogram(tuple(buckets["r"]), sums["r"] / 1000),
        Histogram(tuple(buckets["w"]), sums["w"] / 1000),
        counts[3],
    )


def decode_metrics(reply: Sequence[Any]) -> list[MetricPoint]:
    """readMetrics.lua's reply: now, then minute, name, counts per point."""
    rows = list(reply[1:])
    return [decode_point(*rows[i : i + 3]) for i in range(0, len(rows) - 2, 3)]
