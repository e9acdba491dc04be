"""Seeing what runs: a job's log (echomq.joblogs), the workers registry
(echomq.registry) and the metrics kept on the server (echomq.metrics)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from echomq.call import Call
from echomq.engine.base import EngineBase, names_a_job, no_such_job
from echomq.errors import InvalidOption
from echomq.joblogs import LogLine, decode_log
from echomq.keys import lane_of
from echomq.metrics import MetricPoint, check_minutes, decode_metrics
from echomq.options import MAX_LEASE, check_job_name, check_seconds
from echomq.registry import WorkerInfo, check_worker_id, decode_workers


def _log_or_raise(queue: str, job_id: str, reply: Any) -> list[LogLine]:
    lines = decode_log(reply)
    if lines is None:
        raise no_such_job(queue, job_id)
    return lines


def _beat_time(reply: Any) -> int:
    return int(reply)


class ObserveCalls(EngineBase):
    """Job logs and the workers registry."""

    def logs(self, job_id: str) -> Call[list[LogLine]]:
        """The job's log, oldest line first (DESIGN §10 "Job logs"): what its
        handlers logged (``job.log``, and ``logging`` records at or above the
        worker's ``job_log_level``), with a first line saying how many older
        lines were dropped once the log outgrew its cap (1,000 lines, 256 KiB).
        JobNotFound for no such job; [] for a job that logged nothing."""
        known = names_a_job(job_id)
        return self._script(
            "readLog", partial(_log_or_raise, self.queue, job_id), job_id if known else ""
        )

    def workers(self) -> Call[list[WorkerInfo]]:
        """The running workers of this queue (at most 1,000), oldest first: each
        gone within three heartbeats of its death (echomq.registry)."""
        return self._script("listWorkers", decode_workers)

    def worker_beat(self, worker_id: str, ttl: float, info: str | None) -> Call[int]:
        """A worker's beat: its entry (``info``, from workers.info_text) kept for
        ``ttl`` seconds more; ``info=None`` removes it (the worker stops)."""
        check_worker_id(worker_id)
        ttl_s = check_seconds("worker ttl", ttl, 0.0, 3 * MAX_LEASE, open_low=True)
        ttl_ms = str(max(1, round(ttl_s * 1000)))
        return self._script("workerBeat", _beat_time, worker_id, ttl_ms, info or "")

    def metrics(self, name: str | None = None, minutes: int = 60) -> Call[list[MetricPoint]]:
        """The queue's per-minute metrics of the last ``minutes`` minutes (1 … 4320,
        the present one last), one point per minute and job name (only ``name``'s
        when given), oldest first: completed, failed and dead counts and the run
        and wait histograms (echomq.metrics). Kept 72 hours, for a queue with
        ``configure(metrics=True)``; a minute without finished jobs has no point."""
        count = check_minutes(minutes)
        wanted = "" if name is None else check_job_name(name)
        return self._script("readMetrics", decode_metrics, str(count), wanted)

    def oldest_waiting(self, groups: Sequence[str | None]) -> Call[dict[str | None, float]]:
        """Per lane (a group, None: the default lane; at most 1,000): seconds its
        longest-waiting job has been due (server clock), 0.0 for a lane with no
        waiting job. What /metrics exports as ``echomq_oldest_waiting_seconds``."""
        lanes = [lane_of(group) for group in groups]
        if len(lanes) > MAX_OLDEST_LANES:
            raise InvalidOption(
                f"oldest_waiting: {len(lanes)} lanes given; allowed at most {MAX_OLDEST_LANES}"
            )
        return self._script("oldestWaiting", partial(_oldest, list(groups)), *lanes)


#: most lanes one oldest_waiting call reads.
MAX_OLDEST_LANES = 1000


def _oldest(groups: list[str | None], reply: Any) -> dict[str | None, float]:
    now = int(reply[0])
    return {
        group: 0.0 if due in ("", None) else max(0.0, (now - int(due)) / 1000)
        for group, due in zip(groups, reply[1:], strict=True)
    }
