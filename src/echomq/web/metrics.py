"""``/metrics``: the queues in Prometheus text format, read without the token.

Gauges and counters are read from the server at scrape time (one ``stats``
call per queue), so a scrape always shows the present state and the totals
the server keeps; nothing is counted in the dashboard's memory except the
claim latency histogram.

Claim latency: ``echomq_claim_latency_seconds{queue}`` is the time a job
waited from being due to being claimed, by the server clock: from its
creation (or its ``run_at`` / retry time, for a delayed or retried job) to
the claim time the claim script records in the job (``claimed_at``). Claims
happen in workers, not here, so the dashboard *samples* them: each sampling
tick it reads the active jobs (soonest lease deadline first) and the newest
completed and dead jobs (up to 50 of each) and observes every claim
it has not seen before. ``_count`` is therefore the number of claims
observed, not of all claims, and at high rates it is a sample. Jobs whose
wait is not known exactly (returned after an expired lease) are skipped;
a job retried by hand from the dead letters is measured from its creation.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from echomq.job import Job
from echomq.metrics import BUCKETS
from echomq.reports import LaneInfo, QueueStats

#: most lanes per queue exported with per-lane control gauges (the lanes with a
#: cap, rate, pause or active jobs, in ``lanes()`` order): a queue with 10^5
#: tenants does not export 10^5 series.
LANE_SERIES_LIMIT = 100

#: the ``lane`` label of the default lane (the CLI shows it the same way; no
#: group can be named so, since parentheses are not allowed in names).
DEFAULT_LANE_LABEL = "(default)"
#: seconds; from "picked at once" to "waited an hour": the buckets of the job
#: histograms the server keeps (echomq.metrics), so the two families compare.
LATENCY_BUCKETS = BUCKETS
_SEEN_LIMIT = 50_000


def lane_label(group: str | None) -> str:
    return DEFAULT_LANE_LABEL if group is None else group


class ClaimLatency:
    """The sampled claim latency histogram, fed with jobs the dashboard reads."""

    def __init__(self) -> None:
        self.histogram = Histogram(
            "echomq_claim_latency_seconds",
            "Time from a job being due to its claim (server clock), sampled by the dashboard "
            "from the active, recently completed and dead jobs it reads; _count counts observed "
            "claims, not all claims.",
            ["queue"],
            buckets=LATENCY_BUCKETS,
            registry=None,
        )
        self._seen: OrderedDict[tuple[str, datetime], None] = OrderedDict()

    def observe(self, queue: str, jobs: Iterable[Job]) -> int:
        """Observe each claim not seen before; returns how many were observed."""
        observed = 0
        for job in jobs:
            wait = claim_wait(job)
            if wait is None or job.claimed_at is None:
                continue
            seen_key = (job.id, job.claimed_at)
            if seen_key in self._seen:
                continue
            self._seen[seen_key] = None
            if len(self._seen) > _SEEN_LIMIT:
                self._seen.popitem(last=False)
            self.histogram.labels(queue=queue).observe(wait)
            observed += 1
        return observed


def claim_wait(job: Job) -> float | None:
    """Seconds from due to claim, or None when the job's wait is not known exactly."""
    if job.claimed_at is None or job.created_at is None or job.stalls > 0:
        return None
    due = job.run_at if job.run_at is not None else job.created_at
    wait = (job.claimed_at - due).total_seconds()
    # a job waiting for a retry has its next due time and its previous claim: no pair
    return wait if wait >= 0 else None


class StatsCollector(Collector):
    """Turns one scrape's QueueStats into metric families."""

    def __init__(
        self, snapshot: Sequence[QueueStats], lanes: Sequence[list[LaneInfo]] = ()
    ) -> None:
        self.snapshot = snapshot
        self.lanes = lanes

    def collect(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily(
            "echomq_jobs", "Jobs by queue and state.", labels=["queue", "state"]
        )
        backlog = GaugeMetricFamily(
            "echomq_lane_backlog", "Waiting jobs by lane.", labels=["queue", "lane"]
        )
        paused = GaugeMetricFamily(
            "echomq_queue_paused", "1 while the queue is paused.", labels=["queue"]
        )
        ring = GaugeMetricFamily(
            "echomq_ring_lanes", "Lanes in the ring (with waiting jobs).", labels=["queue"]
        )
        totals = {
            name: CounterMetricFamily(f"echomq_{name}_total", doc, labels=["queue"])
            for name, doc in (
                ("added", "Jobs added (new jobs, not idempotent hits), kept by the server."),
                ("completed", "Jobs completed, kept by the server."),
                ("failed", "Failed attempts (retried or dead), kept by the server."),
            )
        }
        for stats in self.snapshot:
            for state, n in stats.counts.items():
                jobs.add_metric([stats.queue, state], n)
            for group, n in stats.lanes.items():
                backlog.add_metric([stats.queue, lane_label(group)], n)
            paused.add_metric([stats.queue], 1 if stats.paused else 0)
            ring.add_metric([stats.queue], stats.ring_length)
            for name, family in totals.items():
                family.add_metric([stats.queue], stats.totals.get(name, 0))
        yield from (jobs, backlog, paused, ring, *totals.values())
        yield from self._lane_controls()

    def _lane_controls(self) -> Iterator[Metric]:
        active = GaugeMetricFamily(
            "echomq_lane_active", "Active jobs of a controlled lane.", labels=["queue", "lane"]
        )
        limit = GaugeMetricFamily(
            "echomq_lane_concurrency_limit", "A lane's concurrency cap.", labels=["queue", "lane"]
        )
        lane_paused = GaugeMetricFamily(
            "echomq_lane_paused", "1 while a lane is paused.", labels=["queue", "lane"]
        )
        for stats, lanes in zip(self.snapshot, self.lanes, strict=False):
            shown = [x for x in lanes if x.concurrency or x.rate or x.paused or x.active]
            for lane in shown[:LANE_SERIES_LIMIT]:
                labels = [stats.queue, lane_label(lane.group)]
                active.add_metric(labels, lane.active)
                if lane.concurrency is not None:
                    limit.add_metric(labels, lane.concurrency)
                lane_paused.add_metric(labels, 1 if lane.paused else 0)
        yield from (active, limit, lane_paused)


def render(
    snapshot: Sequence[QueueStats],
    latency: ClaimLatency,
    lanes: Sequence[list[LaneInfo]] = (),
    jobs: Collector | None = None,
) -> bytes:
    """The exposition text for one scrape (``lanes``: each queue's ``lanes()``;
    ``jobs``: the run and wait histograms, echomq.web.jobmetrics)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StatsCollector(snapshot, lanes))
    registry.register(latency.histogram)
    if jobs is not None:
        registry.register(jobs)
    return generate_latest(registry)
