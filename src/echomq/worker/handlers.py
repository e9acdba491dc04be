"""What a worker knows about each job name: how to run it, and with which options.

``Worker(q, handlers)`` takes tasks (echomq.tasks) or a mapping of job name to
a callable taking the :class:`Job`; both become one :class:`HandlerSpec` per
name here, once, so running a job is one dict lookup. A job whose name is in
no spec is handled by :class:`UnknownNames`: released with a delay (a newer
worker may know it; think of a rolling deploy), dead only once it is older
than ``dead_after`` seconds.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from echomq.errors import InvalidOption
from echomq.escaping import escape_line
from echomq.job import Job
from echomq.options import MAX_DELAY, MAX_LEASE, Backoff, check_seconds
from echomq.tasks import AnyTask, BaseTask

log = logging.getLogger("echomq.worker")

Handler = Callable[[Job], Any]
#: what ``Worker`` accepts as handlers: tasks, or a mapping of job name → handler.
Handlers = Iterable[AnyTask] | Mapping[str, Handler]
#: a middleware wraps each handler call: ``await mw(job, call_next)`` must await
#: ``call_next()`` (the next middleware, then the handler) and return its result
#: (or raise); what happens before and after is the middleware's.
Middleware = Callable[[Job, Callable[[], Awaitable[Any]]], Awaitable[Any]]

#: seconds an unknown job name waits before it is offered again, by default.
DEFAULT_UNKNOWN_DELAY = 30.0
#: seconds after its creation an unknown job name is dead, by default.
DEFAULT_UNKNOWN_DEAD_AFTER = 3600.0


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    """How this worker runs the jobs of one name."""

    call: Handler  # takes the Job (a task's adapter calls the function with its arguments)
    is_async: bool
    timeout: float | None
    backoff: Backoff | None = None
    isolation: str = "thread"
    task: AnyTask | None = None


def is_async_handler(handler: Handler) -> bool:
    """True for ``async def`` functions (also behind functools.partial) and async __call__."""
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 (the bound method, not callability)
    )


def build_specs(handlers: Handlers, timeout: float | None) -> dict[str, HandlerSpec]:
    """One spec per job name; a task's timeout wins over the worker's ``timeout``."""
    if isinstance(handlers, Mapping):
        return _from_mapping(handlers, timeout)
    specs: dict[str, HandlerSpec] = {}
    if isinstance(handlers, str | bytes):
        handlers = ()
    for task in handlers:
        if not isinstance(task, BaseTask):
            raise InvalidOption(f"handlers: {task!r:.80} is not a task (made by @q.task)")
        if task.name in specs:
            raise InvalidOption(f"handlers: two tasks are named {task.name!r}")
        opts = task.options
        specs[task.name] = HandlerSpec(
            task.run_job,
            task.is_async,
            timeout if opts.timeout is None else opts.timeout,
            opts.backoff,
            opts.isolation,
            task,
        )
    if not specs:
        raise InvalidOption(
            "handlers must be tasks (made by @q.task) or a non-empty mapping of "
            "job name -> callable"
        )
    return specs


def _from_mapping(handlers: Mapping[str, Handler], timeout: float | None) -> dict[str, HandlerSpec]:
    if not handlers:
        raise InvalidOption("handlers must be a non-empty mapping of job name -> callable")
    specs = {}
    for name, handler in handlers.items():
        if isinstance(handler, BaseTask) and isinstance(name, str):
            specs.update(build_specs([handler], timeout))
            specs[name] = specs.pop(handler.name)
            continue
        if not isinstance(name, str) or not callable(handler):
            raise InvalidOption(
                f"handler for {name!r} must be a callable keyed by a job name "
                f"string, got {handler!r}"
            )
        specs[name] = HandlerSpec(handler, is_async_handler(handler), timeout)
    return specs


def check_middleware(middleware: Iterable[Middleware]) -> tuple[Middleware, ...]:
    chain = tuple(middleware)
    for mw in chain:
        if not callable(mw):
            raise InvalidOption(f"middleware {mw!r:.80} is not callable")
    return chain


@dataclass(slots=True)
class UnknownNames:
    """A job no handler of this worker knows: offered again after ``delay``
    seconds, dead once older than ``dead_after`` seconds (counted from its
    creation, by the server's clock)."""

    delay: float = DEFAULT_UNKNOWN_DELAY
    dead_after: float = DEFAULT_UNKNOWN_DEAD_AFTER
    _logged: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        check_seconds("unknown_delay", self.delay, 0.0, MAX_LEASE, open_low=True)
        check_seconds("unknown_dead_after", self.dead_after, 0.0, MAX_DELAY, open_low=False)

    def too_old(self, job: Job) -> bool:
        if job.created_at is None or job.claimed_at is None:
            return False
        return job.claimed_at - job.created_at >= timedelta(seconds=self.dead_after)

    def log_once(self, job: Job, known: Iterable[str]) -> None:
        if job.name in self._logged or len(self._logged) >= 1000:  # bounded memory
            return
        self._logged.add(job.name)
        log.warning(
            "no handler for job name '%s' (job %s); this worker handles %s. Released for "
            "%g s (dead %g s after its creation); logged once per name",
            escape_line(job.name),
            job.id,
            ", ".join(sorted(known)) or "(none)",
            self.delay,
            self.dead_after,
        )
