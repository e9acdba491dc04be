"""One job's calls: adding (new_job, add, add_many), reading one job (get, peek,
read_field), and acting on one by id (change, cancel, remove)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple, TypeVar, Unpack, cast

import orjson

from echomq import ids
from echomq.batches import MAX_CHILDREN, check_batch_id
from echomq.call import Call
from echomq.dedupe import dedupe_element
from echomq.engine.base import EngineBase, find, names_a_job
from echomq.engine.dependencies import encode_dependencies
from echomq.engine.job_options import (
    ADD_OPTION_KEYS,
    ITEM_KEYS,
    JOB_OPTION_KEYS,
    AddOptions,
    JobOptions,
)
from echomq.engine.replies import check_code, heads_code, pairs
from echomq.engine.replies import ids as decode_ids
from echomq.errors import (
    E_INVALID_STATE,
    E_LANE_FULL,
    E_NOT_FOUND,
    BatchNotFound,
    EchoMQError,
    InvalidDependency,
    InvalidOption,
    InvalidState,
    LaneFull,
    OrderingMismatch,
    raise_for_code,
)
from echomq.job import PAYLOAD_PIECES, Job, encode_payload, join_pieces
from echomq.keys import group_of, lane_of
from echomq.lanecontrols import UNSET, Unset
from echomq.options import (
    MAX_ATTEMPTS,
    MAX_PAYLOAD_LIMIT,
    check_int,
    check_job_name,
    check_known,
    delay_ms,
    encode_headers,
    expires_ms,
    run_at_ms,
)
from echomq.reports import LONG_FIELDS, FieldPreview, JobPreview
from echomq.score import check_tier
from echomq.scripts import script
from echomq.tags import encode_tags

T = TypeVar("T")
#: ``peek`` returns at most this many bytes of each long field by default (64 KiB).
PREVIEW_BYTES = 64 * 1024


@dataclass(slots=True)
class NewJob:
    """A job to add, checked and encoded (one entry of add.lua's job array)."""

    id: str
    values: list[str | int] = field(default_factory=list)


# -- replies ------------------------------------------------------------------


class MissingDependency(NamedTuple):
    """add.lua's refusal ``{E_NOT_FOUND, id, state}``: a dependency unknown or dead."""

    code: int
    dependency: str
    state: str


class LaneFullRefusal(NamedTuple):
    """add.lua's and change.lua's ``{E_LANE_FULL, lane, held, adding, max_waiting}``."""

    code: int
    lane: str
    held: int
    adding: int
    max_waiting: int


class WrongState(NamedTuple):
    """change.lua's ``{E_INVALID_STATE, state}``: neither waiting nor delayed."""

    code: int
    state: str


class Preview(NamedTuple):
    """peekJob.lua's ``{fields, cuts}``: the job's hash with long fields cut, and
    the whole size of each cut field."""

    fields: Any
    cuts: Any


class BatchRefusal(NamedTuple):
    """add.lua's ``{E_INVALID_STATE, "batch", batch id, why, children}``."""

    code: int
    marker: str
    batch: str
    why: str
    children: int


def batch_refusal(queue: str, refusal: BatchRefusal) -> EchoMQError:
    if refusal.why == "unknown":
        return BatchNotFound(
            f"no batch {refusal.batch!r} in queue {queue!r} (never made in this queue, or "
            "gone with its retention): nothing was added"
        )
    if refusal.why == "full":
        return InvalidOption(
            f"batch {refusal.batch} holds {refusal.children} children; adding these would "
            f"pass the most a batch holds, {MAX_CHILDREN:,}: nothing was added"
        )
    return InvalidState(
        f"batch {refusal.batch} is {refusal.why}: it takes no more children (nothing was added)"
    )


def lane_full(queue: str, reply: list[Any]) -> LaneFull:
    refusal = LaneFullRefusal(*reply)
    return LaneFull(
        f"lane {group_of(refusal.lane)!r} of queue {queue!r} holds {refusal.held} waiting + "
        f"delayed job(s); adding {refusal.adding} would pass its max_waiting "
        f"{refusal.max_waiting} (nothing was added)"
    )


def decode_add(queue: str, ordering: str, reply: Any) -> list[str]:
    """add.lua's reply: the ids, or a refusal (nothing was added)."""
    if isinstance(reply, int):  # E_ORDERING
        raise OrderingMismatch(
            f"queue {queue!r} exists with another ordering than "
            f"{ordering!r}; open it with the ordering it was created with"
        )
    if reply and isinstance(reply[0], int):  # ids are text: a refusal with details
        if heads_code(reply, E_NOT_FOUND):
            missing = MissingDependency(*reply)
            why = {
                "dead": "is dead",
                "failed": "is a batch that failed",
                "cancelled": "is a batch that was cancelled",
            }.get(missing.state, "does not exist (never added, or pruned)")
            raise InvalidDependency(
                f"depends_on job {str(missing.dependency)!r} {why} in queue {queue!r}; "
                "nothing was added"
            )
        if heads_code(reply, E_INVALID_STATE) and reply[1] == "batch":
            raise batch_refusal(queue, BatchRefusal(*reply))
        if heads_code(reply, E_INVALID_STATE):
            raise InvalidState(
                f"queue {queue!r} is being dropped (drop() deletes its keys page by"
                " page; adds are refused until it ends, or for 60 s after one that stopped"
                " half way): nothing was added"
            )
        if heads_code(reply, E_LANE_FULL):
            raise lane_full(queue, reply)
    return decode_ids(reply)


def decode_add_one(queue: str, ordering: str, reply: Any) -> str:
    return decode_add(queue, ordering, reply)[0]


def decode_job(job_id: str, reply: Any) -> Job | None:
    """A job's hash (HGETALL), None when empty."""
    h = pairs(reply)
    return Job.from_hash(job_id, h) if h else None


def decode_preview(job_id: str, reply: Any) -> JobPreview | None:
    """peekJob.lua's reply (``{}`` when there is no such job)."""
    if not reply:
        return None
    preview = Preview(*reply)
    h, sizes = pairs(preview.fields), pairs(preview.cuts)
    cut = {}
    for name, short in LONG_FIELDS.items():
        if short in sizes:
            cut[name] = FieldPreview(h.pop(short), int(sizes[short]))
    return JobPreview(Job.from_hash(job_id, h), cut)


def decode_change(queue: str, job_id: str, reply: Any) -> Job:
    """change.lua's reply: the job's hash, or E_NOT_FOUND, or a refusal with details."""
    if isinstance(reply, int):  # E_NOT_FOUND
        raise_for_code(reply, f"no job {job_id!r} in queue {queue!r}")
    if heads_code(reply, E_INVALID_STATE):
        raise InvalidState(
            f"job {job_id!r} is {WrongState(*reply).state}: "
            "change() moves only waiting or delayed jobs"
        )
    if heads_code(reply, E_LANE_FULL):
        raise lane_full(queue, reply)
    return Job.from_hash(job_id, pairs(reply))


def decode_cancel(detail: str, reply: Any) -> bool:
    """cancel.lua's reply: what became of the job ("finished": nothing)."""
    return bool(check_code(reply, detail) != "finished")


def decode_removed(reply: Any) -> bool:
    return bool(int(reply))


def never_existed(_: Any) -> bool:
    return False


class JobCalls(EngineBase):
    """Adding jobs, reading one job, and acting on one by id."""

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
        key, dedupe = dedupe_element(options.get("key"), options.get("dedupe"), options)
        expires, headers = options.get("expires"), options.get("headers")
        payload = encode_payload(data, limit=self.options.max_payload)
        job_id = job_id or ids.new_id()
        depends_on = options.get("depends_on")
        deps = "" if depends_on is None else encode_dependencies(depends_on, job_id)
        if deps and (delay is not None or run_at is not None):
            raise InvalidOption("give depends_on or delay/run_at, not both")
        policy = options.get("on_dependency_failure")
        tags = options.get("tags")
        batch = options.get("batch")
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
                key,
                -1 if expires is None else expires_ms(expires),
                "" if headers is None else encode_headers(headers),
                deps,
                "run" if policy == "run" and deps else "",
                "" if tags is None else encode_tags(tags),
                dedupe,
                "" if batch is None else check_batch_id(batch),
            ],
        )

    def add(self, name: str, data: Any = None, **options: Unpack[AddOptions]) -> Call[str]:
        """Add one job; the reply is its id (or the id of the live job holding ``key``).

        ``durable`` (default: the queue's) waits for a replica before returning."""
        durable = options.pop("durable", None)
        job = self.new_job(name, data, **cast(JobOptions, options))
        decode = partial(decode_add_one, self.queue, self.options.ordering)
        return self._add_call([job], durable, decode)

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
        decode = partial(decode_add, self.queue, self.options.ordering)
        return self._add_call(jobs, durable, decode)

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

    # -- one job by id -------------------------------------------------------
    def get(self, job_id: str) -> Call[Job | None]:
        """One job with every field, or None when no job has this id (also for a
        string that is not a job id: a web handler answers 404 for both)."""
        known = names_a_job(job_id)
        return Call(
            parse=partial(decode_job, job_id),
            command=("HGETALL", self.keys.job(job_id if known else "")),
        )

    def peek(self, job_id: str, preview: int = PREVIEW_BYTES) -> Call[JobPreview | None]:
        """One job as ``get`` reads it, except that each long field (``LONG_FIELDS``:
        data, result, progress, error, traceback, headers, dependencies) longer than
        ``preview`` bytes is cut on the server: only its first bytes cross the wire
        (JobPreview.cut, with its whole size). None when there is no such job."""
        known = names_a_job(job_id)
        check_int("preview", preview, 1, MAX_PAYLOAD_LIMIT)
        target = job_id if known else ""
        return self._script(
            "peekJob",
            partial(decode_preview, job_id),
            target,
            str(preview),
            *LONG_FIELDS.values(),
        )

    def read_field(self, job_id: str, name: str) -> Call[str | None]:
        """One long field of a job whole, as stored (JSON text for data, result,
        progress, headers and dependencies; plain text for error and traceback):
        what ``peek`` cut. None when there is no such job or it has no such field."""
        short = LONG_FIELDS.get(name) if isinstance(name, str) else None
        if short is None:
            raise InvalidOption(f"field {name!r:.40} is not one of {', '.join(LONG_FIELDS)}")
        key = self.keys.job(job_id if names_a_job(job_id) else "")
        if short == "d":  # a payload may be stored in pieces (echomq.job.PAYLOAD_PIECES)
            return Call(parse=join_pieces, command=("HMGET", key, *PAYLOAD_PIECES))
        return Call(parse=lambda raw: raw, command=("HGET", key, short))

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
        find(job_id, self.queue)
        tier = "" if isinstance(priority, Unset) else str(check_tier(priority))
        moving = "0" if isinstance(group, Unset) else "1"
        lane = "" if isinstance(group, Unset) else lane_of(group)
        decode = partial(decode_change, self.queue, job_id)
        return self._script("change", decode, job_id, tier, moving, lane)

    def cancel(self, job_id: str, *, retry: bool = False) -> Call[bool]:
        """Cancel a job: one that has not started (waiting, delayed, retry pending)
        is removed; a running one is taken from its worker, whose handler is
        stopped at its next heartbeat, and is dead (``retry=False``) or retried
        (``retry=True``: the attempt counts, and the retry is due when the
        cancelled lease would have ended, so it does not overlap). The reply
        is False when the job had finished already; JobNotFound if unknown."""
        find(job_id, self.queue)
        decode = partial(decode_cancel, f"job {job_id}: cannot cancel")
        return self._script("cancel", decode, job_id, "retry" if retry else "dead")

    def remove(self, job_id: str) -> Call[bool]:
        """Delete a job for good, whatever its state; the reply says whether it existed.

        A waiting or delayed job leaves its lane or the delayed set, an active
        one loses its lease (its worker's outcome is then dropped, and
        ``complete`` raises JobNotFound), and its idempotency key is released."""
        if not names_a_job(job_id):  # no such job: nothing to remove
            return Call(parse=never_existed, command=("EXISTS", self.keys.job("")))
        return self._script("remove", decode_removed, job_id)
