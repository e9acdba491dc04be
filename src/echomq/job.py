"""The Job record, its states, and how payloads are encoded and limited.

A job lives in one compact hash (``emq:{Q}:job:<id>``); ``FIELDS`` maps the
short field names stored on the server to the attributes of :class:`Job`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import orjson

from echomq.errors import EchoMQError, PayloadError
from echomq.keys import group_of

DEFAULT_MAX_PAYLOAD = 512 * 1024


class State(StrEnum):
    WAITING = "waiting"
    DELAYED = "delayed"
    ACTIVE = "active"
    COMPLETED = "completed"
    FAILED = "failed"  # retry pending, held in the delayed set
    DEAD = "dead"


def encode_payload(value: Any, *, what: str = "payload", limit: int = DEFAULT_MAX_PAYLOAD) -> str:
    """JSON-encode ``value`` or raise PayloadError naming the problem and the limit."""
    try:
        raw = orjson.dumps(value)
    except TypeError as exc:
        raise PayloadError(f"{what} {value!r:.80} is not JSON-serialisable: {exc}") from None
    if len(raw) > limit:
        raise PayloadError(f"{what} is {len(raw)} bytes encoded; the limit is {limit} bytes")
    return raw.decode()


def decode_payload(raw: str | None) -> Any:
    return None if raw is None or raw == "" else orjson.loads(raw)


def ms_to_datetime(raw: str | None) -> datetime | None:
    if raw is None or raw == "":
        return None
    return datetime.fromtimestamp(int(raw) / 1000, tz=UTC)


def _int(raw: str | None, default: int = 0) -> int:
    return default if raw is None or raw == "" else int(raw)


#: how a worker stores a handler's progress report (Job.set_progress)
ProgressSink = Callable[["Job", Any], Awaitable[None]]


@dataclass(slots=True)
class Job:
    """One job as read from the server. A claimed job also carries its lease."""

    id: str
    name: str
    data: Any
    priority: int
    group: str | None
    state: State
    attempts: int
    max_attempts: int
    score: int
    created_at: datetime | None
    result: Any = None
    error: str | None = None
    traceback: str | None = None
    stalls: int = 0
    key: str | None = None
    run_at: datetime | None = None
    finished_at: datetime | None = None
    progress: Any = None
    lease_token: str | None = None
    lease_deadline: datetime | None = None
    claimed_at: datetime | None = None  # server time of the latest claim
    extra: dict[str, str] = field(default_factory=dict, repr=False)
    # set by the worker while a handler runs this job (see set_progress)
    _progress_sink: ProgressSink | None = field(default=None, repr=False, compare=False)

    def set_progress(self, value: Any) -> Awaitable[None]:
        """Report progress from inside a handler; ``get(id).progress`` shows it.

        An async handler awaits it (``await job.set_progress({"done": 3})``); a
        sync handler, which runs in a worker thread, calls it plainly and it
        returns once the value is stored. Only the lease holder can report:
        LeaseLost once the lease is gone; outside a worker's handler it raises.
        """
        if self._progress_sink is None:
            raise EchoMQError(f"job {self.id}: set_progress works only inside a worker's handler")
        return self._progress_sink(self, value)

    @property
    def lease(self) -> tuple[str, datetime | None] | None:
        """(token, deadline) of the lease this copy holds, or None."""
        return None if self.lease_token is None else (self.lease_token, self.lease_deadline)

    @classmethod
    def from_hash(cls, job_id: str, h: dict[str, str]) -> Job:
        """Build a Job from the server hash (short field names)."""
        state = State(h.get("s", "waiting"))
        return cls(
            id=job_id,
            name=h.get("n", ""),
            data=decode_payload(h.get("d")),
            priority=_int(h.get("p")),
            group=group_of(h.get("g", "")),
            state=state,
            attempts=_int(h.get("a")),
            max_attempts=_int(h.get("m"), 1),
            score=_int(h.get("sc")),
            created_at=ms_to_datetime(h.get("c")),
            result=decode_payload(h.get("r")),
            error=h.get("e") or None,
            traceback=h.get("tb") or None,
            stalls=_int(h.get("st")),
            key=h.get("k") or None,
            run_at=ms_to_datetime(h.get("at")),
            finished_at=ms_to_datetime(h.get("f")),
            progress=decode_payload(h.get("pg")),
            lease_token=h.get("t") if state is State.ACTIVE else None,
            lease_deadline=ms_to_datetime(h.get("l")) if state is State.ACTIVE else None,
            claimed_at=ms_to_datetime(h.get("ca")),
        )
