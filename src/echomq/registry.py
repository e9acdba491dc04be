"""The workers registry (DESIGN §10 "Workers"): who runs jobs right now.

Every running worker registers itself in each queue it serves
(``keys.QueueKeys.workers`` and ``keys.QueueKeys.worker``;
scripts/includes/workers.lua): its id, host, pid, queues, concurrency and the
ids of the jobs it runs, refreshed by its heartbeat. The entry expires three
heartbeats after the last one, so a worker that dies (killed -9, its machine
gone) disappears within three heartbeats; a worker that stops leaves at once.
``q.workers()`` lists them; ``job.worker`` names the worker of a job's
latest attempt (written by its claim).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from echomq.errors import InvalidOption

#: a worker's entry lives this many heartbeats after its last one.
HEARTBEATS_KEPT = 3
#: the most ids of running jobs a worker tells (its concurrency is at most this anyway).
MAX_RUNNING_TOLD = 1000


#: a worker id: what the registry and a job's field w hold.
WORKER_ID = re.compile(r"[A-Za-z0-9._:\-]{1,64}")


def check_worker_id(worker: object) -> str:
    """``worker`` if it is a valid worker id, else InvalidOption."""
    if not isinstance(worker, str) or WORKER_ID.fullmatch(worker) is None:
        raise InvalidOption(
            f"worker id {worker!r:.80} is not 1–64 characters of A–Z a–z 0–9 . _ - :"
        )
    return worker


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """One running worker as the registry knows it (times on the server clock)."""

    id: str
    host: str
    pid: int
    queues: list[str]
    concurrency: int
    started_at: datetime
    seen_at: datetime
    running: list[str]


def info_text(
    host: str, pid: int, queues: Sequence[str], concurrency: int, running: Sequence[str]
) -> str:
    """What a worker tells with each beat, as workerBeat.lua stores it (JSON)."""
    return orjson.dumps(
        {
            "host": host,
            "pid": pid,
            "queues": list(queues),
            "concurrency": concurrency,
            "running": list(running)[:MAX_RUNNING_TOLD],
        }
    ).decode()


def _ms(raw: Any) -> datetime:
    return datetime.fromtimestamp(int(raw) / 1000, tz=UTC)


def decode_workers(reply: Sequence[Any]) -> list[WorkerInfo]:
    """listWorkers.lua's reply: now, then id, info, started, seen per worker;
    oldest started first."""
    out = []
    rows = list(reply[1:])
    for i in range(0, len(rows) - 3, 4):
        worker_id, info, started, seen = rows[i : i + 4]
        told = orjson.loads(info)
        out.append(
            WorkerInfo(
                id=str(worker_id),
                host=str(told.get("host", "")),
                pid=int(told.get("pid", 0)),
                queues=[str(q) for q in told.get("queues", [])],
                concurrency=int(told.get("concurrency", 0)),
                started_at=_ms(started),
                seen_at=_ms(seen),
                running=[str(j) for j in told.get("running", [])],
            )
        )
    out.sort(key=lambda w: (w.started_at, w.id))
    return out
