"""A worker's calls: claiming jobs, finishing them (complete, fail, release),
renewing their leases and reporting progress; and the doorbell an idle worker
waits on (wait_for_ring, ring, ring_stop_bell)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from typing import Any, Literal, NamedTuple, TypeVar

import orjson

from echomq.call import Call
from echomq.engine.base import EngineBase
from echomq.engine.replies import check_code, error_for, ms, nothing
from echomq.errors import E_CANCELLED, EchoMQError, InvalidOption, LeaseLost
from echomq.job import Job, State, encode_payload, ms_to_datetime
from echomq.joblogs import HEARTBEAT_LOG_BYTES, take_entry, take_text
from echomq.lanecontrols import check_throttle
from echomq.options import (
    DEFAULT_LEASE,
    MAX_CLAIM,
    MAX_ERROR_BYTES,
    MAX_LEASE,
    MAX_TRACEBACK_BYTES,
    bounded_text,
    check_int,
    check_seconds,
    delay_ms,
)
from echomq.registry import check_worker_id
from echomq.scripts import script

T = TypeVar("T")
#: what woke a doorbell wait: a ring, this worker's stop bell, or nothing (timeout).
Wake = Literal["ring", "stop"] | None
#: how long a stop bell nobody popped is kept (milliseconds).
STOP_BELL_TTL_MS = 10_000
#: a wait shorter than this is not worth a BLPOP (and BLPOP 0 blocks forever).
MIN_BLOCK = 0.002
#: fail.lua's retry delay that stands for "the queue's backoff" (computed by the script).
BACKOFF_DELAY = -2
#: claim.lua's marker of "nothing more can be claimed before this time".
WAIT_MARKERS = ("wait", b"wait")


class Claimed(list[Job]):
    """The jobs a claim leased, in claim order (a plain list of Job), and, when it
    leased fewer than asked, ``retry_in``: seconds until the server's clock alone
    lets a lane or the queue serve again (a throttle, a lane's or the queue's rate
    window), None when only an event can (an add, a freed slot, a resume) or the
    queue uses neither lane controls nor a queue-wide rate."""

    retry_in: float | None = None


class NothingClaimable(NamedTuple):
    """claim.lua's ``{"wait", when, now}``: no job could be claimed before ``when``."""

    marker: str
    retry_at: str
    now: str


class FailReply(NamedTuple):
    """fail.lua's ``{state, when}``: "failed" and the retry's time, or "dead" and now."""

    state: str
    when: str


def decode_claim(reply: Sequence[Any]) -> Claimed:
    """claim.lua's reply: the lease deadline, the claim time, one row per job, then
    perhaps "wait", when; or "wait", when, now when none could be claimed yet."""
    if not reply:
        return Claimed()
    if reply[0] in WAIT_MARKERS:
        wait = NothingClaimable(*reply)
        empty = Claimed()
        empty.retry_in = max(0, int(wait.retry_at) - int(wait.now)) / 1000
        return empty
    deadline_ms, claimed_ms = reply[0], reply[1]
    rows, retry_at = reply[2:], None
    if len(rows) >= 2 and rows[-2] in WAIT_MARKERS:
        rows, retry_at = rows[:-2], int(rows[-1])
    deadline, claimed_at = ms_to_datetime(str(deadline_ms)), ms_to_datetime(str(claimed_ms))
    jobs = Claimed(Job.from_claim(row, deadline, claimed_at) for row in rows)
    if retry_at is not None:
        jobs.retry_in = max(0, retry_at - int(claimed_ms)) / 1000
    return jobs


def decode_claim_by(worker: str, reply: Sequence[Any]) -> Claimed:
    """A worker's claim: each job knows its worker."""
    jobs = decode_claim(reply)
    for job in jobs:
        job.worker = worker
    return jobs


def decode_completions(items: Sequence[tuple[Job, Any]], reply: Any) -> list[EchoMQError | None]:
    """completeMany.lua's reply: per job, None when recorded, else its error."""
    return [error_for(code, job.id) for code, (job, _) in zip(reply, items, strict=True)]


class CompletedAndClaimed(NamedTuple):
    """completeClaim.lua's ``{completions, claim}``, decoded: per completed job None
    when recorded, else its error (LeaseLost, JobNotFound); then the jobs claimed."""

    completions: list[EchoMQError | None]
    claimed: Claimed


def decode_complete_claim(
    items: Sequence[tuple[Job, Any]],
    decode_jobs: Callable[[Sequence[Any]], Claimed],
    reply: Sequence[Any],
) -> CompletedAndClaimed:
    """completeClaim.lua's reply: completeMany's per-job codes, then claim's reply."""
    completions, claim = reply
    return CompletedAndClaimed(decode_completions(items, completions), decode_jobs(claim))


def decode_completed(detail: str, reply: Any) -> datetime | None:
    """The one job of a completeMany call: its completion time."""
    [code] = reply
    return ms(check_code(code, detail))


def decode_fail(job: Job, detail: str, reply: Any) -> State:
    outcome = FailReply(*check_code(reply, detail))
    state = State(outcome.state)
    if state is State.FAILED:  # when the retry runs (server clock), for the logs
        job.run_at = ms(outcome.when)
    return state


def decode_extend(job: Job, detail: str, reply: Any) -> datetime | None:
    job.lease_deadline = ms(check_code(reply, detail))
    return job.lease_deadline


def decode_extend_many(jobs: Sequence[Job], reply: Any) -> list[datetime | None]:
    """extendMany.lua's reply: per job its new deadline, or a code (lost, cancelled)."""
    deadlines = [ms(r) if int(r) >= 0 else None for r in reply]
    for job, deadline, code in zip(jobs, deadlines, reply, strict=True):
        if deadline is not None:
            job.lease_deadline = deadline
        elif int(code) == E_CANCELLED:
            job.cancelled = True
    return deadlines


def decode_release(job: Job, detail: str, delayed: bool, reply: Any) -> None:
    check_code(reply, detail)
    job.lease_token = job.lease_deadline = None
    job.state = State.DELAYED if delayed else State.WAITING


def decode_progress(job: Job, detail: str, value: Any, reply: Any) -> None:
    check_code(reply, detail)
    job.progress = value


def decode_wake(stop_key: str, reply: Any) -> Wake:
    """BLPOP's reply on the stop bell and the doorbell: which one rang, or None."""
    if reply is None:
        return None
    key, _ = reply
    return "stop" if str(key) == stop_key else "ring"


def lease_of(job: Job) -> str:
    """The lease token ``job`` carries (LeaseLost if it carries none)."""
    if not isinstance(job, Job) or job.lease_token is None:
        raise LeaseLost(f"job {getattr(job, 'id', job)!r} carries no lease: claim it first")
    return job.lease_token


def lease_ms(lease: float) -> str:
    lease_s = check_seconds("lease", lease, 0.0, MAX_LEASE, open_low=True)
    return str(max(1, round(lease_s * 1000)))


def derived(call: Call[Any], parse: Callable[[Any], T]) -> Call[T]:
    """``call`` with another reply parser."""
    return Call(parse=parse, script=call.script, keys=call.keys, args=call.args)


class ClaimCalls(EngineBase):
    """Claiming and finishing jobs, their leases and progress, and the doorbell."""

    def claim(
        self, n: int = 1, lease: float = DEFAULT_LEASE, *, worker: str | None = None
    ) -> Call[Claimed]:
        """Lease up to ``n`` jobs in rotation order; never blocks, may return [].

        ``worker``: the id of the claiming worker, kept as each job's ``worker``
        (written by the write the lease makes anyway: no command more)."""
        check_int("claim n", n, 1, MAX_CLAIM)
        if worker is None:
            return self._script("claim", decode_claim, str(n), lease_ms(lease))
        worker_id = check_worker_id(worker)
        decode = partial(decode_claim_by, worker_id)
        return self._script("claim", decode, str(n), lease_ms(lease), worker_id)

    def complete(self, job: Job, result: Any = None) -> Call[datetime | None]:
        """Record the result; raises LeaseLost if this caller no longer holds the lease."""
        many = self.complete_many([(job, result)])
        return derived(many, partial(decode_completed, f"job {job.id}: complete refused"))

    def complete_many(
        self, items: Sequence[tuple[Job, Any]], *, encoded: bool = False
    ) -> Call[list[EchoMQError | None]]:
        """Complete several jobs in one call; each entry of the reply is None when
        recorded, else the error (LeaseLost, JobNotFound) for that job (nothing
        is raised).

        ``encoded``: the results are JSON text already, checked by the caller
        (the worker checks each as its handler returns)."""
        packed = self._completion_rows("complete_many", items, encoded)
        decode = partial(decode_completions, items)
        return self._script("completeMany", decode, packed)

    def complete_and_claim(
        self,
        items: Sequence[tuple[Job, Any]],
        n: int = 1,
        lease: float = DEFAULT_LEASE,
        *,
        worker: str | None = None,
        encoded: bool = False,
    ) -> Call[CompletedAndClaimed]:
        """Complete jobs and claim up to ``n`` more in one atomic call (one round
        trip: a worker's finished job and the job for the slot it frees).

        The completions are complete_many's (each None or its error, nothing
        raised), the claim is claim's; a refused completion (LeaseLost,
        JobNotFound) does not stop the claim. ``encoded`` as for complete_many."""
        packed = self._completion_rows("complete_and_claim", items, encoded)
        check_int("claim n", n, 1, MAX_CLAIM)
        args = [packed, str(n), lease_ms(lease)]
        decode_jobs: Callable[[Sequence[Any]], Claimed] = decode_claim
        if worker is not None:
            worker_id = check_worker_id(worker)
            decode_jobs = partial(decode_claim_by, worker_id)
            args.append(worker_id)
        decode = partial(decode_complete_claim, items, decode_jobs)
        return self._script("completeClaim", decode, *args)

    def _completion_rows(self, what: str, items: Sequence[tuple[Job, Any]], encoded: bool) -> str:
        """The jobs to complete as completeMany.lua's ARGV[7]: one JSON array of
        [id, lease token, result, perhaps the lines its handler logged]."""
        if not items:
            raise InvalidOption(f"{what} needs at least one (job, result) pair")
        limit = self.options.max_payload
        rows = []
        for job, result in items:
            row = [
                job.id,
                lease_of(job),
                result if encoded else encode_payload(result, what="result", limit=limit),
            ]
            entry = take_entry(job)  # the lines its handler logged (echomq.joblogs)
            if entry is not None:
                row.append(entry)
            rows.append(row)
        return orjson.dumps(rows).decode()

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
        token = lease_of(job)
        if not retry:
            delay = -1
        elif retry_delay is None:
            delay = BACKOFF_DELAY
        else:
            delay = delay_ms(retry_delay)
        error_text = bounded_text("error", error, MAX_ERROR_BYTES)
        tb_text = bounded_text("traceback", traceback or "", MAX_TRACEBACK_BYTES)
        decode = partial(decode_fail, job, f"job {job.id}: fail refused")
        args = [job.id, token, error_text, tb_text, str(delay), *self._backoff_args]
        entry = take_text(job)  # the lines its handler logged (echomq.joblogs)
        if entry is not None:
            args.append(entry)
        return self._script("fail", decode, *args)

    def extend(self, job: Job, lease: float = DEFAULT_LEASE) -> Call[datetime | None]:
        """Renew the lease for ``lease`` seconds from now; the reply is the new deadline."""
        token = lease_of(job)
        decode = partial(decode_extend, job, f"job {job.id}: extend refused")
        return self._script("extend", decode, job.id, token, lease_ms(lease))

    def extend_many(
        self, jobs: Sequence[Job], lease: float = DEFAULT_LEASE
    ) -> Call[list[datetime | None]]:
        """Renew several leases in one call; per job the new deadline, or None if lost."""
        if not jobs:
            raise InvalidOption("extend_many needs at least one job")
        argv = [lease_ms(lease)]
        budget = HEARTBEAT_LOG_BYTES  # all the jobs' lines together: bounded per call
        for job in jobs:
            # with the lines its handler logged since the last call (echomq.joblogs)
            token = lease_of(job)
            text = take_text(job, budget) or ""
            budget = max(0, budget - len(text.encode()))
            argv += [job.id, token, text]
        return self._script("extendMany", partial(decode_extend_many, jobs), *argv)

    def release(self, job: Job, delay: float = 0.0, *, throttle: float | None = None) -> Call[None]:
        """Give a claimed job back unfinished, with no stall and no attempt counted
        (LeaseLost if no longer the holder): waiting again at once at its old
        place, or after ``delay`` seconds (then behind the jobs waiting then).
        ``throttle``: also do not serve the job's lane for that many seconds (in
        the same script: ``RateLimited`` from a handler)."""
        token = lease_of(job)
        wait_ms = delay_ms(delay)
        hold = "" if throttle is None else str(check_throttle(throttle))
        decode = partial(decode_release, job, f"job {job.id}: release refused", wait_ms > 0)
        entry = take_text(job)  # the lines its handler logged (echomq.joblogs)
        tail = [] if entry is None else [entry]
        return self._script("release", decode, job.id, token, str(wait_ms), hold, *tail)

    def progress(self, job: Job, value: Any) -> Call[None]:
        """Store a running job's progress (JSON), only from the lease holder;
        ``get()`` returns it as ``Job.progress``."""
        token = lease_of(job)
        payload = encode_payload(value, what="progress", limit=self.options.max_payload)
        decode = partial(decode_progress, job, f"job {job.id}: progress refused", value)
        return self._script("progress", decode, job.id, token, payload)

    # -- the worker's doorbell ------------------------------------------------
    def wait_for_ring(self, worker_id: str, timeout: float, longest: float) -> Call[Wake]:
        """Block up to ``timeout`` seconds (at most ``longest``, the sender's bound
        below its socket timeout) on the doorbell and this worker's stop bell."""
        stop_key = self.keys.stop_bell(worker_id)
        block = max(MIN_BLOCK, math.ceil(min(timeout, longest) * 1000) / 1000)
        return Call(
            parse=partial(decode_wake, stop_key),
            command=("BLPOP", stop_key, self.keys.wake, block),
            blocks=block,
        )

    def ring(self) -> Call[None]:
        """Wake one idle worker (the doorbell keeps one element, like the scripts' ring)."""
        return self._script("ring", nothing)

    def ring_stop_bell(self, worker_id: str) -> Call[None]:
        """End one worker's doorbell wait at once (a stopping worker rings its own);
        the element expires on its own should nobody pop it."""
        return Call(
            parse=nothing,
            script=script("stopBell"),
            keys=[self.keys.stop_bell(worker_id)],
            args=[str(STOP_BELL_TTL_MS)],
        )
