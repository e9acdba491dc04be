"""Tasks: a function that is also a job type, enqueued with typed arguments.

``@q.task(...)`` on an ``async def`` or a plain function returns a task. The
function can still be called directly; ``await task.enqueue(*args,
**kwargs)`` adds a job named after the task whose payload is the arguments,
and a worker given the task runs the function with them.

- **Typed**: ``enqueue`` has the function's own parameters (a ParamSpec), so
  mypy rejects ``send.enqueue(to="x")`` for ``def send(to: int)``; at run time
  the arguments are bound to the signature (``TypeError`` before anything is
  written) and stored as JSON (``{"args": [...], "kwargs": {...}}``; a value
  JSON cannot carry is refused with ``PayloadError``).
- **Options**: a task's defaults (``max_attempts``, ``timeout``,
  ``priority``, ``group``, ``backoff``, ``expires``, ``isolation``);
  ``priority`` and ``group`` may be functions of the call's arguments (a
  tenant's lane from the call), called with the function's parameters,
  defaults filled in. ``enqueue_with(delay=…, key=…, …)`` sets
  one call's options, which win over the task's.
- ``SyncQueue.task`` gives a :class:`SyncTask`, whose ``enqueue`` blocks.

The worker side (how a task's options reach its runs) is
:mod:`echomq.worker.executor`; docs/tasks.md is the guide.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, Literal, ParamSpec, TypedDict, TypeVar, Unpack

from echomq.errors import InvalidOption
from echomq.job import Job
from echomq.options import (
    MAX_ATTEMPTS,
    MAX_DELAY,
    MAX_LEASE,
    Backoff,
    check_int,
    check_job_name,
    check_seconds,
)

if TYPE_CHECKING:
    from echomq.queue import Queue
    from echomq.sync import SyncQueue

P = ParamSpec("P")
R = TypeVar("R")
Isolation = Literal["thread", "process"]
#: a task's priority: a tier, or a function of the call's arguments giving one.
PriorityRule = int | Callable[..., int]
#: a task's group: a lane name (None: the default lane), or a function giving one.
GroupRule = str | None | Callable[..., str | None]

#: functions returning headers to add to every enqueued job (echomq.otel adds one).
header_sources: list[Callable[[], Mapping[str, str]]] = []


class CallOptions(TypedDict, total=False):
    """One enqueue's options (``enqueue_with``); each wins over the task's default."""

    delay: float | None
    run_at: datetime | None
    key: str | None
    priority: int
    group: str | None
    max_attempts: int | None
    expires: float | None
    headers: Mapping[str, str] | None


@dataclass(frozen=True, slots=True)
class TaskOptions:
    """A task's defaults, checked when the task is made."""

    name: str
    max_attempts: int | None = None
    timeout: float | None = None
    priority: PriorityRule | None = None
    group: GroupRule = None
    backoff: Backoff | None = None
    expires: float | None = None
    isolation: Isolation = "thread"

    def __post_init__(self) -> None:
        check_job_name(self.name)
        if self.max_attempts is not None:
            check_int("max_attempts", self.max_attempts, 1, MAX_ATTEMPTS)
        if self.timeout is not None:
            check_seconds("timeout", self.timeout, 0.0, MAX_LEASE, open_low=True)
        if self.expires is not None:
            check_seconds("expires", self.expires, 0.0, MAX_DELAY, open_low=True)
        if self.backoff is not None and not isinstance(self.backoff, Backoff):
            raise InvalidOption(f"backoff {self.backoff!r} must be an echomq.Backoff")
        if self.isolation not in ("thread", "process"):
            raise InvalidOption(f"isolation {self.isolation!r} is not one of thread, process")


@dataclass(frozen=True, slots=True)
class Prepared:
    """One call of a task, checked and ready to enqueue (``task.prepare(...)``)."""

    item: dict[str, Any]


class BaseTask(Generic[P, R]):
    """What async and sync tasks share: the function, its options, and how a call
    becomes a job (and a job a call)."""

    def __init__(self, fn: Callable[P, R], options: TaskOptions) -> None:
        self.fn = fn
        self.options = options
        self.name = options.name
        self.is_async = inspect.iscoroutinefunction(fn)
        self._signature = inspect.signature(fn)
        if options.isolation == "process":
            _check_importable(fn, self.is_async)
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the function directly, here and now (no queue involved)."""
        return self.fn(*args, **kwargs)

    def prepare(self, *args: P.args, **kwargs: P.kwargs) -> Prepared:
        """Check one call (TypeError for arguments the function does not take) and
        build the job it enqueues; ``enqueue_many`` takes a list of these."""
        return Prepared(self._item(args, kwargs, {}))

    def run_job(self, job: Job) -> Any:
        """Call the function with the arguments stored in ``job`` (the worker does)."""
        data = job.data if isinstance(job.data, dict) else {}
        return self.fn(*data.get("args", ()), **data.get("kwargs", {}))

    def _item(
        self, args: tuple[Any, ...], kwargs: Mapping[str, Any], call: CallOptions
    ) -> dict[str, Any]:
        """An ``add_many`` item for one call; raises before anything is written."""
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.name}: {exc}") from None
        data: dict[str, Any] = {}
        if args:
            data["args"] = list(args)
        if kwargs:
            data["kwargs"] = dict(kwargs)
        item: dict[str, Any] = {"name": self.name, "data": data}
        opts = self.options
        if callable(opts.priority) or callable(opts.group):
            bound.apply_defaults()  # a rule gets every parameter, defaults filled in
        if "priority" not in call and opts.priority is not None:
            tier = opts.priority
            item["priority"] = tier(*bound.args, **bound.kwargs) if callable(tier) else tier
        if "group" not in call and opts.group is not None:
            group = opts.group
            item["group"] = group(*bound.args, **bound.kwargs) if callable(group) else group
        if opts.max_attempts is not None:
            item["max_attempts"] = opts.max_attempts
        if opts.expires is not None:
            item["expires"] = opts.expires
        headers = _headers(call.get("headers"))
        item.update(call)
        if headers:
            item["headers"] = headers
        return item

    def _items(
        self, calls: Iterable[Prepared | tuple[Any, ...] | Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        items = []
        for call in calls:
            if isinstance(call, Prepared):
                items.append(call.item)
            elif isinstance(call, tuple):
                items.append(self._item(call, {}, {}))
            elif isinstance(call, Mapping):
                items.append(self._item((), call, {}))
            else:
                raise InvalidOption(
                    f"enqueue_many item {call!r:.80} must be task.prepare(...), "
                    "a tuple of positional arguments or a mapping of keyword arguments"
                )
        return items


def _headers(given: Mapping[str, str] | None) -> dict[str, str]:
    headers: dict[str, str] = {}
    for source in header_sources:
        headers.update(source())
    if given:
        headers.update(given)
    return headers


def _check_importable(fn: Callable[..., Any], is_async: bool) -> None:
    """A process-isolated task is found again in the child by module and name."""
    where = f"{fn.__module__}.{fn.__qualname__}"
    if is_async:
        raise InvalidOption(f"task {where}: isolation='process' is for sync functions")
    if "<locals>" in fn.__qualname__ or fn.__module__ == "__main__":
        raise InvalidOption(
            f"task {where}: isolation='process' needs a function defined at the top "
            "level of an importable module (the child process imports it)"
        )


class Task(BaseTask[P, R]):
    """A task of an asyncio :class:`~echomq.queue.Queue`."""

    def __init__(self, queue: Queue, fn: Callable[P, R], options: TaskOptions) -> None:
        super().__init__(fn, options)
        self.queue = queue

    async def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> str:
        """Add a job that calls the function with these arguments; returns its id
        (enqueues issued while another add is in flight share its call)."""
        return await self.queue.add(**self._item(args, kwargs, {}))

    def enqueue_with(self, **options: Unpack[CallOptions]) -> Enqueuer[P]:
        """This task with one call's options: ``await t.enqueue_with(delay=5).enqueue(x)``."""
        return Enqueuer(self, options)

    async def enqueue_many(
        self, calls: Iterable[Prepared | tuple[Any, ...] | Mapping[str, Any]]
    ) -> list[str]:
        """Add one job per call in one round trip: ``task.prepare(...)`` (typed), a
        tuple of positional arguments or a mapping of keyword arguments."""
        return await self.queue.add_many(self._items(calls))


class Enqueuer(Generic[P]):
    """A task with one call's options (``Task.enqueue_with``)."""

    def __init__(self, task: Task[P, Any], options: CallOptions) -> None:
        self._task = task
        self._options = options

    async def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> str:
        return await self._task.queue.add(**self._task._item(args, kwargs, self._options))


class SyncTask(BaseTask[P, R]):
    """A task of a blocking :class:`~echomq.sync.SyncQueue`: ``enqueue`` blocks."""

    def __init__(self, queue: SyncQueue, fn: Callable[P, R], options: TaskOptions) -> None:
        super().__init__(fn, options)
        self.queue = queue

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> str:
        """Add a job that calls the function with these arguments; returns its id."""
        return self.queue.add(**self._item(args, kwargs, {}))

    def enqueue_with(self, **options: Unpack[CallOptions]) -> SyncEnqueuer[P]:
        """This task with one call's options: ``t.enqueue_with(delay=5).enqueue(x)``."""
        return SyncEnqueuer(self, options)

    def enqueue_many(
        self, calls: Iterable[Prepared | tuple[Any, ...] | Mapping[str, Any]]
    ) -> list[str]:
        """Add one job per call in one round trip (see Task.enqueue_many)."""
        return self.queue.add_many(self._items(calls))


class SyncEnqueuer(Generic[P]):
    """A sync task with one call's options (``SyncTask.enqueue_with``)."""

    def __init__(self, task: SyncTask[P, Any], options: CallOptions) -> None:
        self._task = task
        self._options = options

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> str:
        return self._task.queue.add(**self._task._item(args, kwargs, self._options))


class TaskSettings(TypedDict, total=False):
    """``q.task(...)``'s keywords (:class:`TaskOptions` without the name's default)."""

    name: str | None
    max_attempts: int | None
    timeout: float | None
    priority: PriorityRule | None
    group: GroupRule
    backoff: Backoff | None
    expires: float | None
    isolation: Isolation


def task_options(fn: Callable[..., Any], settings: TaskSettings) -> TaskOptions:
    """The options of a task made from ``fn``; the default name is ``module.qualname``."""
    given = dict(settings)
    name = given.pop("name", None) or f"{fn.__module__}.{fn.__qualname__}"
    return TaskOptions(name=name, **given)  # type: ignore[arg-type]


AnyTask = BaseTask[Any, Any]
