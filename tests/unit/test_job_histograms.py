"""The dashboard adds the server's per-minute metrics up into growing histograms:
each minute counted once, however often or seldom /metrics is scraped."""

from __future__ import annotations

from datetime import UTC, datetime

from echomq.metrics import BUCKETS, Histogram, MetricPoint
from echomq.web.jobmetrics import REREAD_MINUTES, JobHistograms


def point(minute: int, completed: int) -> MetricPoint:
    counts = tuple([completed] + [0] * len(BUCKETS))
    return MetricPoint(
        datetime.fromtimestamp(minute * 60, tz=UTC),
        "send",
        completed,
        0,
        0,
        Histogram(counts, 0.001 * completed),
        Histogram(counts, 0.0),
    )


def run_count(h: JobHistograms) -> int:
    return sum(h.totals()[("q", "send")].run)


def test_each_minute_counts_once_however_often_it_is_read() -> None:
    h = JobHistograms()
    base = 1_000_000  # minutes
    h.update("q", [point(base, 2)], now=base * 60 + 10)
    h.update("q", [point(base, 5)], now=base * 60 + 40)  # the minute filled on: read again
    assert run_count(h) == 5
    later = (base + 10) * 60
    # the next read covers every minute since the last (and a few more)
    assert h.minutes_to_read("q", now=later) >= 10 + 1
    h.update("q", [point(base + 4, 1), point(base + 9, 3)], now=later)
    assert run_count(h) == 5 + 1 + 3
    h.update("q", [point(base + 9, 3), point(base + 10, 1)], now=later + 30)
    assert run_count(h) == 5 + 1 + 3 + 1
    assert h.minutes_to_read("q", now=later + 31) == REREAD_MINUTES + 1
