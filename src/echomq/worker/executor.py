"""Running one job (Oban's executor): call its handler, bound it by the timeout,
record the outcome through the core scripts, and call the hooks.

Async handlers run on the worker's loop, inside the job's own task; sync
handlers run on daemon threads (:mod:`echomq.worker.threads`). A handler past
the timeout is cancelled (async) or left behind on its thread (sync: Python
cannot stop a thread), and the attempt counts as a failure whose traceback is
the stack where the handler was stuck. A handler whose lease is lost is
stopped the same way and nothing is recorded: the job is no longer this
worker's to finish. Completions go through :mod:`.completions` (batched).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import sys
import threading
import traceback
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

from echomq.errors import EchoMQError, JobNotFound, LeaseLost, PayloadError
from echomq.job import Job, State, encode_payload
from echomq.queue import Queue
from echomq.worker.completions import CompletionBatcher
from echomq.worker.leases import Heartbeat
from echomq.worker.resilience import TRANSIENT, persist
from echomq.worker.threads import DaemonThreads

log = logging.getLogger("echomq.worker")

Handler = Callable[[Job], Any]
Hook = Callable[[Job], Any]

#: how long shutdown waits for cancelled handlers to unwind.
CANCEL_GRACE = 1.0
#: the longest error message and traceback stored with a job (characters).
MAX_ERROR = 4096
MAX_TRACEBACK = 64 * 1024
#: how long a sync handler's set_progress waits for the server.
PROGRESS_TIMEOUT = 30.0


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


def is_async_handler(handler: Handler) -> bool:
    """True for ``async def`` functions (also behind functools.partial) and async __call__."""
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 (the bound method, not callability)
    )


@dataclass(frozen=True, slots=True)
class Runtime:
    """What all executions of one worker run share."""

    queue: Queue
    handlers: Mapping[str, Handler]
    timeout: float | None
    lease: float
    is_async: Mapping[str, bool]  # per job name: run on the loop (else on a thread)
    hooks: Hooks
    heartbeat: Heartbeat
    completions: CompletionBatcher
    threads: DaemonThreads
    loop: asyncio.AbstractEventLoop
    handler_done: Callable[[], None]  # a handler returned or raised: its slot is free


@dataclass(frozen=True, slots=True)
class Completed:
    result: Any


@dataclass(frozen=True, slots=True)
class Failed:
    error: str
    traceback: str | None
    retry: bool = True


def describe(exc: BaseException) -> Failed:
    """A handler's exception as the error and traceback stored with the job."""
    error = f"{type(exc).__name__}: {exc}"[:MAX_ERROR]
    text = "".join(traceback.format_exception(exc))
    return Failed(error, text[-MAX_TRACEBACK:])


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
        try:
            outcome = await self._outcome()
        except asyncio.CancelledError:
            if self.abandoned or not self.lease_lost:
                raise
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
            outcome = None
        finally:
            hb.discard(self.job)  # before recording: see Heartbeat.discard
            self.job._progress_sink = None
            self.free_slot()
        if outcome is None:
            log.warning("job %s: lease lost while running; outcome not recorded", self.job.id)
            await self._rt.hooks.fire(self._rt.hooks.on_stalled, self.job)
        elif isinstance(outcome, Completed):
            await self._complete(outcome.result)
        else:
            await self._fail(outcome)

    # -- running the handler -----------------------------------------------
    async def _outcome(self) -> Completed | Failed:
        handler = self._rt.handlers.get(self.job.name)
        if handler is None:
            known = ", ".join(sorted(self._rt.handlers)) or "(none)"
            return Failed(
                f"no handler for job name {self.job.name!r}; this worker handles: {known}",
                None,
                retry=False,
            )
        self.job._progress_sink = self._report_progress
        if self._rt.timeout is None:  # no timer to arm
            try:
                return Completed(await self._call(handler))
            except Exception as exc:
                return describe(exc)
        deadline = asyncio.timeout(self._rt.timeout)
        try:
            async with deadline:
                result = await self._call(handler)
        except TimeoutError as exc:
            return self._timed_out(exc) if deadline.expired() else describe(exc)
        except Exception as exc:
            return describe(exc)
        return Completed(result)

    async def _call(self, handler: Handler) -> Any:
        if self._rt.is_async[self.job.name]:
            result = await handler(self.job)
        else:
            result = await asyncio.wrap_future(
                self._rt.threads.submit(partial(self._in_thread, handler)), loop=self._rt.loop
            )
        if inspect.isawaitable(result):  # a plain callable that returned a coroutine
            result = await result
        return result

    def _in_thread(self, handler: Handler) -> Any:
        self._thread = threading.get_ident()
        try:
            return handler(self.job)
        finally:
            self._thread = None

    def _timed_out(self, exc: TimeoutError) -> Failed:
        where = self._thread_stack()
        if where is None:  # async: the cancellation's traceback shows where it was stuck
            where = "".join(traceback.format_exception(exc))[-MAX_TRACEBACK:]
        else:
            log.warning(
                "job %s: sync handler still running past its timeout; its thread "
                "is left to finish on its own",
                self.job.id,
            )
        error = (
            f"{HandlerTimeout.__name__}: handler for {self.job.name!r} ran longer than its timeout "
            f"of {self._rt.timeout:g} s"
        )
        return Failed(error, where)

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
        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            # a task, so the report is sent even by a handler that forgets to await it
            task = loop.create_task(queue.progress(job, value))
            task.add_done_callback(_retrieve)
            return task
        asyncio.run_coroutine_threadsafe(queue.progress(job, value), loop).result(PROGRESS_TIMEOUT)
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
        job.state, job.result = State.COMPLETED, result
        await rt.hooks.fire(rt.hooks.on_completed, job)

    async def _fail(self, failed: Failed) -> None:
        job, rt = self.job, self._rt
        try:
            state = await persist(
                lambda: rt.queue.fail(job, failed.error, failed.traceback, retry=failed.retry),
                patience=rt.lease,
                what=f"job {job.id}: fail",
            )
        except NOT_RECORDED as exc:
            await self._not_recorded(exc)
            return
        job.state, job.error, job.traceback = state, failed.error, failed.traceback
        if state is State.DEAD:
            log.warning(
                "job %s (%s) is dead: attempt %d of %d failed%s: %s",
                job.id,
                job.name,
                job.attempts,
                job.max_attempts,
                "" if failed.retry else " (not retried)",
                failed.error,
            )
        else:
            log.info(
                "job %s (%s): attempt %d of %d failed: %s; attempt %d runs %s",
                job.id,
                job.name,
                job.attempts,
                job.max_attempts,
                failed.error,
                job.attempts + 1,
                next_run_text(job.run_at),
            )
        await rt.hooks.fire(rt.hooks.on_failed, job)
        await rt.hooks.fire(rt.hooks.on_dead if state is State.DEAD else rt.hooks.on_retried, job)

    async def _not_recorded(self, exc: BaseException) -> None:
        if isinstance(exc, LeaseLost):
            log.warning("job %s: lease lost before the outcome was recorded", self.job.id)
            await self._rt.hooks.fire(self._rt.hooks.on_stalled, self.job)
        elif isinstance(exc, JobNotFound):
            log.info("job %s was removed while it ran; outcome dropped", self.job.id)
        else:
            log.error("job %s: outcome not recorded, server unreachable: %s", self.job.id, exc)


def next_run_text(run_at: datetime | None) -> str:
    """When a retry runs, for a log line: ``at 14:03:07 (in 2.0 s)``."""
    if run_at is None:
        return "after its backoff"
    wait = max(0.0, (run_at - datetime.now(UTC)).total_seconds())
    return f"at {run_at.astimezone():%H:%M:%S} (in {wait:.1f} s)"


def _retrieve(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.debug("progress report not stored: %s", task.exception())
