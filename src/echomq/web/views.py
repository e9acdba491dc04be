"""What the JSON API returns: jobs, scores, lanes and tiers as plain dicts.

Lanes are named by ``label`` for people ("(default)" for the default lane)
and by ``group`` (null for the default lane) for requests.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from echomq.batches import BatchStatus
from echomq.events import Event
from echomq.job import Job, State
from echomq.joblogs import LogLine
from echomq.metrics import MetricPoint
from echomq.registry import WorkerInfo
from echomq.reports import JobPreview, LaneInfo, QueueStats, TierCounts
from echomq.schedules import ScheduleInfo
from echomq.score import COUNTER_BITS, TIER_BITS, decode
from echomq.web.metrics import lane_label

#: an error shown in a job list is cut to this many characters (the inspector shows
#: its first 64 KiB, like every long field).
ERROR_PREVIEW = 200
SCORE_BITS = TIER_BITS + COUNTER_BITS


def score_view(score: int) -> dict[str, Any]:
    """A score with its two fields and the bits each occupies (high bit first in ``bits``)."""
    d = decode(score)
    return {
        "score": d.score,
        "tier": d.tier,
        "counter": d.counter,
        "tier_bits": list(d.tier_bits),
        "counter_bits": list(d.counter_bits),
        "bits": format(d.score, f"0{SCORE_BITS}b"),
    }


def job_summary(job: Job) -> dict[str, Any]:
    """A job as a list row: no payload, the error cut short."""
    error = job.error
    if error is not None and len(error) > ERROR_PREVIEW:
        error = error[:ERROR_PREVIEW] + "…"
    return {
        "id": job.id,
        "name": job.name,
        "state": str(job.state),
        "priority": job.priority,
        "group": job.group,
        "lane": lane_label(job.group),
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "score": job.score,
        "created_at": job.created_at,
        "finished_at": job.finished_at,
        "error": error,
    }


def job_detail(preview: JobPreview, download: str) -> dict[str, Any]:
    """Every field of a job, the score drawn as tier bits | counter bits.

    A long field cut by ``Queue.peek`` is null here; ``truncated`` gives, by
    field name, its first bytes as stored (``preview``: JSON text cut short, or
    the error's text), its whole ``size`` and the bytes ``shown`` (UTF-8), and
    ``download``: where the whole field is (``download`` + the field's name)."""
    job = preview.job
    truncated = {
        name: {**cut.to_dict(), "download": download + name} for name, cut in preview.cut.items()
    }
    return {
        **job_summary(job),
        "data": job.data,
        "result": job.result,
        "error": job.error,
        "traceback": job.traceback,
        "progress": job.progress,
        "stalls": job.stalls,
        "key": job.key,
        "run_at": job.run_at,
        "claimed_at": job.claimed_at,
        "worker": job.worker,
        "duration": job.duration,
        "lease_deadline": job.lease_deadline,
        "dependencies": job.dependencies,
        "pending": job.pending,
        "schedule_id": job.schedule_id,
        "fire_time": job.fire_time,
        "batch": job.batch,
        "score_fields": score_view(job.score),
        "truncated": truncated,
    }


def aged_view(job: Job, age_step_ms: int) -> dict[str, Any] | None:
    """A waiting job's aged lane key read back (docs/ordering.md "The aged
    ordering"): key = due time + tier × age_step, all in ms; None for a job
    with no key (not waiting or active)."""
    if job.state not in (State.WAITING, State.ACTIVE) or not job.score:
        return None
    due = job.score - job.priority * age_step_ms
    return {
        "key": job.score,
        "tier": job.priority,
        "age_step_ms": age_step_ms,
        "due_ms": due,
        "tier_part_ms": job.priority * age_step_ms,
    }


def lanes_view(lanes: list[LaneInfo]) -> list[dict[str, Any]]:
    """The ring, head first, with each lane's share of claims next to its share of weight,
    and its controls (parked lanes and lanes with controls follow, position -1).

    ``served`` counts claims since the lane joined the ring, so the shares
    compare lanes over the time they were all backlogged.
    """
    total_weight = sum(lane.weight for lane in lanes) or 1
    total_served = sum(lane.served for lane in lanes)
    return [
        {
            "group": lane.group,
            "label": lane_label(lane.group),
            "position": lane.position,
            "weight": lane.weight,
            "backlog": lane.backlog,
            "served": lane.served,
            "turn_left": lane.turn_left,
            "weight_share": round(lane.weight / total_weight, 4),
            "served_share": round(lane.served / total_served, 4) if total_served else None,
            **lane.controls(),
        }
        for lane in lanes
    ]


def schedule_view(schedule: ScheduleInfo) -> dict[str, Any]:
    """A schedule as JSON, with its fire times also as wall-clock times of its own
    zone, labelled (``next_fire_local``: ``2026-12-05 03:00:00 CET``), as the CLI shows them."""
    return {
        **schedule.to_dict(),
        "next_fire_local": schedule.in_zone(schedule.next_fire),
        "last_fire_local": schedule.in_zone(schedule.last_fire),
    }


def tiers_view(tiers: dict[str | None, TierCounts]) -> list[dict[str, Any]]:
    """Waiting jobs by lane and tier, lanes in ring order, tiers lowest first."""
    return [
        {
            "group": group,
            "label": lane_label(group),
            "tiers": [{"tier": t, "count": n} for t, n in sorted(tc.counts.items())],
            "more": tc.more,
        }
        for group, tc in tiers.items()
    ]


def queue_summary(stats: QueueStats, rates: list[dict[str, Any]]) -> dict[str, Any]:
    """One row of the queue list: counts by state, totals and the latest rates."""
    return {
        "name": stats.queue,
        "counts": stats.counts,
        "paused": stats.paused,
        "ordering": stats.ordering or "composite",
        "ring_length": stats.ring_length,
        "totals": stats.totals,
        "rate": rates[-1] if rates else None,
    }


def weights_view(weights: dict[str | None, int]) -> list[dict[str, Any]]:
    """Every weight set on the queue (lanes without waiting jobs included)."""
    return [
        {"group": g, "label": lane_label(g), "weight": w}
        for g, w in sorted(weights.items(), key=lambda kv: lane_label(kv[0]))
    ]


def batch_view(status: BatchStatus) -> dict[str, Any]:
    """A batch for the page: its counts, state, progress (finished of total) and
    callbacks (each one's job id once fired, else null)."""
    view = dataclasses.asdict(status)
    view["created_at"] = status.created_at.isoformat() if status.created_at else None
    view["finished"] = status.finished
    view["progress"] = round(status.finished / status.total, 4) if status.total else 1.0
    return view


def batch_detail(status: BatchStatus, jobs: dict[str, Job], events: list[Event]) -> dict[str, Any]:
    """A batch for its own view: ``batch_view``, each given callback as a row
    (``callback_jobs``: its job id once fired, with that job's name and state while
    it exists) and the batch's events, oldest first (``job_events``)."""
    rows = []
    for callback, job_id in status.callbacks.items():
        job = jobs.get(job_id) if job_id else None
        rows.append(
            {
                "callback": callback,
                "id": job_id,
                "name": job.name if job else None,
                "state": str(job.state) if job else None,
            }
        )
    return {
        **batch_view(status),
        "callback_jobs": rows,
        "events": [event.to_dict() for event in events],
    }


def log_line(line: LogLine) -> dict[str, Any]:
    """One line of a job's log (echomq.joblogs)."""
    return {"at": line.at, "attempt": line.attempt, "level": line.level, "message": line.message}


def worker_view(worker: WorkerInfo) -> dict[str, Any]:
    """One running worker (echomq.registry)."""
    return {
        "id": worker.id,
        "host": worker.host,
        "pid": worker.pid,
        "queues": worker.queues,
        "concurrency": worker.concurrency,
        "started_at": worker.started_at,
        "seen_at": worker.seen_at,
        "running": worker.running,
    }


def _bound(value: float | None) -> float | None:
    """A percentile's bucket bound for JSON (None: no job, or past the last bound)."""
    return None if value is None or value == float("inf") else value


def metrics_view(points: list[MetricPoint], minutes: int) -> dict[str, Any]:
    """The server's per-minute metrics by job name: per minute its counts and the
    p50 / p95 of run and wait (the bucket bounds that hold them: echomq.metrics),
    and the totals over the window."""
    names: dict[str, list[MetricPoint]] = {}
    for point in points:
        names.setdefault(point.name, []).append(point)
    out = []
    for name in sorted(names):
        mine = names[name]
        out.append(
            {
                "name": name,
                "completed": sum(p.completed for p in mine),
                "failed": sum(p.failed for p in mine),
                "dead": sum(p.dead for p in mine),
                "cancelled": sum(p.cancelled for p in mine),
                "points": [
                    {
                        "minute": p.minute,
                        "completed": p.completed,
                        "failed": p.failed,
                        "dead": p.dead,
                        "cancelled": p.cancelled,
                        "run_p50": _bound(p.run.quantile(0.5)),
                        "run_p95": _bound(p.run.quantile(0.95)),
                        "wait_p50": _bound(p.wait.quantile(0.5)),
                        "wait_p95": _bound(p.wait.quantile(0.95)),
                    }
                    for p in mine
                ],
            }
        )
    return {"minutes": minutes, "names": out}
