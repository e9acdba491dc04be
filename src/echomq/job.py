"""The Job record, its states, and how payloads are encoded and limited.

A job lives in one compact hash (``emq:{Q}:job:<id>``) with short field
names; :meth:`Job.from_hash` maps them to the attributes of :class:`Job`, and
:meth:`Job.from_claim` reads the positional rows a claim returns.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import reprlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from functools import lru_cache
from typing import Any

import orjson

from echomq.errors import EchoMQError, PayloadError
from echomq.joblogs import JobLog, check_level
from echomq.keys import group_of
from echomq.options import DEFAULT_MAX_PAYLOAD, MAX_JSON_DEPTH


class State(StrEnum):
    """A job's state, in the order stats and listings show them."""

    WAITING = "waiting"
    DELAYED = "delayed"
    FAILED = "failed"  # retry pending, held in the delayed set
    ACTIVE = "active"
    COMPLETED = "completed"
    DEAD = "dead"
    BLOCKED = "blocked"  # waiting for its dependencies to complete (depends_on)
    CANCELLED = "cancelled"  # a child of a cancelled batch that never ran (cancel_batch)


#: every state's name, in the order of ``State`` (stats.lua counts them in this order).
LISTED_STATES: tuple[str, ...] = tuple(state.value for state in State)


#: stored state name → State, a plain dict lookup (cheaper than calling State)
_STATES: dict[str, State] = {s.value: s for s in State}


def _short_repr() -> Callable[[object], str]:
    """A short, depth-bounded repr for messages (a plain repr of deep JSON recurses)."""
    short = reprlib.Repr()
    short.maxlevel, short.maxstring, short.maxother, short.maxlist, short.maxdict = 3, 60, 60, 4, 4
    return short.repr


_short = _short_repr()


def encode_payload(value: Any, *, what: str = "payload", limit: int = DEFAULT_MAX_PAYLOAD) -> str:
    """JSON-encode ``value`` or raise PayloadError naming the problem and the limit.

    The limits are those of :data:`echomq.options.LIMITS`: size, finite numbers
    (orjson would write NaN and Infinity as null), depth, 64-bit integers."""
    try:
        raw = orjson.dumps(value)
    except TypeError as exc:
        reason = str(exc)
        if "Recursion limit" in reason:
            reason = f"nested deeper than {MAX_JSON_DEPTH} levels (the limit)"
        raise PayloadError(f"{what} {_short(value)} is not JSON-serialisable: {reason}") from None
    if len(raw) > limit:
        raise PayloadError(f"{what} is {len(raw)} bytes encoded; the limit is {limit} bytes")
    if b"null" in raw:  # only then can a NaN or an Infinity have been written
        bad = _non_finite(value)
        if bad is not None:
            raise PayloadError(
                f"{what} holds the number {bad!r}, which JSON cannot carry; "
                "allowed: finite numbers only"
            )
    return raw.decode()


def _non_finite(value: Any) -> float | None:
    """The first NaN or ±Infinity inside ``value`` (already JSON-encodable), else None.

    Iterative: orjson bounded the depth, but a walk needs no recursion at all."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                return item
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            stack.extend(getattr(item, f.name) for f in dataclasses.fields(item))
    return None


def decode_payload(raw: str | None) -> Any:
    return None if raw is None or raw == "" else orjson.loads(raw)


#: the fields a payload longer than one listpack value is stored in, in order
#: (scripts/includes/text.lua: "d" its first piece, then "d2" … "d16")
PAYLOAD_PIECES = ("d", *(f"d{i}" for i in range(2, 17)))


def join_pieces(values: Sequence[str | None]) -> str | None:
    """A payload's text from its PAYLOAD_PIECES' values in order (None: absent)."""
    if not values or values[0] is None:
        return None
    pieces: list[str] = []
    for piece in values:
        if piece is None:
            break
        pieces.append(piece)
    return "".join(pieces)


def payload_text(h: Mapping[str, str]) -> str | None:
    """A job's stored payload text from its hash: field ``d``, joined with the
    pieces that follow it when the payload was stored in pieces."""
    if "d2" not in h:
        return h.get("d")
    return join_pieces([h.get(name) for name in PAYLOAD_PIECES])


@lru_cache(maxsize=4096)
def _ms_datetime(raw: str) -> datetime:
    # cached: the jobs of one claim share their claim time and lease deadline,
    # and jobs added together often share their creation millisecond
    return datetime.fromtimestamp(int(raw) / 1000, tz=UTC)


def ms_to_datetime(raw: str | None) -> datetime | None:
    return None if raw is None or raw == "" else _ms_datetime(raw)


def _int(raw: str | None, default: int = 0) -> int:
    return default if raw is None or raw == "" else int(raw)


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, or None."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def on_job_loop(
    result: Any, loop: asyncio.AbstractEventLoop | None, timeout: float | None = None
) -> Any:
    """What a queue call made for a handler's job gives the caller: ``result`` as
    it is when it is no coroutine (a SyncQueue's call), when the job has no
    loop, or when this thread runs ``loop`` (an async handler awaits it);
    else (a sync handler, on a worker thread) the coroutine run on ``loop``, the
    worker's, waited for up to ``timeout`` seconds."""
    if not inspect.iscoroutine(result) or loop is None or running_loop() is loop:
        return result
    return asyncio.run_coroutine_threadsafe(result, loop).result(timeout)


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
    expires_at: datetime | None = None  # not started by then (server clock): dead, never run
    headers: dict[str, str] | None = None  # small metadata set at add, e.g. trace context
    cancelled: bool = False  # a worker's heartbeat learnt that cancel() took this job
    dependencies: list[str] | None = None  # depends_on: the jobs it waited for
    schedule_id: str | None = None  # the schedule whose fire added this job
    fire_time: datetime | None = None  # that fire's time (server clock)
    tags: dict[str, str] | None = None  # add(tags=...): what find() finds it by
    batch: str | None = None  # the batch it is a child (or a callback) of
    pending: int | None = None  # a blocked job's dependencies not completed yet
    worker: str | None = None  # the id of the worker that ran its latest attempt
    # set by the worker while a handler runs this job: the lines it logs (job.log)
    _log: JobLog | None = field(default=None, repr=False, compare=False)
    # set by the worker while a handler runs this job (see set_progress)
    _progress_sink: ProgressSink | None = field(default=None, repr=False, compare=False)
    # the Queue (or SyncQueue) whose claim returned this job, and the event loop
    # it claimed on (see Job.queue); not copied into a process-isolated task
    _queue: Any = field(default=None, repr=False, compare=False)
    _loop: Any = field(default=None, repr=False, compare=False)

    @property
    def queue(self) -> Any:
        """The :class:`~echomq.Queue` (or SyncQueue) this job was claimed from: the
        queue a handler's job runs on, whichever queue object the tasks module
        made (a test queue under the testing kit). EchoMQError for a job not
        claimed by this process (read by ``get``, or in a process-isolated task)."""
        if self._queue is None:
            raise EchoMQError(
                f"job {self.id}: job.queue is known only for a job claimed in this process "
                "(a handler's job; not in a process-isolated task)"
            )
        return self._queue

    def dependency_results(self) -> Any:
        """The results of the jobs this job depends on (``queue.dependency_results``
        on the queue it runs on). An async handler awaits it; a sync handler, on a
        worker thread, calls it plainly and gets the dict."""
        return on_job_loop(self.queue.dependency_results(self.id), self._loop)

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

    def log(self, message: str, level: str | int = "INFO") -> None:
        """Add a line to this job's log (``q.logs(job.id)``, ``echomq logs``) from
        inside a handler; it is sent with the worker's next heartbeat or the
        job's outcome. ``level`` a ``logging`` level name or number (a line
        below the worker's ``job_log_level`` is kept all the same: it was asked
        for). Outside a worker's handler it raises EchoMQError."""
        name = check_level(level)
        if not isinstance(message, str):
            raise EchoMQError(f"job.log takes a str message, not {type(message).__name__}")
        if self._log is None:
            raise EchoMQError(f"job {self.id}: job.log works only inside a worker's handler")
        self._log.add(name, message)

    @property
    def duration(self) -> float | None:
        """Seconds its latest attempt ran, from its claim to its finish (server
        clock); None while it runs or when it never ran."""
        if self.claimed_at is None or self.finished_at is None:
            return None
        if self.state not in (State.COMPLETED, State.DEAD) or self.finished_at < self.claimed_at:
            return None
        return (self.finished_at - self.claimed_at).total_seconds()

    @classmethod
    def from_hash(cls, job_id: str, h: dict[str, str]) -> Job:
        """Build a Job from the server hash (short field names).

        Runs once per claimed job, so it reads each field with one lookup."""
        get = h.get
        raw_state = get("s", "waiting")
        state = _STATES.get(raw_state) or State(raw_state)
        active = state is State.ACTIVE
        return cls(
            id=job_id,
            name=get("n", ""),
            data=decode_payload(payload_text(h)),
            priority=_int(get("p")),
            group=group_of(get("g", "")),
            state=state,
            attempts=_int(get("a")),
            max_attempts=_int(get("m"), 1),
            score=_int(get("sc")),
            created_at=ms_to_datetime(get("c")),
            result=decode_payload(get("r")),
            error=get("e") or None,
            traceback=get("tb") or None,
            stalls=_int(get("st")),
            key=get("k") or None,
            run_at=ms_to_datetime(get("at")),
            finished_at=ms_to_datetime(get("f")),
            progress=decode_payload(get("pg")),
            lease_token=get("cl") if active else None,
            lease_deadline=ms_to_datetime(get("l")) if active else None,
            claimed_at=ms_to_datetime(get("ca")),
            expires_at=ms_to_datetime(get("x")),
            headers=decode_payload(get("h")),
            dependencies=decode_payload(get("dd")),
            schedule_id=get("si") or None,
            fire_time=ms_to_datetime(get("sf")),
            tags=decode_payload(get("tg")),
            batch=(get("b") or "").lstrip("^") or None,
            pending=_int(get("dp")) if "dp" in h else None,
            worker=get("w") or None,
        )

    @classmethod
    def from_claim(
        cls, row: Sequence[Any], deadline: datetime | None, claimed_at: datetime | None
    ) -> Job:
        """Build a just-claimed Job from one claim.lua row: the id, then the
        fields n d p g a m sc c e tb st k at pg cl x h si sf tg b in that order (None = unset).

        Runs once per claimed job: positional, with no dict built."""
        (job_id, name, data, tier, lane, attempts, max_attempts, score, created, error,
         tb, stalls, key, at, progress, claims, expires, headers, schedule_id, fire,
         tags, batch) = row  # fmt: skip
        return cls(
            id=job_id,
            name=name or "",
            data=decode_payload(data),
            priority=_int(tier),
            group=group_of(lane or ""),
            state=State.ACTIVE,
            attempts=int(attempts),
            max_attempts=_int(max_attempts, 1),
            score=_int(score),
            created_at=ms_to_datetime(created),
            error=error or None,
            traceback=tb or None,
            stalls=_int(stalls),
            key=key or None,
            run_at=ms_to_datetime(at),
            progress=decode_payload(progress),
            lease_token=str(claims),
            lease_deadline=deadline,
            claimed_at=claimed_at,
            expires_at=ms_to_datetime(expires),
            headers=decode_payload(headers) if headers else None,
            schedule_id=schedule_id or None,
            fire_time=ms_to_datetime(fire) if schedule_id else None,
            tags=decode_payload(tags) if tags else None,
            batch=batch.lstrip("^") if batch else None,
        )
