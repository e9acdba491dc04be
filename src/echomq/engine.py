"""Every queue operation as data, with no I/O: what to send, and how to read the reply.

An operation is a :class:`Call`: either a script (by name, with KEYS and ARGV)
or one plain command, plus the function that turns the server's reply into
the Python value the caller gets. ``Queue`` and ``SyncQueue`` only send calls.
All input is checked here, before anything is sent, so bad input writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

import orjson

from echomq import ids
from echomq.errors import (
    SCRIPT_ERRORS,
    EchoMQError,
    InvalidOption,
    LeaseLost,
    OrderingMismatch,
    raise_for_code,
)
from echomq.job import Job, State, encode_payload, ms_to_datetime
from echomq.keys import META_PATTERN, QueueKeys, check_name, group_of, lane_of, queue_of_meta
from echomq.options import (
    MAX_ATTEMPTS,
    MAX_CLAIM,
    MAX_LEASE,
    QueueOptions,
    check_int,
    check_job_name,
    check_key,
    check_seconds,
    check_weight,
    delay_ms,
    run_at_ms,
)
from echomq.score import check_tier
from echomq.scripts import Script, script

T = TypeVar("T")
FINISHED_SETS = ("delayed", "failed", "active", "completed", "dead")


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One round trip: a script call (``script`` set) or a plain ``command``."""

    parse: Callable[[Any], T]
    script: Script | None = None
    keys: Sequence[str] = ()
    args: Sequence[str] = ()
    command: tuple[str, ...] = ()

    def wire(self, *, by_sha: bool = True) -> tuple[Any, ...]:
        """The command to send: EVALSHA (or, after NOSCRIPT, EVAL with the source)
        for a script call, else the plain command."""
        if self.script is None:
            return self.command
        head = ("EVALSHA", self.script.sha) if by_sha else ("EVAL", self.script.source)
        return (*head, len(self.keys), *self.keys, *self.args)


@dataclass(frozen=True, slots=True)
class LaneInfo:
    """One lane of the ring, as ``lanes()`` reports it."""

    group: str | None
    position: int
    weight: int
    backlog: int
    served: int
    turn_left: int | None = None


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
class QueuePage:
    """One page of a walk over the server's queues (each queue that ever held a job).

    ``cursor`` is where the next page starts; 0 means the walk is over, and
    complete unless ``truncated`` (a cluster's primaries had more keys, see
    Engine.scan_queues)."""

    names: list[str]
    cursor: int
    truncated: bool = False


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


@dataclass(slots=True)
class NewJob:
    """A job to add, checked and encoded (one entry of add-12.lua's job array)."""

    id: str
    values: list[str | int] = field(default_factory=list)


def _ms(raw: Any) -> datetime | None:
    value = int(raw)
    return None if value < 0 else datetime.fromtimestamp(value / 1000, tz=UTC)


def _pairs(flat: Sequence[str]) -> dict[str, str]:
    return dict(zip(flat[::2], flat[1::2], strict=True))


def _fields_after_id(entry: Sequence[str]) -> dict[str, str]:
    """The field/value pairs that follow the id in one claim entry (no slice copies)."""
    if not len(entry) % 2:
        raise ValueError(f"claim entry of {len(entry)} items: expected an id then pairs")
    rest = iter(entry)
    next(rest)
    return dict(zip(rest, rest, strict=False))  # even length checked above


def _jobs(reply: Sequence[Sequence[str]]) -> list[Job]:
    return [Job.from_hash(entry[0], _fields_after_id(entry)) for entry in reply]


def _claimed(reply: Sequence[Any]) -> list[Job]:
    """Jobs from claim-12.lua's reply: deadline, claim time, then one row per job."""
    if not reply:
        return []
    deadline, claimed_at = ms_to_datetime(str(reply[0])), ms_to_datetime(str(reply[1]))
    return [Job.from_claim(row, deadline, claimed_at) for row in reply[2:]]


def _queue_page(reply: Any) -> QueuePage:
    """A SCAN reply (``(cursor, keys)``; a cluster client's ``({node: cursor}, keys)``)."""
    cursor, keys = reply
    names = sorted({q for q in map(queue_of_meta, keys) if q is not None})
    if isinstance(cursor, dict):  # cluster: one step per primary, see Engine.scan_queues
        return QueuePage(names, 0, truncated=any(int(c) != 0 for c in cursor.values()))
    return QueuePage(names, int(cursor))


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


class Engine:
    """Builds the calls of one queue."""

    def __init__(self, queue: str, options: QueueOptions) -> None:
        self.queue = check_name("queue", queue)
        self.options = options
        self.keys = QueueKeys(queue)
        self._fixed = self.keys.fixed()
        self._block = [self.keys.prefix, *options.script_block()]
        self._default_attempts = options.max_attempts

    def _script(self, name: str, parse: Callable[[Any], T], *args: str) -> Call[T]:
        return Call(parse=parse, script=script(name), keys=self._fixed, args=[*self._block, *args])

    # -- adding --------------------------------------------------------------
    def new_job(
        self,
        name: str,
        data: Any = None,
        *,
        priority: int = 0,
        group: str | None = None,
        delay: float | None = None,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        key: str | None = None,
        job_id: str | None = None,
    ) -> NewJob:
        """Check and encode one job; raises before anything is written.

        Hot in bulk adds (``job_id`` then comes from one batch of ids): defaults
        skip their conversions, and the queue's max_attempts was checked when
        its options were built."""
        check_job_name(name)
        tier = check_tier(priority)
        lane = lane_of(group)
        if delay is not None and run_at is not None:
            raise InvalidOption("give delay or run_at, not both")
        if max_attempts is None:
            attempts = self._default_attempts
        else:
            attempts = check_int("max_attempts", max_attempts, 1, MAX_ATTEMPTS)
        payload = encode_payload(data, limit=self.options.max_payload)
        job_id = job_id or ids.new_id()
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
            ],
        )

    def add_jobs(self, jobs: Iterable[NewJob]) -> Call[list[str]]:
        packed = orjson.dumps([job.values for job in jobs]).decode()
        return self._script("add", self._parse_add, self.options.ordering, packed)

    def add_many(self, items: Iterable[Mapping[str, Any]]) -> Call[list[str]]:
        batch = list(items)
        jobs = []
        for i, (item, job_id) in enumerate(zip(batch, ids.new_ids(len(batch)), strict=True)):
            if not isinstance(item, Mapping) or "name" not in item:
                raise InvalidOption(f"add_many item {i} must be a mapping with a 'name'")
            size = len(item)
            if size == 1 or (size == 2 and "data" in item):  # the common shape: no copy
                jobs.append(self.new_job(item["name"], item.get("data"), job_id=job_id))
            else:
                fields = dict(item)
                name, data = fields.pop("name"), fields.pop("data", None)
                jobs.append(self.new_job(name, data, job_id=job_id, **fields))
        return self.add_jobs(jobs)

    def _parse_add(self, reply: Any) -> list[str]:
        if isinstance(reply, int):
            raise OrderingMismatch(
                f"queue {self.queue!r} exists with another ordering than "
                f"{self.options.ordering!r}; open it with the ordering it was created with"
            )
        return [str(x) for x in reply]

    # -- claiming and finishing --------------------------------------------
    def claim(self, n: int, lease: float) -> Call[list[Job]]:
        check_int("claim n", n, 1, MAX_CLAIM)
        lease_s = check_seconds("lease", lease, 0.0, MAX_LEASE, open_low=True)
        return self._script("claim", _claimed, str(n), str(max(1, round(lease_s * 1000))))

    def complete(self, job: Job, result: Any = None) -> Call[datetime | None]:
        detail = f"job {job.id}: complete refused"
        many = self.complete_many([(job, result)])
        return Call(
            parse=lambda r: _ms(_check_code(r[0], detail)),
            script=many.script,
            keys=many.keys,
            args=many.args,
        )

    def complete_many(
        self, items: Sequence[tuple[Job, Any]], *, encoded: bool = False
    ) -> Call[list[EchoMQError | None]]:
        """Complete several jobs in one call; each entry of the reply is None when
        recorded, else the error (LeaseLost, JobNotFound) for that job.

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
        token = _lease_of(job)
        if retry_delay is None:
            retry_delay = self.options.backoff.delay(max(1, job.attempts))
        delay = delay_ms(retry_delay) if retry else -1
        detail = f"job {job.id}: fail refused"

        def parse(reply: Any) -> State:
            state = State(_check_code(reply, detail)[0])
            if state is State.FAILED:  # the retry's fire time (server clock), for logs
                job.run_at = _ms(reply[1])
            return state

        return self._script("fail", parse, job.id, token, str(error), traceback or "", str(delay))

    def extend(self, job: Job, lease: float) -> Call[datetime | None]:
        token = _lease_of(job)
        lease_s = check_seconds("lease", lease, 0.0, MAX_LEASE, open_low=True)
        detail = f"job {job.id}: extend refused"
        return self._script(
            "extend",
            lambda r: _ms(_check_code(r, detail)),
            job.id,
            token,
            str(max(1, round(lease_s * 1000))),
        )

    def extend_many(self, jobs: Sequence[Job], lease: float) -> Call[list[datetime | None]]:
        """Renew several leases in one call; per job the new deadline, or None if lost."""
        if not jobs:
            raise InvalidOption("extend_many needs at least one job")
        lease_s = check_seconds("lease", lease, 0.0, MAX_LEASE, open_low=True)
        argv = [str(max(1, round(lease_s * 1000)))]
        for job in jobs:
            argv += [job.id, _lease_of(job)]

        def parse(reply: Any) -> list[datetime | None]:
            return [_ms(r) if int(r) >= 0 else None for r in reply]

        return self._script("extendMany", parse, *argv)

    def release(self, job: Job) -> Call[None]:
        """Give an unfinished job back: waiting at its old place, attempt not counted."""
        token = _lease_of(job)
        detail = f"job {job.id}: release refused"
        return self._script("release", lambda r: _check_code(r, detail) and None, job.id, token)

    def progress(self, job: Job, value: Any) -> Call[None]:
        """Store a running job's progress (JSON), only from the lease holder."""
        token = _lease_of(job)
        payload = encode_payload(value, what="progress", limit=self.options.max_payload)
        detail = f"job {job.id}: progress refused"
        return self._script(
            "progress", lambda r: _check_code(r, detail) and None, job.id, token, payload
        )

    def remove(self, job_id: str) -> Call[bool]:
        ids.parse_id(job_id)
        return self._script("remove", lambda r: bool(int(r)), job_id)

    def retry_dead(
        self, job_ids: Sequence[str] | None = None, limit: int = 1000
    ) -> Call[list[str]]:
        check_int("limit", limit, 1, 100_000)
        for job_id in job_ids or ():
            ids.parse_id(job_id)
        return self._script(
            "retryDead", lambda r: [str(x) for x in r], str(limit), *(job_ids or ())
        )

    def purge_dead(
        self, job_ids: Sequence[str] | None = None, limit: int = 1000
    ) -> Call[list[str]]:
        check_int("limit", limit, 1, 100_000)
        for job_id in job_ids or ():
            ids.parse_id(job_id)
        return self._script(
            "purgeDead", lambda r: [str(x) for x in r], str(limit), *(job_ids or ())
        )

    def maintain(self) -> Call[MaintenanceReport]:
        def parse(r: Any) -> MaintenanceReport:
            now = _ms(r[5])
            assert now is not None
            return MaintenanceReport(int(r[0]), int(r[1]), int(r[2]), _ms(r[3]), _ms(r[4]), now)

        return self._script("maintain", parse)

    # -- reading -------------------------------------------------------------
    def get(self, job_id: str) -> Call[Job | None]:
        ids.parse_id(job_id)

        def parse(reply: Any) -> Job | None:
            h = _pairs(reply) if isinstance(reply, list) else dict(reply)
            return Job.from_hash(job_id, h) if h else None

        return Call(parse=parse, command=("HGETALL", self.keys.job(job_id)))

    def list_jobs(
        self, which: str, *, offset: int = 0, count: int = 100, group: str | None = None
    ) -> Call[list[Job]]:
        """A page of jobs: a state set, or (``which="waiting"``) one lane in claim order."""
        check_int("offset", offset, 0, 10**9)
        check_int("count", count, 1, 10_000)
        if which == "waiting":
            target, newest = "lane:" + lane_of(group), "0"
        elif which in FINISHED_SETS:
            target, newest = which, "1" if which in ("completed", "dead") else "0"
        else:
            raise InvalidOption(
                f"state {which!r} is not one of waiting, {', '.join(FINISHED_SETS)}"
            )
        return self._script("listJobs", _jobs, target, str(offset), str(count), newest)

    def stats(self, lane_limit: int = 1000) -> Call[QueueStats]:
        check_int("lane_limit", lane_limit, 1, 1_000_000)
        return self._script("stats", self._parse_stats, str(lane_limit))

    def _parse_stats(self, reply: Any) -> QueueStats:
        c, flat = reply[0], reply[1]
        names = ("waiting", "delayed", "failed", "active", "completed", "dead")
        counts = {name: int(c[i]) for i, name in enumerate(names)}
        lanes = {group_of(flat[i]): int(flat[i + 1]) for i in range(0, len(flat), 4)}
        totals = dict(zip(("added", "completed", "failed"), map(int, reply[3]), strict=True))
        last = _ms(reply[4]) if reply[4] != "" else None
        return QueueStats(
            self.queue, counts, lanes, int(c[6]), c[7] == "1", c[8] or "", int(c[9]), totals, last
        )

    def lanes(self, limit: int = 1000) -> Call[list[LaneInfo]]:
        check_int("limit", limit, 1, 1_000_000)

        def parse(reply: Any) -> list[LaneInfo]:
            flat, turn = reply[1], reply[2]
            out = []
            for pos, i in enumerate(range(0, len(flat), 4)):
                lane = flat[i]
                left = int(turn[1]) if turn[0] == lane and turn[1] != "" and pos == 0 else None
                out.append(
                    LaneInfo(
                        group_of(lane),
                        pos,
                        int(flat[i + 2]),
                        int(flat[i + 1]),
                        int(flat[i + 3]),
                        left,
                    )
                )
            return out

        return self._script("stats", parse, str(limit))

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

    def scan_queues(self, cursor: int = 0, count: int = 1000) -> Call[QueuePage]:
        """One SCAN step over the meta keys of every queue on this queue's server.

        ``count`` keys are examined per step (bounded work on the server); a
        step may find none. On a cluster client redis-py sends the step to
        every primary with the same cursor, so there only a first step
        (cursor 0) is meaningful: it examines ``count`` keys per primary, the
        page is final, and ``truncated`` if a primary had more keys. (Walking
        each primary to its end needs per-node sends, which belong in the
        sending layer.)"""
        check_int("cursor", cursor, 0, 2**64 - 1)
        check_int("count", count, 1, 1_000_000)
        return Call(
            parse=_queue_page,
            command=("SCAN", str(cursor), "MATCH", META_PATTERN, "COUNT", str(count)),
        )

    # -- weights and pausing (single commands: atomic by themselves) ----------
    def set_weight(self, group: str | None, weight: int) -> Call[None]:
        lane = lane_of(group)
        check_weight(weight)
        return Call(parse=lambda _: None, command=("HSET", self.keys.weights, lane, str(weight)))

    def weights(self) -> Call[dict[str | None, int]]:
        def parse(reply: Any) -> dict[str | None, int]:
            h = _pairs(reply) if isinstance(reply, list) else dict(reply)
            return {group_of(k): int(v) for k, v in h.items()}

        return Call(parse=parse, command=("HGETALL", self.keys.weights))

    def pause(self) -> Call[None]:
        return Call(parse=lambda _: None, command=("HSET", self.keys.meta, "paused", "1"))

    def resume(self) -> Call[None]:
        return Call(parse=lambda _: None, command=("HDEL", self.keys.meta, "paused"))
