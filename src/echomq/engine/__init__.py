"""Every queue operation as data, with no I/O: what to send, and how to read the reply.

An operation is a :class:`~echomq.call.Call`: a script (by name, with KEYS
and ARGV) or one plain command, plus the function that turns the server's
reply into the caller's value, including the updates a reply makes to the
caller's :class:`Job` (a renewed lease, a release, progress). ``Queue`` and
``SyncQueue`` only hand calls to the sending layer (:mod:`echomq.sending`).
All input is checked here, before anything is sent, so bad input writes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, Literal, TypedDict, TypeVar, Unpack, cast

import orjson

from echomq import ids, lanepages, settings, storage
from echomq.call import Call
from echomq.errors import (
    SCRIPT_ERRORS,
    DependencyFailed,
    EchoMQError,
    InvalidDependency,
    InvalidOption,
    InvalidSchedule,
    InvalidState,
    JobCancelled,
    JobNotFound,
    LaneFull,
    LeaseLost,
    OrderingMismatch,
    raise_for_code,
)
from echomq.events import EventPage, check_event_id, parse_page
from echomq.job import (
    LISTED_STATES,
    Job,
    State,
    decode_payload,
    encode_payload,
    ms_to_datetime,
)
from echomq.keys import QueueKeys, check_name, group_of, lane_of
from echomq.lanecontrols import UNSET, Unset, check_throttle, encode_controls
from echomq.options import (
    DEFAULT_DURABLE_TIMEOUT,
    DEFAULT_LEASE,
    MAX_ATTEMPTS,
    MAX_CLAIM,
    MAX_ERROR_BYTES,
    MAX_LEASE,
    MAX_PAYLOAD_LIMIT,
    MAX_TRACEBACK_BYTES,
    QueueOptions,
    bounded_text,
    check_durable_timeout,
    check_int,
    check_job_name,
    check_key,
    check_known,
    check_seconds,
    check_weight,
    delay_ms,
    encode_headers,
    expires_ms,
    run_at_ms,
)
from echomq.reports import (
    LONG_FIELDS,
    Dependents,
    FieldPreview,
    JobPreview,
    LaneInfo,
    MaintenanceReport,
    QueueStats,
    TierCounts,
)
from echomq.schedules import (
    FIRE_BUDGET,
    MAX_SCHEDULES,
    Definition,
    ScheduleInfo,
    Timing,
    check_schedule_id,
    fires_to_make,
)
from echomq.score import check_tier
from echomq.scripts import script
from echomq.steps import Next

T = TypeVar("T")
#: the states a page of jobs can be listed from besides ``waiting`` (one lane).
FINISHED_SETS = tuple(state for state in LISTED_STATES if state != State.WAITING)
#: what woke a doorbell wait: a ring, this worker's stop bell, or nothing (timeout).
Wake = Literal["ring", "stop"] | None
#: how long a stop bell nobody popped is kept (milliseconds).
STOP_BELL_TTL_MS = 10_000
#: a wait shorter than this is not worth a BLPOP (and BLPOP 0 blocks forever).
MIN_BLOCK = 0.002
#: a summary listing (``jobs(..., summary=True)``) leaves out data, result,
#: traceback and progress, and cuts the error to this many bytes on the server.
SUMMARY_ERROR_BYTES = 1024
#: ``peek`` returns at most this many bytes of each long field by default (64 KiB).
PREVIEW_BYTES = 64 * 1024
#: stream entries one read of the event stream returns by default, and at most
#: (an entry holds up to 500 events: includes/events.lua).
EVENT_PAGE = 20
MAX_EVENT_PAGE = 200
#: fail.lua's retry delay that stands for "the queue's backoff" (computed by the script).
BACKOFF_DELAY = -2
#: the longest wait() (seconds): a day.
MAX_WAIT = 86_400.0
#: a wait's entry on the server outlives the client's own timeout by this much
#: (ms), so a job that finishes as the client's time runs out still wakes it.
WAIT_SLACK_MS = 1000
#: extendMany.lua's code for a lease that cancel() took (errors.JobCancelled).
E_CANCELLED = next(code for code, exc in SCRIPT_ERRORS.items() if exc is JobCancelled)


class JobOptions(TypedDict, total=False):
    """The options of one job to add (``add``'s keywords, an ``add_many`` item's keys)."""

    priority: int
    group: str | None
    delay: float | None
    run_at: datetime | None
    max_attempts: int | None
    key: str | None
    expires: float | None
    headers: Mapping[str, str] | None
    depends_on: Sequence[str] | None
    on_dependency_failure: Literal["dead", "run"] | None


class AddOptions(JobOptions, total=False):
    """``add``'s keywords: a job's options, and whether to wait for a replica."""

    durable: bool | None


#: the keywords ``add`` takes besides name and data (any other is refused).
JOB_OPTION_KEYS = frozenset(JobOptions.__annotations__)
#: ``add``'s keywords (a job's options and ``durable``).
ADD_OPTION_KEYS = frozenset(AddOptions.__annotations__)
#: the keys an ``add_many`` item may have.
ITEM_KEYS = frozenset({"name", "data", *JOB_OPTION_KEYS})


@dataclass(slots=True)
class NewJob:
    """A job to add, checked and encoded (one entry of add.lua's job array)."""

    id: str
    values: list[str | int] = field(default_factory=list)


#: script return code → exception, the other way round (errors.SCRIPT_ERRORS).
SCRIPT_CODES = {exc: code for code, exc in SCRIPT_ERRORS.items()}
#: the most jobs one job may depend on.
MAX_DEPENDENCIES = 1000
#: most dead jobs one retryDead call moves (retry_dead goes on in pages).
RETRY_PAGE = 500
#: most calls one retry_dead takes (its pages, and passes over jobs kept dead
#: for a dependency a later page revived).
MAX_RETRY_CALLS = 2_000
#: ids of its dependents ``dependents()`` returns by default, and at most.
DEPENDENTS_SHOWN = 20
MAX_DEPENDENTS_SHOWN = 1000


def _dependencies(depends_on: object, job_id: str) -> str:
    """``depends_on`` checked (ids, at most MAX_DEPENDENCIES, not the job itself)
    and encoded as add.lua's JSON array text, duplicates dropped."""
    if isinstance(depends_on, str) or not isinstance(depends_on, Sequence):
        raise InvalidDependency(f"depends_on {depends_on!r:.200} must be a list of job ids")
    if not 1 <= len(depends_on) <= MAX_DEPENDENCIES:
        raise InvalidDependency(
            f"depends_on has {len(depends_on)} ids; allowed 1 … {MAX_DEPENDENCIES}"
        )
    unique = list(dict.fromkeys(depends_on))
    for dep in unique:
        try:
            ids.parse_id(dep)
        except EchoMQError as exc:
            raise InvalidDependency(f"depends_on: {exc}") from None
        if dep == job_id:
            raise InvalidDependency(f"job {job_id} cannot depend on itself")
    return orjson.dumps(unique).decode()


def _ms(raw: Any) -> datetime | None:
    value = int(raw)
    return None if value < 0 else datetime.fromtimestamp(value / 1000, tz=UTC)


def _pairs(reply: Any) -> dict[str, str]:
    """A hash reply as a dict (RESP2 gives a flat list, RESP3 a map)."""
    if isinstance(reply, dict):
        return reply
    return dict(zip(reply[::2], reply[1::2], strict=True))


def _fields_after_id(entry: Sequence[str]) -> dict[str, str]:
    """The field/value pairs that follow the id in one listing entry (no slice copies)."""
    if not len(entry) % 2:
        raise ValueError(f"job entry of {len(entry)} items: expected an id then pairs")
    rest = iter(entry)
    next(rest)
    return dict(zip(rest, rest, strict=False))  # even length checked above


def _jobs(reply: Sequence[Sequence[str]]) -> list[Job]:
    return [Job.from_hash(entry[0], _fields_after_id(entry)) for entry in reply]


class Claimed(list[Job]):
    """The jobs a claim leased, in claim order (a plain list of Job), and, when it
    leased fewer than asked, ``retry_in``: seconds until the server's clock alone
    lets a lane or the queue serve again (a throttle, a lane's or the queue's rate
    window), None when only an event can (an add, a freed slot, a resume) or the
    queue uses neither lane controls nor a queue-wide rate."""

    retry_in: float | None = None


def _claimed(reply: Sequence[Any]) -> Claimed:
    """Jobs from claim.lua's reply: deadline, claim time, one row per job, then
    perhaps "wait", when; or "wait", when, now when none could be claimed yet."""
    if not reply:
        return Claimed()
    if reply[0] in ("wait", b"wait"):
        empty = Claimed()
        empty.retry_in = max(0, int(reply[1]) - int(reply[2])) / 1000
        return empty
    rows, retry_at = reply[2:], None
    if len(rows) >= 2 and rows[-2] in ("wait", b"wait"):
        rows, retry_at = rows[:-2], int(rows[-1])
    deadline, claimed_at = ms_to_datetime(str(reply[0])), ms_to_datetime(str(reply[1]))
    jobs = Claimed(Job.from_claim(row, deadline, claimed_at) for row in rows)
    if retry_at is not None:
        jobs.retry_in = max(0, retry_at - int(reply[1])) / 1000
    return jobs


def _check_code(reply: Any, detail: str) -> Any:
    if isinstance(reply, int) and reply < 0:
        raise_for_code(reply, detail)
    return reply


def _error_for(code: Any, job_id: str) -> EchoMQError | None:
    if isinstance(code, int) and code < 0:
        exc = SCRIPT_ERRORS.get(code, EchoMQError)
        return exc(f"job {job_id}: complete refused")
    return None


def _lease_of(job: Job) -> str:
    if not isinstance(job, Job) or job.lease_token is None:
        raise LeaseLost(f"job {getattr(job, 'id', job)!r} carries no lease: claim it first")
    return job.lease_token


def _lease_ms(lease: float) -> str:
    lease_s = check_seconds("lease", lease, 0.0, MAX_LEASE, open_low=True)
    return str(max(1, round(lease_s * 1000)))


def _ids(reply: Any) -> list[str]:
    return [str(x) for x in reply]


def _none(_: Any) -> None:
    return None


def _names_a_job(job_id: object) -> bool:
    """The one rule for "no such job": a string that is not a well-formed job id
    names no job, like a well-formed unknown one (``get`` answers None, ``remove``
    False, the methods that act on the job raise JobNotFound). Only a value that
    is not a string at all is InvalidId (a bug in the caller, not a missing job)."""
    if not isinstance(job_id, str):
        ids.parse_id(job_id)  # raises InvalidId
    return ids.is_id(job_id)


def _find(job_id: str, queue: str) -> None:
    """JobNotFound before anything is sent for a string that is no job id."""
    if not _names_a_job(job_id):
        raise JobNotFound(f"no job {job_id!r:.120} in queue {queue!r} (not a job id)")


class Engine:
    """Builds the calls of one queue.

    ``durable_timeout``: the seconds a durable add waits for a replica;
    ``durable``: whether adds are durable unless a call says otherwise.
    """

    def __init__(
        self,
        queue: str,
        options: QueueOptions,
        *,
        durable: bool = False,
        durable_timeout: float = DEFAULT_DURABLE_TIMEOUT,
    ) -> None:
        self.queue = check_name("queue", queue)
        self.options = options
        self.keys = QueueKeys(queue)
        self.durable = durable
        self.durable_timeout = check_durable_timeout(durable_timeout)
        #: job name → the options of the task of that name made on this queue
        #: object, applied to a job of that name added without them (new_job)
        self.task_defaults: dict[str, JobOptions] = {}
        self._fixed = self.keys.fixed()
        self._block = [self.keys.prefix, *options.script_block()]
        # a job given no max_attempts carries -n: the stored setting, else n (add.lua)
        self._default_attempts = -options.max_attempts
        backoff = options.backoff
        self._backoff_args = [
            str(round(backoff.base * 1000)),
            repr(float(backoff.factor)),
            str(round(backoff.cap * 1000)),
            repr(float(backoff.jitter)),
        ]

    def _script(self, name: str, parse: Callable[[Any], T], *args: str) -> Call[T]:
        return Call(parse=parse, script=script(name), keys=self._fixed, args=[*self._block, *args])

    # -- the stored format ---------------------------------------------------
    def check_format(self) -> Call[int]:
        """Read the queue's stored-format version; refuse a newer one (FormatTooNew)."""
        return Call(
            parse=lambda raw: storage.check_format(self.queue, raw),
            command=("HGET", self.keys.meta, storage.FORMAT_FIELD),
        )

    # -- adding --------------------------------------------------------------
    def new_job(
        self,
        name: str,
        data: Any = None,
        *,
        job_id: str | None = None,
        **options: Unpack[JobOptions],
    ) -> NewJob:
        """Check and encode one job; raises before anything is written.

        Hot in bulk adds (``job_id`` then comes from one batch of ids): defaults
        skip their conversions, and the queue's max_attempts was checked when
        its options were built."""
        if options and not JOB_OPTION_KEYS.issuperset(options):
            check_known("add", options, ADD_OPTION_KEYS)
        check_job_name(name)
        if self.task_defaults:
            task = self.task_defaults.get(name)
            if task:
                options = {**task, **options}
        tier = check_tier(options.get("priority", 0))
        lane = lane_of(options.get("group"))
        delay, run_at = options.get("delay"), options.get("run_at")
        if delay is not None and run_at is not None:
            raise InvalidOption("give delay or run_at, not both")
        max_attempts = options.get("max_attempts")
        if max_attempts is None:
            attempts = self._default_attempts
        else:
            attempts = check_int("max_attempts", max_attempts, 1, MAX_ATTEMPTS)
        key = options.get("key")
        expires, headers = options.get("expires"), options.get("headers")
        payload = encode_payload(data, limit=self.options.max_payload)
        job_id = job_id or ids.new_id()
        depends_on = options.get("depends_on")
        deps = "" if depends_on is None else _dependencies(depends_on, job_id)
        if deps and (delay is not None or run_at is not None):
            raise InvalidOption("give depends_on or delay/run_at, not both")
        policy = options.get("on_dependency_failure")
        if policy not in (None, "dead", "run"):
            raise InvalidOption(f"on_dependency_failure {policy!r} must be 'dead' or 'run'")
        return NewJob(
            job_id,
            [
                job_id,
                name,
                payload,
                tier,
                lane,
                -1 if delay is None else delay_ms(delay),
                -1 if run_at is None else run_at_ms(run_at),
                attempts,
                "" if key is None else check_key(key),
                -1 if expires is None else expires_ms(expires),
                "" if headers is None else encode_headers(headers),
                deps,
                "run" if policy == "run" and deps else "",
            ],
        )

    def add(self, name: str, data: Any = None, **options: Unpack[AddOptions]) -> Call[str]:
        """Add one job; the reply is its id (or the id of the live job holding ``key``).

        ``durable`` (default: the queue's) waits for a replica before returning."""
        durable = options.pop("durable", None)
        job = self.new_job(name, data, **cast(JobOptions, options))
        return self._add_call([job], durable, self._parse_add_one)

    def add_many(
        self, items: Iterable[Mapping[str, Any]], *, durable: bool | None = None
    ) -> Call[list[str]]:
        """Add many jobs in one call; each item has ``name`` and add's keywords."""
        batch = list(items)
        jobs = []
        for i, (item, job_id) in enumerate(zip(batch, ids.new_ids(len(batch)), strict=True)):
            if not isinstance(item, Mapping) or "name" not in item:
                raise InvalidOption(f"add_many item {i} must be a mapping with a 'name'")
            size = len(item)
            if size == 1 or (size == 2 and "data" in item):  # the common shape: no copy
                jobs.append(self.new_job(item["name"], item.get("data"), job_id=job_id))
                continue
            if not ITEM_KEYS.issuperset(item):
                unknown = sorted(set(item) - ITEM_KEYS)
                raise InvalidOption(
                    f"add_many item {i} has unknown key(s) {unknown}; "
                    f"allowed: {', '.join(sorted(ITEM_KEYS))}"
                )
            fields: dict[str, Any] = dict(item)
            name, data = fields.pop("name"), fields.pop("data", None)
            jobs.append(self.new_job(name, data, job_id=job_id, **fields))
        return self.add_jobs(jobs, durable=durable)

    def add_jobs(self, jobs: Iterable[NewJob], *, durable: bool | None = None) -> Call[list[str]]:
        """The add call for jobs already checked by :meth:`new_job`."""
        return self._add_call(jobs, durable, self._parse_add)

    def _add_call(
        self, jobs: Iterable[NewJob], durable: bool | None, parse: Callable[[Any], T]
    ) -> Call[T]:
        packed = orjson.dumps([job.values for job in jobs]).decode()
        wait = self.durable_timeout if (self.durable if durable is None else durable) else None
        return Call(
            parse=parse,
            script=script("add"),
            keys=self._fixed,
            args=[*self._block, self.options.ordering, packed],
            durable=wait,
        )

    def _parse_add(self, reply: Any) -> list[str]:
        if reply and isinstance(reply, list) and reply[0] == SCRIPT_CODES[JobNotFound]:
            dep, state = str(reply[1]), str(reply[2])
            why = "is dead" if state == "dead" else "does not exist (never added, or pruned)"
            raise InvalidDependency(
                f"depends_on job {dep!r} {why} in queue {self.queue!r}; nothing was added"
            )
        if isinstance(reply, list) and reply and reply[0] == SCRIPT_CODES[InvalidState]:
            raise InvalidState(
                f"queue {self.queue!r} is being dropped (drop() deletes its keys page by"
                " page; adds are refused until it ends, or for 60 s after one that stopped"
                " half way): nothing was added"
            )
        if isinstance(reply, list) and reply and reply[0] == -5:
            _, lane, held, adding, most = reply
            raise LaneFull(
                f"lane {group_of(lane)!r} of queue {self.queue!r} holds {held} waiting + delayed "
                f"job(s); adding {adding} would pass its max_waiting {most} (nothing was added)"
            )
        if isinstance(reply, int):
            raise OrderingMismatch(
                f"queue {self.queue!r} exists with another ordering than "
                f"{self.options.ordering!r}; open it with the ordering it was created with"
            )
        return _ids(reply)

    def _parse_add_one(self, reply: Any) -> str:
        return self._parse_add(reply)[0]

    # -- claiming and finishing --------------------------------------------
    def claim(self, n: int = 1, lease: float = DEFAULT_LEASE) -> Call[Claimed]:
        """Lease up to ``n`` jobs in rotation order; never blocks, may return []."""
        check_int("claim n", n, 1, MAX_CLAIM)
        return self._script("claim", _claimed, str(n), _lease_ms(lease))

    def complete(self, job: Job, result: Any = None) -> Call[datetime | None]:
        """Record the result; raises LeaseLost if this caller no longer holds the lease."""
        detail = f"job {job.id}: complete refused"
        many = self.complete_many([(job, result)])
        return _derived(many, lambda reply: _ms(_check_code(reply[0], detail)))

    def complete_many(
        self, items: Sequence[tuple[Job, Any]], *, encoded: bool = False
    ) -> Call[list[EchoMQError | None]]:
        """Complete several jobs in one call; each entry of the reply is None when
        recorded, else the error (LeaseLost, JobNotFound) for that job (nothing
        is raised).

        ``encoded``: the results are JSON text already, checked by the caller
        (the worker checks each as its handler returns)."""
        if not items:
            raise InvalidOption("complete_many needs at least one (job, result) pair")
        limit = self.options.max_payload
        packed = orjson.dumps(
            [
                (
                    job.id,
                    _lease_of(job),
                    result if encoded else encode_payload(result, what="result", limit=limit),
                )
                for job, result in items
            ]
        ).decode()

        def parse(reply: Any) -> list[EchoMQError | None]:
            return [_error_for(code, job.id) for code, (job, _) in zip(reply, items, strict=True)]

        return self._script("completeMany", parse, packed)

    def fail(
        self,
        job: Job,
        error: str,
        traceback: str | None = None,
        *,
        retry: bool = True,
        retry_delay: float | None = None,
    ) -> Call[State]:
        """Record a failed attempt; the reply is FAILED (retry scheduled) or DEAD.

        ``retry_delay=None`` retries after the queue's backoff, computed by the
        script: the stored setting, else this client's ``backoff`` option."""
        token = _lease_of(job)
        if not retry:
            delay = -1
        elif retry_delay is None:
            delay = BACKOFF_DELAY
        else:
            delay = delay_ms(retry_delay)
        error_text = bounded_text("error", error, MAX_ERROR_BYTES)
        tb_text = bounded_text("traceback", traceback or "", MAX_TRACEBACK_BYTES)
        detail = f"job {job.id}: fail refused"

        def parse(reply: Any) -> State:
            state = State(_check_code(reply, detail)[0])
            if state is State.FAILED:  # when the retry runs (server clock), for the logs
                job.run_at = _ms(reply[1])
            return state

        return self._script(
            "fail", parse, job.id, token, error_text, tb_text, str(delay), *self._backoff_args
        )

    def extend(self, job: Job, lease: float = DEFAULT_LEASE) -> Call[datetime | None]:
        """Renew the lease for ``lease`` seconds from now; the reply is the new deadline."""
        token = _lease_of(job)
        detail = f"job {job.id}: extend refused"

        def parse(reply: Any) -> datetime | None:
            job.lease_deadline = _ms(_check_code(reply, detail))
            return job.lease_deadline

        return self._script("extend", parse, job.id, token, _lease_ms(lease))

    def extend_many(
        self, jobs: Sequence[Job], lease: float = DEFAULT_LEASE
    ) -> Call[list[datetime | None]]:
        """Renew several leases in one call; per job the new deadline, or None if lost."""
        if not jobs:
            raise InvalidOption("extend_many needs at least one job")
        argv = [_lease_ms(lease)]
        for job in jobs:
            argv += [job.id, _lease_of(job)]

        def parse(reply: Any) -> list[datetime | None]:
            deadlines = [_ms(r) if int(r) >= 0 else None for r in reply]
            for job, deadline, code in zip(jobs, deadlines, reply, strict=True):
                if deadline is not None:
                    job.lease_deadline = deadline
                elif int(code) == E_CANCELLED:
                    job.cancelled = True
            return deadlines

        return self._script("extendMany", parse, *argv)

    def release(self, job: Job, delay: float = 0.0, *, throttle: float | None = None) -> Call[None]:
        """Give a claimed job back unfinished, with no stall and no attempt counted
        (LeaseLost if no longer the holder): waiting again at once at its old
        place, or after ``delay`` seconds (then behind the jobs waiting then).
        ``throttle``: also do not serve the job's lane for that many seconds (in
        the same script: ``RateLimited`` from a handler)."""
        token = _lease_of(job)
        wait_ms = delay_ms(delay)
        hold = "" if throttle is None else str(check_throttle(throttle))
        detail = f"job {job.id}: release refused"

        def parse(reply: Any) -> None:
            _check_code(reply, detail)
            job.lease_token = job.lease_deadline = None
            job.state = State.DELAYED if wait_ms > 0 else State.WAITING

        return self._script("release", parse, job.id, token, str(wait_ms), hold)

    def cancel(self, job_id: str, *, retry: bool = False) -> Call[bool]:
        """Cancel a job: one that has not started (waiting, delayed, retry pending)
        is removed; a running one is taken from its worker, whose handler is
        stopped at its next heartbeat, and is dead (``retry=False``) or retried
        (``retry=True``: the attempt counts, and the retry is due when the
        cancelled lease would have ended, so it does not overlap). The reply
        is False when the job had finished already; JobNotFound if unknown."""
        _find(job_id, self.queue)
        detail = f"job {job_id}: cannot cancel"

        def parse(reply: Any) -> bool:
            return bool(_check_code(reply, detail) != "finished")

        return self._script("cancel", parse, job_id, "retry" if retry else "dead")

    def progress(self, job: Job, value: Any) -> Call[None]:
        """Store a running job's progress (JSON), only from the lease holder;
        ``get()`` returns it as ``Job.progress``."""
        token = _lease_of(job)
        payload = encode_payload(value, what="progress", limit=self.options.max_payload)
        detail = f"job {job.id}: progress refused"

        def parse(reply: Any) -> None:
            _check_code(reply, detail)
            job.progress = value

        return self._script("progress", parse, job.id, token, payload)

    def remove(self, job_id: str) -> Call[bool]:
        """Delete a job for good, whatever its state; the reply says whether it existed.

        A waiting or delayed job leaves its lane or the delayed set, an active
        one loses its lease (its worker's outcome is then dropped, and
        ``complete`` raises JobNotFound), and its idempotency key is released."""
        if not _names_a_job(job_id):  # no such job: nothing to remove
            return Call(parse=lambda _: False, command=("EXISTS", self.keys.job("")))
        return self._script("remove", lambda r: bool(int(r)), job_id)

    def retry_dead(
        self, job_ids: Sequence[str] | None = None, limit: int = 1000
    ) -> Call[list[str] | Next[list[str]]]:
        """Move dead jobs (given ids, else the oldest ``limit``) back with fresh
        attempts; returns the ids moved. A job added with ``depends_on`` goes back
        to blocked while a dependency has not completed (one retried in the same
        call included); it stays dead while a dependency is dead and not retried
        with it, or gone before the job ever ran (retry its dependency with it).
        Works in pages of RETRY_PAGE jobs, one script call each."""
        check_int("limit", limit, 1, 100_000)
        given = list(job_ids) if job_ids else None  # none (or []): the oldest ``limit``
        for job_id in given or ():
            ids.parse_id(job_id)
        return _Revival(self, given, limit).first()

    def purge_dead(
        self, job_ids: Sequence[str] | None = None, limit: int = 1000
    ) -> Call[list[str]]:
        """Delete dead jobs for good (given ids, else the oldest ``limit``); returns their ids."""
        return self._dead_jobs("purgeDead", job_ids, limit)

    def _dead_jobs(self, name: str, job_ids: Sequence[str] | None, limit: int) -> Call[list[str]]:
        check_int("limit", limit, 1, 100_000)
        for job_id in job_ids or ():
            ids.parse_id(job_id)
        return self._script(name, _ids, str(limit), *(job_ids or ()))

    def maintain(self) -> Call[MaintenanceReport | Next[MaintenanceReport]]:
        """Promote due jobs, return expired leases, prune finished jobs, and fire
        due schedules (at most schedules.FIRE_BUDGET per call)."""

        def parse(r: Any) -> MaintenanceReport | Next[MaintenanceReport]:
            now = _ms(r[5])
            assert now is not None
            report = MaintenanceReport(
                int(r[0]), int(r[1]), int(r[2]), _ms(r[3]), _ms(r[4]), now, 0, 0, _ms(r[7])
            )
            report = replace(report, released=int(r[9]), releasing=int(r[10]))
            due = r[8]
            fires = fires_to_make(due, int(r[5]))
            if not fires:
                return replace(report, next_schedule=None) if due else report
            return Next(self._fire_schedules(report, fires, len(due) // 3))

        return self._script("maintain", parse, str(FIRE_BUDGET))

    def _fire_schedules(
        self, report: MaintenanceReport, fires: list[list[str]], due: int
    ) -> Call[MaintenanceReport | Next[MaintenanceReport]]:
        packed = orjson.dumps(fires).decode()

        def parse(r: Any) -> MaintenanceReport:
            outcomes = [str(x) for x in r[0]]
            skipped = sum(1 for x in outcomes if x.startswith("skipped:"))
            fired = sum(1 for x in outcomes if x) - skipped
            earliest = _ms(r[1])
            # due schedules this client could not fire (it logged why) stay due:
            # the worker waits for its period rather than spin on them
            if earliest is not None and earliest <= report.server_time and due < FIRE_BUDGET:
                earliest = None
            return replace(report, fired=fired, skipped=skipped, next_schedule=earliest)

        return self._script("fireSchedules", parse, self.options.ordering, packed)

    # -- schedules -------------------------------------------------------------
    def schedule(
        self,
        schedule_id: str,
        *,
        cron: str | None = None,
        every: float | None = None,
        name: str,
        data: Any = None,
        priority: int = 0,
        group: str | None = None,
        tz: str = "UTC",
        max_attempts: int | None = None,
        skip_if_running: bool = False,
        catch_up: bool = True,
    ) -> Call[datetime | Next[datetime | None] | None]:
        """Create or replace a schedule: a job ``name`` with ``data`` added at every
        fire time of ``cron`` (5 fields, in zone ``tz``) or ``every`` seconds.

        The reply is its next fire time (None while it is paused). Replacing a
        schedule keeps its next fire time when its timing (cron/every/tz) is
        unchanged, and keeps it paused if it was. ``skip_if_running``: a fire
        makes no job while the previous fire's job is waiting, delayed,
        retrying or active. ``catch_up=False``: a fire reached late (more than
        one period or 60 s after its time) makes no job; by default fires missed
        while no worker ran yield one catch-up job. ``max_attempts=None``: the
        queue's stored setting at each fire, else this client's default. Raises
        InvalidSchedule (or the option's error) before anything is written."""
        check_schedule_id(schedule_id)
        timing = Timing.checked(cron, every, tz)
        check_job_name(name)
        for flag, value in (("skip_if_running", skip_if_running), ("catch_up", catch_up)):
            if not isinstance(value, bool):
                raise InvalidOption(f"{flag} {value!r} must be True or False")
        attempts = (
            self._default_attempts
            if max_attempts is None
            else check_int("max_attempts", max_attempts, 1, MAX_ATTEMPTS)
        )
        base = Definition(
            timing,
            name,
            encode_payload(data, limit=self.options.max_payload),
            check_tier(priority),
            lane_of(group),
            attempts,
            skip_if_running,
            catch_up,
        )

        def write(reply: Any) -> Next[datetime | None]:
            now, rows = int(reply[0]), reply[1]
            old = Definition.decode(rows[0][1]) if rows else None
            keep = old is not None and old.timing.same_as(timing)
            anchor = old.timing.anchor_ms if old is not None and keep else now
            revision = 0 if old is None else old.revision
            new = replace(base, timing=replace(timing, anchor_ms=anchor), revision=revision + 1)
            return Next(
                self._script(
                    "schedule",
                    written,
                    self.options.ordering,
                    schedule_id,
                    new.encode(),
                    str(revision),
                    str(new.timing.next_after(now)),
                    "1" if keep else "0",
                    str(MAX_SCHEDULES),
                )
            )

        def written(reply: Any) -> datetime | Next[datetime | None] | None:
            code = int(reply)
            if code == -10:  # replaced by someone else since the read: read again
                return Next(read)
            if code == -11:
                raise InvalidSchedule(
                    f"queue {self.queue!r} holds {MAX_SCHEDULES} schedules (the limit); "
                    f"cannot add {schedule_id!r}"
                )
            if code == -3:
                raise OrderingMismatch(
                    f"queue {self.queue!r} exists with another ordering than "
                    f"{self.options.ordering!r}"
                )
            return _ms(reply)

        read: Call[Any] = self._read_schedules(schedule_id, write)
        return read

    def _read_schedules(self, schedule_id: str, parse: Callable[[Any], T]) -> Call[T]:
        return self._script("listSchedules", parse, schedule_id, "0", "1")

    def schedules(self) -> Call[list[ScheduleInfo]]:
        """Every schedule (id order) with its next fire, last fire and that fire's
        job's state (``last_outcome``)."""

        def parse(reply: Any) -> list[ScheduleInfo]:
            return [ScheduleInfo.from_row(row) for row in reply[1]]

        return self._script("listSchedules", parse, "", "1", str(MAX_SCHEDULES))

    def unschedule(self, schedule_id: str) -> Call[bool]:
        """Remove a schedule; the reply says whether it existed. Jobs it added stay."""
        return self._schedule_control("remove", check_schedule_id(schedule_id))

    def pause_schedule(self, schedule_id: str) -> Call[bool]:
        """Stop a schedule firing (it keeps its definition); False if unknown."""
        return self._schedule_control("pause", check_schedule_id(schedule_id))

    def resume_schedule(self, schedule_id: str) -> Call[bool | Next[bool]]:
        """Fire a paused schedule again, from its first fire time after now (fires
        while it was paused are not caught up); False if unknown."""
        check_schedule_id(schedule_id)

        def write(reply: Any) -> bool | Next[bool]:
            now, rows = int(reply[0]), reply[1]
            if not rows:
                return False
            d = Definition.decode(rows[0][1])
            next_ms = str(d.timing.next_after(now))
            return Next(
                self._schedule_control(
                    "resume", schedule_id, str(d.revision), next_ms, parse=written
                )
            )

        def written(reply: Any) -> bool | Next[bool]:
            return Next(read) if int(reply) == -10 else bool(int(reply))

        read: Call[bool | Next[bool]] = self._read_schedules(schedule_id, write)
        return read

    def _schedule_control(
        self, action: str, *args: str, parse: Callable[[Any], Any] = lambda r: bool(int(r))
    ) -> Call[Any]:
        return self._script("scheduleControl", parse, action, *args)

    # -- dependencies ------------------------------------------------------------
    def dependency_results(self, job_id: str) -> Call[dict[str, Any]]:
        """The results of the jobs ``job_id`` was added to depend on (depends_on), by
        id, in depends_on order. A dependency that did not complete maps to a
        DependencyFailed (a value, not raised: a job added with
        ``on_dependency_failure="run"`` runs anyway and sees it; retention keeps a
        completed one until its dependents finish, so "removed" means removed by
        hand, docs/lifecycle.md "Dependencies"). A handler calls it with its own
        job's id. JobNotFound for an unknown id."""
        _find(job_id, self.queue)

        def one(dep: str, state: str, result: str, error: str) -> Any:
            if state == State.COMPLETED:
                return decode_payload(result)
            if state == State.DEAD:
                return DependencyFailed(f"dependency {dep} died: {error}")
            if not state:
                return DependencyFailed(f"dependency {dep} was removed (or pruned)")
            return DependencyFailed(f"dependency {dep} has not completed (it is {state})")

        def parse(reply: Any) -> dict[str, Any]:
            if reply == SCRIPT_CODES[JobNotFound]:
                raise JobNotFound(f"no job {job_id!r} in queue {self.queue!r}")
            return {
                str(reply[i]): one(*(str(x) for x in reply[i : i + 4]))
                for i in range(0, len(reply), 4)
            }

        return self._script("dependencyResults", parse, job_id)

    def dependents(self, job_id: str, count: int = DEPENDENTS_SHOWN) -> Call[Dependents]:
        """The jobs that depend on ``job_id``: how many are blocked on it and how
        many it released may still read its result, with up to ``count`` ids of
        each (any of them, sorted). JobNotFound for an unknown id."""
        _find(job_id, self.queue)
        check_int("count", count, 0, MAX_DEPENDENTS_SHOWN)

        def parse(reply: Any) -> Dependents:
            if reply == SCRIPT_CODES[JobNotFound]:
                raise JobNotFound(f"no job {job_id!r} in queue {self.queue!r}")
            _, blocked, blocked_ids, readers, reader_ids = reply
            return Dependents(
                int(blocked),
                sorted(map(str, blocked_ids)),
                int(readers),
                sorted(map(str, reader_ids)),
            )

        return self._script("dependents", parse, job_id, str(count))

    # -- settings on the server ----------------------------------------------
    def configure(self, **changes: Unpack[settings.Settings]) -> Call[dict[str, Any]]:
        """Store queue-wide settings on the server, obeyed by every client of the queue
        (docs/settings.md): retention (``keep_completed``, ``keep_completed_age``,
        ``keep_dead``, ``keep_dead_age``), ``backoff``, ``max_stalls``, the default
        ``max_attempts``, ``event_stream_length`` (0: no events), and the queue-wide
        ``concurrency`` and ``rate`` that cap all lanes together (enforced by every
        claim, docs/ordering.md "Queue-wide limits"). A later call changes only what it
        names; None removes a stored value. Every value is checked first: one bad
        value raises InvalidOption and nothing is written. The reply is every
        stored setting after the change."""
        args = settings.encode(changes)
        return self._script("configure", lambda r: settings.decode(_pairs(r)), *args)

    def settings(self) -> Call[dict[str, Any]]:
        """The queue's stored settings by name (what nobody stored is left out: each
        client's own options apply to it; see ``echomq.settings.defaults``)."""
        return Call(
            parse=lambda r: settings.decode(_pairs(r)), command=("HGETALL", self.keys.settings)
        )

    # -- waiting for a job ----------------------------------------------------
    def watch(self, job_id: str, timeout: float) -> Call[Job | None]:
        """Register a wait on ``job_id`` for ``timeout`` seconds (server clock), or read
        the job at once: the reply is the Job if it is completed or dead, else None
        (the wait is registered: the server publishes the id on the queue's done
        channel when the job becomes final). JobNotFound for an unknown id.
        ``Queue.wait`` subscribes first, then sends this (echomq.sending.waiters)."""
        _find(job_id, self.queue)
        seconds = check_seconds("wait timeout", timeout, 0.0, MAX_WAIT, open_low=False)
        wait_ms = math.ceil(seconds * 1000) + WAIT_SLACK_MS
        detail = f"job {job_id}: no such job to wait for"

        def parse(reply: Any) -> Job | None:
            _check_code(reply, detail)
            if reply == 0:
                return None
            return Job.from_hash(job_id, _pairs(reply))

        return self._script("wait", parse, job_id, str(wait_ms))

    # -- the worker's doorbell ------------------------------------------------
    def wait_for_ring(self, worker_id: str, timeout: float, longest: float) -> Call[Wake]:
        """Block up to ``timeout`` seconds (at most ``longest``, the sender's bound
        below its socket timeout) on the doorbell and this worker's stop bell."""
        stop_key = self.keys.stop_bell(worker_id)
        block = max(MIN_BLOCK, math.ceil(min(timeout, longest) * 1000) / 1000)

        def parse(reply: Any) -> Wake:
            if reply is None:
                return None
            return "stop" if str(reply[0]) == stop_key else "ring"

        return Call(parse=parse, command=("BLPOP", stop_key, self.keys.wake, block), blocks=block)

    # -- events ----------------------------------------------------------------
    def read_events(self, after: str | None, count: int = EVENT_PAGE) -> Call[EventPage]:
        """One page of the queue's event stream after event id ``after`` (exclusive;
        None: no events, the cursor is the last event's id, i.e. "from now"): at
        most ``count`` stream entries (an entry holds the events of one call)."""
        cursor = "" if after is None else check_event_id(after)
        check_int("count", count, 1, MAX_EVENT_PAGE)
        return self._script(
            "readEvents", partial(parse_page, after=cursor, count=count), cursor, str(count)
        )

    def wait_for_events(self, after: str, timeout: float, longest: float) -> Call[bool]:
        """Block up to ``timeout`` seconds (at most ``longest``) until the stream has
        an event after ``after``; True if one came."""
        block_ms = max(1, math.ceil(min(timeout, longest) * 1000))
        return Call(
            parse=lambda reply: bool(reply),
            command=(
                "XREAD",
                "COUNT",
                1,
                "BLOCK",
                block_ms,
                "STREAMS",
                self.keys.events,
                f"{after}-0",
            ),
            blocks=block_ms / 1000,
        )

    def ring(self) -> Call[None]:
        """Wake one idle worker (the doorbell keeps one element, like the scripts' ring)."""
        return self._script("ring", _none)

    def ring_stop_bell(self, worker_id: str) -> Call[None]:
        """End one worker's doorbell wait at once (a stopping worker rings its own);
        the element expires on its own should nobody pop it."""
        return Call(
            parse=_none,
            script=script("stopBell"),
            keys=[self.keys.stop_bell(worker_id)],
            args=[str(STOP_BELL_TTL_MS)],
        )

    # -- reading -------------------------------------------------------------
    def get(self, job_id: str) -> Call[Job | None]:
        """One job with every field, or None when no job has this id (also for a
        string that is not a job id: a web handler answers 404 for both)."""
        known = _names_a_job(job_id)

        def parse(reply: Any) -> Job | None:
            h = _pairs(reply)
            return Job.from_hash(job_id, h) if h else None

        return Call(parse=parse, command=("HGETALL", self.keys.job(job_id if known else "")))

    def peek(self, job_id: str, preview: int = PREVIEW_BYTES) -> Call[JobPreview | None]:
        """One job as ``get`` reads it, except that each long field (``LONG_FIELDS``:
        data, result, progress, error, traceback, headers, dependencies) longer than
        ``preview`` bytes is cut on the server: only its first bytes cross the wire
        (JobPreview.cut, with its whole size). None when there is no such job."""
        known = _names_a_job(job_id)
        check_int("preview", preview, 1, MAX_PAYLOAD_LIMIT)

        def parse(reply: Any) -> JobPreview | None:
            if not reply:
                return None
            h = _pairs(reply[0])
            sizes = _pairs(reply[1])
            cut = {}
            for name, short in LONG_FIELDS.items():
                if short in sizes:
                    cut[name] = FieldPreview(h.pop(short), int(sizes[short]))
            return JobPreview(Job.from_hash(job_id, h), cut)

        target = job_id if known else ""
        return self._script("peekJob", parse, target, str(preview), *LONG_FIELDS.values())

    def read_field(self, job_id: str, name: str) -> Call[str | None]:
        """One long field of a job whole, as stored (JSON text for data, result,
        progress, headers and dependencies; plain text for error and traceback):
        what ``peek`` cut. None when there is no such job or it has no such field."""
        short = LONG_FIELDS.get(name) if isinstance(name, str) else None
        if short is None:
            raise InvalidOption(f"field {name!r:.40} is not one of {', '.join(LONG_FIELDS)}")
        target = job_id if _names_a_job(job_id) else ""
        return Call(parse=lambda raw: raw, command=("HGET", self.keys.job(target), short))

    def jobs(
        self,
        state: str,
        *,
        offset: int = 0,
        count: int = 100,
        group: str | None = None,
        summary: bool = False,
    ) -> Call[list[Job]]:
        """A page of jobs in one state (``waiting`` lists one lane in claim order).

        ``summary``: read only what a list row shows (see SUMMARY_ERROR_BYTES)."""
        check_int("offset", offset, 0, 10**9)
        check_int("count", count, 1, 10_000)
        if state == State.WAITING:
            target, newest = "lane:" + lane_of(group), "0"
        elif state in FINISHED_SETS:
            target, newest = state, "1" if state in (State.COMPLETED, State.DEAD) else "0"
        else:
            raise InvalidOption(f"state {state!r} is not one of {', '.join(LISTED_STATES)}")
        preview = str(SUMMARY_ERROR_BYTES if summary else 0)
        return self._script("listJobs", _jobs, target, str(offset), str(count), newest, preview)

    def dead(self, *, offset: int = 0, count: int = 100) -> Call[list[Job]]:
        """Dead jobs, newest first, with their last error."""
        return self.jobs(State.DEAD, offset=offset, count=count)

    def stats(self, lane_limit: int = 1000) -> Call[QueueStats | Next[QueueStats]]:
        """Counts by state and waiting jobs by lane: the ring's lanes in ring order,
        then the parked lanes, at most ``lane_limit``. One script call for the
        counts and the ring's first lanes, then a bounded call per further page
        of lanes (echomq.lanepages)."""
        check_int("lane_limit", lane_limit, 1, 1_000_000)
        first = min(lane_limit, lanepages.PAGE)
        return self._script("stats", partial(self._parse_stats, lane_limit), str(first))

    def _parse_stats(self, lane_limit: int, reply: Any) -> QueueStats | Next[QueueStats]:
        c, flat = reply[0], reply[1]
        # stats.lua counts the first six states in order, then blocked at index 10
        counts = {name: int(c[i]) for i, name in enumerate(LISTED_STATES[:6])}
        counts[State.BLOCKED.value] = int(c[10]) if len(c) > 10 else 0
        # "lost" (listed jobs whose hash was gone) where the server counts it
        totals = dict(
            zip(("added", "completed", "failed", "lost"), map(int, reply[3]), strict=False)
        )
        last = _ms(reply[4]) if reply[4] != "" else None
        stats = QueueStats(
            self.queue, counts, {}, int(c[6]), c[7] == "1", c[8] or "", int(c[9]), totals, last
        )
        ring = [
            LaneInfo(
                group_of(flat[i]), i // 4, int(flat[i + 2]), int(flat[i + 1]), int(flat[i + 3])
            )
            for i in range(0, len(flat), 4)
        ]

        def finish(lanes: list[LaneInfo]) -> QueueStats:
            return replace(stats, lanes={lane.group: lane.backlog for lane in lanes})

        pages = lanepages.LanePages(self._script, "waiting", lane_limit, finish, ring)
        return pages.go_on(str(reply[5][0]), str(reply[5][1]))

    def lanes(self, limit: int = 1000) -> Call[list[LaneInfo] | Next[list[LaneInfo]]]:
        """The lanes in ring order with weight, backlog, claims served, the turn left
        and their controls, then the parked lanes and the lanes with controls that
        hold no waiting job (position -1); at most ``limit``, read in pages of
        bounded server work (echomq.lanepages)."""
        check_int("limit", limit, 1, 1_000_000)
        return lanepages.LanePages(self._script, "all", limit, list).call()

    def set_lane(
        self,
        group: str | None,
        *,
        weight: int | Unset | None = UNSET,
        concurrency: int | Unset | None = UNSET,
        rate: tuple[int, float] | Unset | None = UNSET,
        paused: bool | Unset = UNSET,
        max_waiting: int | Unset | None = UNSET,
        throttle: float | Unset | None = UNSET,
    ) -> Call[None]:
        """Change one lane's controls (docs/ordering.md "Lane controls"): an omitted
        argument is left as it is, ``None`` removes that control. ``concurrency=k``:
        at most k jobs of the lane active at once; ``rate=(max, per_seconds)``: at
        most max claims start in any window of per_seconds; ``paused``: not served;
        ``max_waiting=n``: adds that would make the lane hold more than n waiting +
        delayed jobs raise LaneFull; ``throttle=None`` lifts a throttle in force
        (``throttle()`` / ``RateLimited``) at once and wakes an idle worker
        (``throttle=seconds`` is ``throttle(group, seconds)``)."""
        lane = lane_of(group)
        pairs = encode_controls(
            weight=weight,
            concurrency=concurrency,
            rate=rate,
            paused=paused,
            max_waiting=max_waiting,
            throttle=throttle,
        )
        if not pairs:
            raise InvalidOption(
                "set_lane needs one of weight, concurrency, rate, paused, max_waiting, throttle"
            )
        return self._script("setLane", _none, lane, *pairs)

    def change(
        self,
        job_id: str,
        *,
        priority: int | Unset = UNSET,
        group: str | Unset | None = UNSET,
    ) -> Call[Job]:
        """Move a waiting or delayed job to another tier (``priority``) and/or lane
        (``group``; None is the default lane), keeping its arrival: it stands where
        it would had it been added with those options. Raises JobNotFound for an
        unknown id, InvalidState for a job in another state, LaneFull when the new
        lane is at its max_waiting."""
        _find(job_id, self.queue)
        tier = "" if isinstance(priority, Unset) else str(check_tier(priority))
        moving = "0" if isinstance(group, Unset) else "1"
        lane = "" if isinstance(group, Unset) else lane_of(group)

        def parse(reply: Any) -> Job:
            if isinstance(reply, int):
                raise JobNotFound(f"no job {job_id!r} in queue {self.queue!r}")
            if reply and reply[0] == -6:
                raise InvalidState(
                    f"job {job_id!r} is {reply[1]}: change() moves only waiting or delayed jobs"
                )
            if reply and reply[0] == -5:
                self._parse_add(reply)
            return Job.from_hash(job_id, _pairs(reply))

        return self._script("change", parse, job_id, tier, moving, lane)

    def throttle(self, group: str | None, seconds: float) -> Call[None]:
        """Do not serve ``group``'s lane for ``seconds`` from now (server clock); a
        throttle never shortens one already in force."""
        lane = lane_of(group)
        return self._script("setLane", _none, lane, "t", str(check_throttle(seconds)))

    def waiting_tiers(
        self, lane_limit: int = 100, tier_limit: int = 32
    ) -> Call[dict[str | None, TierCounts]]:
        """Waiting jobs per lane (ring order) and tier, lowest tiers first."""
        check_int("lane_limit", lane_limit, 1, 10_000)
        check_int("tier_limit", tier_limit, 1, 1_000)

        def parse(reply: Any) -> dict[str | None, TierCounts]:
            out: dict[str | None, TierCounts] = {}
            for i in range(0, len(reply), 3):
                flat = reply[i + 1]
                counts = {int(flat[j]): int(flat[j + 1]) for j in range(0, len(flat), 2)}
                out[group_of(reply[i])] = TierCounts(counts, bool(int(reply[i + 2])))
            return out

        return self._script("waitingTiers", parse, str(lane_limit), str(tier_limit))

    def drop_page(self, cursor: int) -> Call[int]:
        """Delete one page of this queue's keys (SCAN from ``cursor``); the reply is
        the next cursor, 0 when the whole keyspace was scanned."""
        check_int("cursor", cursor, 0, 2**64 - 1)
        return self._script("dropPage", int, str(cursor))

    def exists(self) -> Call[bool]:
        """Whether the queue ever held a job (its meta hash exists)."""
        return Call(parse=lambda n: bool(int(n)), command=("EXISTS", self.keys.meta))

    # -- weights and pausing ---------------------------------------------------
    def set_weight(self, group: str | None, weight: int) -> Call[None]:
        """Claims per turn for ``group``'s lane (1 … 1000); takes effect at its next
        turn. Records the event ``lane_changed`` (setLane.lua)."""
        lane = lane_of(group)
        return self._script("setLane", _none, lane, "w", str(check_weight(weight)))

    def weights(self) -> Call[dict[str | None, int]]:
        """Every weight that was set, by group (an unset weight is 1)."""

        def parse(reply: Any) -> dict[str | None, int]:
            return {group_of(k): int(v) for k, v in _pairs(reply).items()}

        return Call(parse=parse, command=("HGETALL", self.keys.weights))

    def pause(self) -> Call[None]:
        """Stop serving claims from this queue (adds still succeed); records the
        event ``paused`` (pauseQueue.lua)."""
        return self._script("pauseQueue", _none, "1")

    def resume(self) -> Call[None]:
        """Serve claims again after ``pause``: records the event ``resumed`` and
        rings the doorbell, so an idle worker claims at once (pauseQueue.lua)."""
        return self._script("pauseQueue", _none, "0")


class _Revival:
    """One retry_dead in pages: a pass over the given ids (RETRY_PAGE per call) or
    over the dead set from its oldest (the jobs a page kept dead stay in front:
    the next page starts past them); then, while a pass moved some and kept some
    dead for their dependencies, a pass over the kept ones (their dependency may
    have been revived by a later page)."""

    def __init__(self, engine: Engine, given: list[str] | None, limit: int) -> None:
        self.engine, self.limit = engine, limit
        self.todo = given
        self.moved: list[str] = []
        self.pass_moved = 0  # moved by the pass under way
        self.kept: list[str] = []  # kept dead by the pass under way
        self.offset = self.looked = 0

    def first(self) -> Call[list[str] | Next[list[str]]]:
        return self._page()

    def _page(self) -> Call[list[str] | Next[list[str]]]:
        if self.todo is None:  # the oldest dead jobs, from rank offset
            page = min(RETRY_PAGE, self.limit - self.looked)
            return self.engine._script(
                "retryDead", partial(self._parse, page), str(page), str(self.offset)
            )
        chunk, self.todo = self.todo[:RETRY_PAGE], self.todo[RETRY_PAGE:]
        return self.engine._script(
            "retryDead", partial(self._parse, len(chunk)), str(RETRY_PAGE), "0", *chunk
        )

    def _parse(self, asked: int, reply: Any) -> list[str] | Next[list[str]]:
        moved, kept, looked = list(reply[0]), list(reply[1]), int(reply[2])
        self.moved += moved
        self.pass_moved += len(moved)
        self.kept += kept
        if self.todo is None:
            self.offset += len(kept)
            self.looked += looked
            if looked == asked and self.looked < self.limit:
                return Next(self._page(), most=MAX_RETRY_CALLS)
        elif self.todo:
            return Next(self._page(), most=MAX_RETRY_CALLS)
        if not (self.kept and self.pass_moved):
            return self.moved
        self.todo, self.kept, self.pass_moved = self.kept, [], 0  # another pass
        return Next(self._page(), most=MAX_RETRY_CALLS)


def _derived(call: Call[Any], parse: Callable[[Any], T]) -> Call[T]:
    """``call`` with another reply parser."""
    return Call(parse=parse, script=call.script, keys=call.keys, args=call.args)
