"""Running one job (Oban's executor): call its handler through the middleware,
bound it by the timeout, record the outcome through the core scripts, and call
the hooks.

Async handlers run on the worker's loop, inside the job's own task; sync
handlers run on daemon threads (:mod:`echomq.worker.threads`), or in a process
of their own for a task with ``isolation="process"``
(:mod:`echomq.worker.isolation`). A handler past its timeout is cancelled
(async), its process killed (process), or left behind on its thread (thread:
Python cannot stop a thread), and the attempt counts as a failure whose
traceback is the stack where the handler was stuck. A handler whose lease is
lost, or whose job was cancelled, is stopped the same way and nothing is
recorded: the job is no longer this worker's to finish. ``Retry`` and
``Unrecoverable`` (echomq.control) choose the failure's fate. Completions go
through :mod:`.completions` (batched).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import sys
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any, Protocol

from echomq.control import RateLimited, Retry, Unrecoverable, set_current_job
from echomq.errors import EchoMQError, JobNotFound, LeaseLost, PayloadError
from echomq.escaping import escape_line
from echomq.job import Job, State, encode_payload, on_job_loop, running_loop
from echomq.joblogs import JobLog
from echomq.queue import Queue
from echomq.worker.completions import CompletionBatcher
from echomq.worker.handlers import HandlerSpec, Middleware, UnknownNames
from echomq.worker.isolation import IsolatedFailure, run_in_process
from echomq.worker.leases import Heartbeat
from echomq.worker.resilience import TRANSIENT, persist
from echomq.worker.threads import DaemonThreads

log = logging.getLogger("echomq.worker")

Hook = Callable[[Job], Any]

#: how long shutdown waits for cancelled handlers to unwind.
CANCEL_GRACE = 1.0
#: the longest error message and traceback stored with a job (characters).
MAX_ERROR = 4096
MAX_TRACEBACK = 64 * 1024
#: how long a sync handler's set_progress waits for the server.
PROGRESS_TIMEOUT = 30.0


#: errors of a completion's call that claims (complete_and_claim) after which the
#: result is recorded as any other (a bad result fails the job; a lost call is retried)
RECORDED_APART: tuple[type[BaseException], ...] = (PayloadError, *TRANSIENT)
#: errors after which an outcome stays unrecorded (the lease is gone, or the server is)
NOT_RECORDED: tuple[type[BaseException], ...] = (LeaseLost, JobNotFound, *TRANSIENT)


class HandlerTimeout(EchoMQError):
    """A handler ran longer than the worker's per-job timeout (stored as the job's error)."""


@dataclass(frozen=True, slots=True)
class Hooks:
    """Callbacks on job events; each gets the Job, updated with its outcome.

    ``on_failed`` follows every failed attempt, then ``on_retried`` (a retry is
    scheduled) or ``on_dead``; ``on_stalled`` means this worker lost the lease
    of a job it was running. Async callbacks are awaited; an exception in a
    callback is logged and never stops the worker.
    """

    on_completed: Hook | None = None
    on_failed: Hook | None = None
    on_retried: Hook | None = None
    on_dead: Hook | None = None
    on_stalled: Hook | None = None

    async def fire(self, hook: Hook | None, job: Job) -> None:
        if hook is None:
            return
        try:
            result = hook(job)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("hook %s raised for job %s", getattr(hook, "__name__", hook), job.id)


@dataclass(frozen=True, slots=True)
class Runtime:
    """What all executions of one worker run share."""

    queue: Queue
    specs: Mapping[str, HandlerSpec]  # per job name: how to run it
    middleware: tuple[Middleware, ...]
    unknown: UnknownNames
    lease: float
    hooks: Hooks
    heartbeat: Heartbeat
    completions: CompletionBatcher
    threads: DaemonThreads
    loop: asyncio.AbstractEventLoop
    handler_done: Callable[[], None]  # a handler returned or raised: its slot is free
    log_jobs: bool = True  # one INFO line per completed job
    log_level: str = "INFO"  # a handler's records at or above it go to its job's log
    # the worker's claims for a slot a completed job frees (echomq.worker.worker):
    # None, or what the completion and the claim in one call need
    hand_over: HandOver | None = None


class HandOver(Protocol):
    """How a completed job hands its slot to the next job in one call
    (``Queue.complete_and_claim``): the worker's session says whether it wants
    the slot filled that way now, and starts the jobs claimed."""

    @property
    def worker_id(self) -> str:
        """The id the claimed jobs record (job.worker)."""
        ...

    def wanted(self) -> bool:
        """True when the slot a completed job frees should be filled by the
        completion's own claim (one round trip for both)."""
        ...

    async def claimed(self, jobs: list[Job]) -> None:
        """Start ``jobs`` (claimed for the freed slot), before that slot is freed
        (or release them, when the worker is stopping)."""
        ...


@dataclass(frozen=True, slots=True)
class Completed:
    result: Any


@dataclass(frozen=True, slots=True)
class Failed:
    error: str
    traceback: str | None
    retry: bool = True
    delay: float | None = None  # seconds before the retry; None: the queue's backoff


@dataclass(frozen=True, slots=True)
class Released:
    """Give the job back for ``delay`` seconds (no handler here for its name), or at
    once with its lane throttled for ``throttle`` seconds (``RateLimited``)."""

    delay: float
    throttle: float | None = None


def describe(exc: BaseException) -> Failed:
    """A handler's exception as the error and traceback stored with the job."""
    if isinstance(exc, IsolatedFailure):  # raised in the task's process: its own text
        return Failed(exc.error[:MAX_ERROR], exc.child_traceback[-MAX_TRACEBACK:] or None)
    error = f"{type(exc).__name__}: {exc}"[:MAX_ERROR]
    text = "".join(traceback.format_exception(exc))
    return Failed(error, text[-MAX_TRACEBACK:])


def failure(exc: Exception, spec: HandlerSpec, job: Job) -> Failed | Released:
    """The failed attempt a handler's exception stands for: ``Retry`` sets the
    delay, ``Unrecoverable`` rules out a retry, a task's backoff the default delay."""
    if isinstance(exc, RateLimited):
        return Released(0.0, throttle=exc.seconds)
    described = describe(exc)
    if isinstance(exc, Unrecoverable):
        return Failed(described.error, described.traceback, retry=False)
    delay = exc.delay if isinstance(exc, Retry) else None
    if delay is None and spec.backoff is not None:
        delay = spec.backoff.delay(max(1, job.attempts))
    return Failed(described.error, described.traceback, delay=delay)


class _Stored:
    """An awaitable that is already done: a sync handler's progress is stored before
    set_progress returns, so awaiting it (by habit) costs nothing."""

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield


class Execution:
    """One job's run, from claim to recorded outcome; ``task`` drives it.

    The handler runs inside ``task`` itself (a sync handler's thread is awaited
    there), so one task per job carries the handler, its timeout and the
    recording; losing the lease or shutting down cancels that task.
    """

    def __init__(self, runtime: Runtime, job: Job) -> None:
        self.job = job
        self.lease_lost = False
        self.abandoned = False
        self._rt = runtime
        self._thread: int | None = None  # ident of the thread running a sync handler
        self.handling = True  # the handler has not finished yet (it holds a slot)
        self._took = 0.0  # seconds the handler ran (for the job's log line)
        self.task: asyncio.Task[None] = runtime.loop.create_task(
            self._run(), name=f"echomq-job-{job.id}"
        )

    def lose_lease(self) -> None:
        """The heartbeat found the lease gone: stop the handler, record nothing."""
        self.lease_lost = True
        self.task.cancel()

    def abandon(self) -> None:
        """Shutdown past its grace: stop the handler; the worker releases the lease."""
        self.abandoned = True
        self.task.cancel()

    def free_slot(self) -> None:
        """The handler is done: the worker may claim the next job while this
        one's outcome is being recorded (once per execution)."""
        if self.handling:
            self.handling = False
            self._rt.handler_done()

    async def _run(self) -> None:
        hb = self._rt.heartbeat
        hb.add(self.job)
        started = time.monotonic()
        outcome: Completed | Failed | Released | None = None
        hand_over = False  # the completion's call claims the job for this slot
        try:
            outcome = await self._outcome()
        except asyncio.CancelledError:
            if self.abandoned or not self.lease_lost:
                raise
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
            outcome = None
        finally:
            self._took = time.monotonic() - started
            hb.discard(self.job)  # before recording: see Heartbeat.discard
            self.job._progress_sink = None
            over = self._rt.hand_over
            hand_over = isinstance(outcome, Completed) and over is not None and over.wanted()
            if not hand_over:
                self.free_slot()
        if outcome is None:
            if self.job.cancelled:
                log.info("job %s was cancelled; its handler was stopped", self.job.id)
                return
            log.warning("job %s: lease lost while running; outcome not recorded", self.job.id)
            await self._rt.hooks.fire(self._rt.hooks.on_stalled, self.job)
        elif isinstance(outcome, Completed) and hand_over:
            await self._complete_and_claim(outcome.result)
        elif isinstance(outcome, Completed):
            await self._complete(outcome.result)
        elif isinstance(outcome, Released):
            await self._release(outcome.delay, outcome.throttle)
        else:
            await self._fail(outcome)

    # -- running the handler -----------------------------------------------
    async def _outcome(self) -> Completed | Failed | Released:
        spec = self._rt.specs.get(self.job.name)
        if spec is None:
            return self._unknown()
        self.job._progress_sink = self._report_progress
        # what the handler logs (job.log, its logging records: echomq.worker.logcapture)
        self.job._log = JobLog(self.job.attempts, self._rt.log_level)
        set_current_job(self.job)  # this task's context (and its threads')
        if spec.timeout is None:  # no timer to arm
            try:
                return Completed(await self._guarded(spec))
            except Exception as exc:
                return failure(exc, spec, self.job)
        deadline = asyncio.timeout(spec.timeout)
        try:
            async with deadline:
                result = await self._guarded(spec)
        except TimeoutError as exc:
            if deadline.expired():
                return self._timed_out(exc, spec)
            return failure(exc, spec, self.job)
        except Exception as exc:
            return failure(exc, spec, self.job)
        return Completed(result)

    def _unknown(self) -> Released | Failed:
        unknown, job = self._rt.unknown, self.job
        if unknown.too_old(job):
            known = ", ".join(sorted(self._rt.specs)) or "(none)"
            return Failed(
                f"no handler for job name {job.name!r} within {unknown.dead_after:g} s of its "
                f"creation; workers that saw it handle: {known}",
                None,
                retry=False,
            )
        unknown.log_once(job, self._rt.specs)
        return Released(unknown.delay)

    def _guarded(self, spec: HandlerSpec) -> Awaitable[Any]:
        """The handler call inside the middleware, the first listed outermost."""
        middleware = self._rt.middleware
        if not middleware:
            return self._call(spec)
        job = self.job

        def link(index: int) -> Callable[[], Awaitable[Any]]:
            if index == len(middleware):
                return lambda: self._call(spec)
            return lambda: middleware[index](job, link(index + 1))

        return link(0)()

    async def _call(self, spec: HandlerSpec) -> Any:
        if spec.is_async:
            result = await spec.call(self.job)
        elif spec.task is not None and spec.isolation == "process":
            result = await run_in_process(spec.task, self.job, self._rt.threads, self._rt.loop)
        else:
            result = await asyncio.wrap_future(
                self._rt.threads.submit(partial(self._in_thread, spec.call)), loop=self._rt.loop
            )
        if inspect.isawaitable(result):  # a plain callable that returned a coroutine
            result = await result
        return result

    def _in_thread(self, handler: Callable[[Job], Any]) -> Any:
        self._thread = threading.get_ident()
        try:
            return handler(self.job)
        finally:
            self._thread = None

    def _timed_out(self, exc: TimeoutError, spec: HandlerSpec) -> Failed:
        where = self._thread_stack()
        if where is None:  # async or process: the cancellation's traceback
            where = "".join(traceback.format_exception(exc))[-MAX_TRACEBACK:]
        else:
            log.warning(
                "job %s: sync handler still running past its timeout; its thread "
                "is left to finish on its own",
                self.job.id,
            )
        stopped = "; its process was killed" if spec.isolation == "process" else ""
        error = (
            f"{HandlerTimeout.__name__}: handler for {self.job.name!r} ran longer than its timeout "
            f"of {spec.timeout:g} s{stopped}"
        )
        delay = spec.backoff.delay(max(1, self.job.attempts)) if spec.backoff else None
        return Failed(error, where, delay=delay)

    def _thread_stack(self) -> str | None:
        frame = sys._current_frames().get(self._thread) if self._thread else None
        if frame is None:
            return None
        return (
            "Stack of the sync handler when it timed out:\n"
            + "".join(traceback.format_stack(frame))[-MAX_TRACEBACK:]
        )

    # -- progress ------------------------------------------------------------
    def _report_progress(self, job: Job, value: Any) -> Awaitable[None]:
        queue, loop = self._rt.queue, self._rt.loop
        encode_payload(value, what="progress", limit=queue.options.max_payload)  # fail fast
        if running_loop() is loop:
            # a task, so the report is sent even by a handler that forgets to await it
            task = loop.create_task(queue.progress(job, value))
            task.add_done_callback(_retrieve)
            return task
        on_job_loop(queue.progress(job, value), loop, PROGRESS_TIMEOUT)
        return _Stored()

    # -- recording the outcome ---------------------------------------------
    async def _complete(self, result: Any) -> None:
        job, rt = self.job, self._rt
        try:
            await persist(
                lambda: rt.completions.complete(job, result),
                patience=rt.lease,
                what=f"job {job.id}: complete",
            )
        except PayloadError as exc:
            # the handler ran, but its result cannot be stored: retrying would redo its work
            failed = describe(exc)
            await self._fail(Failed(failed.error, failed.traceback, retry=False))
            return
        except NOT_RECORDED as exc:
            await self._not_recorded(exc)
            return
        await self._completed(result)

    async def _complete_and_claim(self, result: Any) -> None:
        """Record ``result`` and claim the next job for this slot in one call
        (completeClaim.lua); the slot is held until that job has started. A call
        that fails as a whole frees the slot and records the result as
        ``_complete`` does (retried: a completion sent again by the same lease
        is recorded once)."""
        job, rt = self.job, self._rt
        over = rt.hand_over
        assert over is not None
        try:
            text = encode_payload(result, what="result", limit=rt.queue.options.max_payload)
            done = await rt.queue.complete_and_claim(
                [(job, text)], 1, rt.lease, worker=over.worker_id, encoded=True
            )
        except RECORDED_APART:
            self.free_slot()
            await self._complete(result)
            return
        await over.claimed(done.claimed)
        self.free_slot()
        [error] = done.completions
        if error is not None:
            await self._not_recorded(error)
            return
        await self._completed(result)

    async def _completed(self, result: Any) -> None:
        job, rt = self.job, self._rt
        job.state, job.result = State.COMPLETED, result
        if rt.log_jobs:
            log.info("job %s completed in %.3f s", who(job), self._took)
        await rt.hooks.fire(rt.hooks.on_completed, job)

    async def _fail(self, failed: Failed) -> None:
        job, rt = self.job, self._rt
        try:
            state = await persist(
                lambda: rt.queue.fail(
                    job,
                    failed.error,
                    failed.traceback,
                    retry=failed.retry,
                    retry_delay=failed.delay,
                ),
                patience=rt.lease,
                what=f"job {job.id}: fail",
            )
        except NOT_RECORDED as exc:
            await self._not_recorded(exc)
            return
        job.state, job.error, job.traceback = state, failed.error, failed.traceback
        if state is State.DEAD:
            log.warning(
                "job %s is dead: attempt %d of %d failed%s: %s",
                who(job, self._took),
                job.attempts,
                job.max_attempts,
                "" if failed.retry else " (not retried)",
                escape_line(failed.error),
            )
        else:
            log.info(
                "job %s: attempt %d of %d failed: %s; attempt %d runs %s",
                who(job, self._took),
                job.attempts,
                job.max_attempts,
                escape_line(failed.error),
                job.attempts + 1,
                next_run_text(job.run_at),
            )
        await rt.hooks.fire(rt.hooks.on_failed, job)
        await rt.hooks.fire(rt.hooks.on_dead if state is State.DEAD else rt.hooks.on_retried, job)

    async def _release(self, delay: float, throttle: float | None = None) -> None:
        job, rt = self.job, self._rt
        try:
            await persist(
                lambda: rt.queue.release(job, delay, throttle=throttle),
                patience=rt.lease,
                what=f"job {job.id}: release",
            )
        except NOT_RECORDED as exc:
            await self._not_recorded(exc)

    async def _not_recorded(self, exc: BaseException) -> None:
        if isinstance(exc, LeaseLost):
            log.warning("job %s: lease lost before the outcome was recorded", self.job.id)
            await self._rt.hooks.fire(self._rt.hooks.on_stalled, self.job)
        elif isinstance(exc, JobNotFound):
            log.info("job %s was removed while it ran; outcome dropped", self.job.id)
        else:
            log.error("job %s: outcome not recorded, server unreachable: %s", self.job.id, exc)


def who(job: Job, took: float | None = None) -> str:
    """A job for a log line: ``id (name)``, with its lane and key if it has them
    and how long its handler ran; every job-derived value escaped
    (escape_line), so no line can be forged."""
    extra = ""
    if job.group:
        extra += f", lane {escape_line(job.group)}"
    if job.key:
        extra += f", key {escape_line(job.key)}"
    if took is not None:
        extra += f", ran {took:.3f} s"
    return f"{job.id} ({escape_line(job.name)}{extra})"


def next_run_text(run_at: datetime | None) -> str:
    """When a retry runs, for a log line: ``at 14:03:07 (in 2.0 s)``."""
    if run_at is None:
        return "after its backoff"
    wait = max(0.0, (run_at - datetime.now(UTC)).total_seconds())
    return f"at {run_at.astimezone():%H:%M:%S} (in {wait:.1f} s)"


def _retrieve(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.debug("progress report not stored: %s", task.exception())
