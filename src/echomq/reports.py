"""What read operations return: queue statistics, lanes, tiers, maintenance reports
and job previews.

Plain frozen dataclasses with no I/O, shared by the queues, the CLI and the
dashboard (the engine builds them from the server's replies).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from echomq.job import Job


@dataclass(frozen=True, slots=True)
class LaneInfo:
    """One lane of the ring, as ``lanes()`` reports it."""

    group: str | None
    position: int
    weight: int
    backlog: int
    served: int
    turn_left: int | None = None
    #: lane controls (``set_lane``); None where not set
    concurrency: int | None = None
    rate: tuple[int, float] | None = None
    paused: bool = False
    max_waiting: int | None = None
    #: jobs of the lane active now
    active: int = 0
    #: the lane is out of the ring until it can be served (paused, at its cap,
    #: throttled or over its rate); ``position`` is then -1
    parked: bool = False
    #: throttled (``throttle`` / ``RateLimited``) until this time (server clock)
    throttled_until: datetime | None = None

    def controls(self) -> dict[str, Any]:
        """The lane's controls and their use as JSON-ready values (the CLI's and the
        dashboard's lane rows share them)."""
        rate = None if self.rate is None else {"max": self.rate[0], "per_seconds": self.rate[1]}
        return {
            "concurrency": self.concurrency,
            "active": self.active,
            "rate": rate,
            "paused": self.paused,
            "max_waiting": self.max_waiting,
            "parked": self.parked,
            "throttled_until": None
            if self.throttled_until is None
            else self.throttled_until.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class QueueStats:
    """Counts by state and waiting jobs by lane (``None`` is the default lane)."""

    queue: str
    counts: dict[str, int]
    lanes: dict[str | None, int]
    ring_length: int
    paused: bool
    ordering: str
    counter: int
    #: since the queue was created: jobs added, completed, failed attempts, and lost
    #: (listed with their hash gone, dropped by a claim: docs/lifecycle.md).
    totals: dict[str, int] = field(default_factory=dict)
    #: the last add, completion or failed attempt (server clock); None if none yet.
    last_activity: datetime | None = None

    @property
    def ever_used(self) -> bool:
        """Whether the queue has ever held a job (the first add stores its ordering)."""
        return bool(self.ordering)

    def to_dict(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "counts": dict(self.counts),
            "lanes": {("" if k is None else k): v for k, v in self.lanes.items()},
            "ring_length": self.ring_length,
            "paused": self.paused,
            "ordering": self.ordering,
            "counter": self.counter,
            "totals": dict(self.totals),
            "last_activity": None if self.last_activity is None else self.last_activity.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class TierCounts:
    """Waiting jobs of one lane by tier; ``more`` when higher tiers were left out."""

    counts: dict[int, int]
    more: bool


@dataclass(frozen=True, slots=True)
class MaintenanceReport:
    """What one maintenance pass did, and when the next timed event is due."""

    promoted: int
    reaped: int
    pruned: int
    next_fire: datetime | None
    next_deadline: datetime | None
    server_time: datetime
    #: jobs added by schedule fires in this pass, and fires that made no job
    fired: int = 0
    skipped: int = 0
    #: the earliest next fire time of the queue's schedules after this pass
    next_schedule: datetime | None = None
    #: steps this pass took for blocked jobs (a dependency completed for one, or
    #: it went dead with a dependency), and finished jobs whose dependents are
    #: still to be handled (more than one pass's budget: run again at once)
    released: int = 0
    releasing: int = 0


@dataclass(frozen=True, slots=True)
class Dependents:
    """The jobs that depend on one job (``Queue.dependents``).

    ``blocked``: how many blocked jobs still wait for it to complete, and up
    to the asked number of their ids (``blocked_ids``, sorted); ``readers``:
    how many jobs it released (or that were added after it completed) may
    still read its result, which retention keeps for them, and some of their
    ids (``reader_ids``). Jobs that finished are in neither.
    """

    blocked: int
    blocked_ids: list[str]
    readers: int
    reader_ids: list[str]

    def to_dict(self) -> dict[str, Any]:
        """For JSON (``echomq inspect --json``, the dashboard's job detail)."""
        return {
            "blocked": self.blocked,
            "blocked_ids": self.blocked_ids,
            "readers": self.readers,
            "reader_ids": self.reader_ids,
        }


#: a job's fields an inspector shows cut short when they are long (``Queue.peek``):
#: public name → the field of the job's hash. Every other field is short by its limit.
LONG_FIELDS = {
    "data": "d",
    "result": "r",
    "progress": "pg",
    "error": "e",
    "traceback": "tb",
    "headers": "h",
    "dependencies": "dd",
}


@dataclass(frozen=True, slots=True)
class FieldPreview:
    """The first bytes of one long stored field: ``text`` is its stored form (JSON
    for data, result, progress, headers, dependencies; plain text for error and
    traceback) cut at a character boundary, ``size`` the whole field's bytes."""

    text: str
    size: int

    def to_dict(self) -> dict[str, Any]:
        return {"preview": self.text, "size": self.size, "shown": len(self.text.encode())}


@dataclass(frozen=True, slots=True)
class JobPreview:
    """One job read for an inspector (``Queue.peek``): ``job`` has every field,
    except that a field longer than the preview is None there and its first
    bytes are in ``cut`` (by public name: ``cut["data"]``). ``Queue.read_field``
    reads such a field whole."""

    job: Job
    cut: dict[str, FieldPreview] = field(default_factory=dict)
