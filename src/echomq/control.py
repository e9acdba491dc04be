"""What a running handler can ask of the worker, and the job it runs.

- ``raise Retry(delay=30)``: run the job again after 30 seconds. The attempt
  counts, so a job that keeps asking is dead after its ``max_attempts``.
- ``raise RateLimited(seconds=10)``: the job's lane is not served for 10
  seconds and the job goes back to waiting at its place (no attempt counted).
- ``raise Unrecoverable("bad address")``: dead at once, whatever attempts
  remain (the message is the job's error).
- ``current_job()``: the :class:`~echomq.job.Job` the calling handler runs
  (its id, attempts, headers; ``set_progress``, ``dependency_results()``),
  from anywhere in the handler's call stack, async or sync;
  ``current_queue()``: the queue it runs on (``current_job().queue``).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from echomq.errors import EchoMQError
from echomq.job import Job
from echomq.options import MAX_DELAY, check_seconds

_current: ContextVar[Job | None] = ContextVar("echomq_current_job", default=None)


class Retry(Exception):
    """Raised by a handler: retry the job after ``delay`` seconds (None: the task's
    or queue's backoff). Counts as an attempt."""

    def __init__(self, delay: float | None = None, reason: str = "retry requested") -> None:
        if delay is not None:
            delay = check_seconds("Retry delay", delay, 0.0, MAX_DELAY, open_low=False)
        self.delay = delay
        self.reason = reason
        super().__init__(reason if delay is None else f"{reason} (in {delay:g} s)")


class RateLimited(Exception):
    """Raised by a handler (e.g. on an HTTP 429): the job's lane is not served for
    ``seconds`` (server clock) and the job goes back to waiting at its place
    without counting an attempt (docs/ordering.md "Lane controls")."""

    def __init__(self, seconds: float, reason: str = "rate limited") -> None:
        self.seconds = check_seconds("RateLimited seconds", seconds, 0.0, MAX_DELAY, open_low=True)
        self.reason = reason
        super().__init__(f"{reason} (lane held for {self.seconds:g} s)")


class Unrecoverable(Exception):
    """Raised by a handler: the job cannot succeed; dead at once, no retry."""


def current_job() -> Job:
    """The job the calling handler runs; EchoMQError outside a worker's handler."""
    job = _current.get()
    if job is None:
        raise EchoMQError("current_job() works only inside a handler run by a worker")
    return job


def running_job() -> Job | None:
    """The job the calling handler runs, or None outside a worker's handler."""
    return _current.get()


def current_queue() -> Any:
    """The :class:`~echomq.Queue` the calling handler's job runs on
    (``current_job().queue``): under the testing kit, the test's queue."""
    return current_job().queue


def set_current_job(job: Job | None) -> None:
    """Bind ``job`` to the running handler's context (the worker calls this)."""
    _current.set(job)
