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
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    Literal,
    ParamSpec,
    Protocol,
    TypedDict,
    TypeVar,
    Unpack,
)

from echomq.control import Unrecoverable, running_job
from echomq.dedupe import Dedupe, as_dedupe
from echomq.errors import EchoMQError, InvalidOption
from echomq.job import Job, on_job_loop, running_loop
from echomq.options import (
    MAX_ATTEMPTS,
    MAX_DELAY,
    MAX_LEASE,
    Backoff,
    check_int,
    check_job_name,
    check_known,
    check_seconds,
)
from echomq.tags import check_tags

if TYPE_CHECKING:
    from echomq.engine import AddOptions

P = ParamSpec("P")
R = TypeVar("R")
Isolation = Literal["thread", "process"]
#: a task's priority: a tier, or a function of the call's arguments giving one.
PriorityRule = int | Callable[..., int]
#: a task's group: a lane name (None: the default lane), or a function giving one.
GroupRule = str | None | Callable[..., str | None]
#: a task's tags: a dict, or a function of the call's arguments giving one
TagsRule = Mapping[str, str] | Callable[..., Mapping[str, str] | None]
#: a task's deduplication: a Dedupe, or a function of the call's arguments giving one
DedupeRule = Dedupe | Callable[..., Dedupe | None]

#: functions returning headers to add to every enqueued job (echomq.otel adds one).
header_sources: list[Callable[[], Mapping[str, str]]] = []


class TaskQueue(Protocol):
    """What a :class:`Task` needs of its queue; an asyncio :class:`~echomq.Queue`
    is one. Declared here, so this module never imports the queues (which
    import it)."""

    name: str
    tasks: dict[str, AnyTask]

    def register_task(self, task: AnyTask) -> None: ...

    async def add(self, name: str, data: Any = None, **options: Unpack[AddOptions]) -> str: ...

    def add_many(
        self, items: Iterable[Mapping[str, Any]], *, durable: bool | None = None
    ) -> Coroutine[Any, Any, list[str]]: ...

    @property
    def schedule(self) -> Callable[..., Coroutine[Any, Any, datetime | None]]:
        """``Queue.schedule``: its keywords are Engine.schedule's."""
        ...

    def blocking(self) -> SyncTaskQueue: ...


class SyncTaskQueue(Protocol):
    """What a :class:`SyncTask` needs of its queue; a :class:`~echomq.SyncQueue` is one."""

    name: str
    tasks: dict[str, AnyTask]

    def register_task(self, task: AnyTask) -> None: ...

    def add(self, name: str, data: Any = None, **options: Unpack[AddOptions]) -> str: ...

    def add_many(
        self, items: Iterable[Mapping[str, Any]], *, durable: bool | None = None
    ) -> list[str]: ...

    @property
    def schedule(self) -> Callable[..., datetime | None]:
        """``SyncQueue.schedule``: its keywords are Engine.schedule's."""
        ...


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
    depends_on: Sequence[str] | None
    on_dependency_failure: Literal["dead", "run"] | None
    tags: Mapping[str, str] | None
    dedupe: Dedupe | None
    batch: str | None


#: ``enqueue_with``'s keywords (any other is refused).
CALL_OPTION_KEYS = frozenset(CallOptions.__annotations__)


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
    tags: TagsRule | None = None
    dedupe: DedupeRule | None = None

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
        if self.tags is not None and not callable(self.tags):
            check_tags(self.tags)
        if self.dedupe is not None and not callable(self.dedupe):
            as_dedupe(self.dedupe)


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

    def job_defaults(self) -> dict[str, Any]:
        """The options its queue applies to a job of this name added by hand
        (``q.add(name, ...)``, an ``add_many`` item): a function-valued priority
        or group needs the call's arguments, so only the plain ones."""
        opts = self.options
        found = {
            "max_attempts": opts.max_attempts,
            "expires": opts.expires,
            "priority": None if callable(opts.priority) else opts.priority,
            "group": None if callable(opts.group) else opts.group,
        }
        return {name: value for name, value in found.items() if value is not None}

    def run_job(self, job: Job) -> Any:
        """Call the function with the arguments stored in ``job`` (the worker does).

        Arguments that cannot be the function's (a job added by hand with other
        data, or for an older signature) raise Unrecoverable naming the
        signature: no retry can fix them, so the job is dead at once."""
        args, kwargs = self._arguments(job.data)
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise Unrecoverable(
                f"{self.name}{_shown(self._signature)}: {exc} (job data {_short(job.data)})"
            ) from None
        return self.fn(*bound.args, **bound.kwargs)

    def _arguments(self, data: Any) -> tuple[list[Any], dict[str, Any]]:
        if data is None:
            return [], {}
        args = data.get("args", []) if isinstance(data, dict) else None
        kwargs = data.get("kwargs", {}) if isinstance(data, dict) else None
        if (
            not isinstance(args, list)
            or not isinstance(kwargs, dict)
            or not set(data).issubset(("args", "kwargs"))
        ):
            raise Unrecoverable(
                f"{self.name}{_shown(self._signature)}: job data {_short(data)} is not a task's "
                'arguments; a task job\'s data is {"args": [...], "kwargs": {...}}'
            )
        return args, kwargs

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
        item.update(self._ruled(bound, call))
        if opts.max_attempts is not None:
            item["max_attempts"] = opts.max_attempts
        if opts.expires is not None:
            item["expires"] = opts.expires
        headers = _headers(call.get("headers"))
        item.update(call)
        if headers:
            item["headers"] = headers
        return item

    def _ruled(self, bound: inspect.BoundArguments, call: CallOptions) -> dict[str, Any]:
        """The task's priority, group, tags and dedupe for one call (a rule is a function of
        the call's arguments); what the call gives itself wins."""
        opts = self.options
        rules = {
            "priority": opts.priority,
            "group": opts.group,
            "tags": opts.tags,
            "dedupe": opts.dedupe,
        }
        if any(callable(rule) for rule in rules.values()):
            bound.apply_defaults()  # a rule gets every parameter, defaults filled in
        out: dict[str, Any] = {}
        for option, rule in rules.items():
            if option in call or rule is None:
                continue
            value = rule(*bound.args, **bound.kwargs) if callable(rule) else rule
            if value is not None or option not in ("tags", "dedupe"):  # None means none
                out[option] = value
        return out

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


class _Annotation(str):
    """An annotation kept as text (``from __future__ import annotations``), shown bare."""

    def __repr__(self) -> str:
        return str(self)


def _shown(signature: inspect.Signature) -> str:
    """``(to: str, subject: str = 'hi')``: a signature for an error message."""
    params = [
        p.replace(annotation=_Annotation(p.annotation)) if isinstance(p.annotation, str) else p
        for p in signature.parameters.values()
    ]
    return str(signature.replace(parameters=params, return_annotation=inspect.Signature.empty))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "…"


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
    """A task of an asyncio :class:`~echomq.queue.Queue`.

    ``await t.enqueue(...)`` in async code; ``t.enqueue_sync(...)`` in blocking
    code (a Django view, a script, a sync handler). Calling ``t.enqueue(...)``
    where no event loop runs raises at once (it would return a coroutine that
    nobody awaits, and no job would be added)."""

    def __init__(self, queue: TaskQueue, fn: Callable[P, R], options: TaskOptions) -> None:
        super().__init__(fn, options)
        self.queue = queue
        queue.register_task(self)

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, str]:
        """Add a job that calls the function with these arguments; await it for its
        id (enqueues issued while another add is in flight share its call). From
        inside a handler it goes to the queue that handler's job runs on
        (:meth:`home`)."""
        _need_loop(self.name, "enqueue")
        return self.home().add(**self._item(args, kwargs, {}))

    def enqueue_sync(self, *args: P.args, **kwargs: P.kwargs) -> str:
        """``enqueue`` for blocking code: adds the job and returns its id (through
        the queue's blocking twin, ``Queue.blocking()``; on a worker's thread,
        through the worker's own queue). Refused where an event loop runs."""
        return _add_blocking(self, self._item(args, kwargs, {}))

    def enqueue_with(self, **options: Unpack[CallOptions]) -> Enqueuer[P]:
        """This task with one call's options: ``await t.enqueue_with(delay=5).enqueue(x)``
        (``depends_on=[ids]`` too). An unknown option raises InvalidOption here."""
        check_known("enqueue_with", options, CALL_OPTION_KEYS)
        return Enqueuer(self, options)

    def enqueue_many(
        self, calls: Iterable[Prepared | tuple[Any, ...] | Mapping[str, Any]]
    ) -> Coroutine[Any, Any, list[str]]:
        """Add one job per call in one round trip: ``task.prepare(...)`` (typed), a
        tuple of positional arguments or a mapping of keyword arguments."""
        _need_loop(self.name, "enqueue_many")
        return self.home().add_many(self._items(calls))

    async def schedule(
        self,
        schedule_id: str,
        call: Prepared | None = None,
        *,
        cron: str | None = None,
        every: float | None = None,
        tz: str = "UTC",
        skip_if_running: bool = False,
        catch_up: bool = True,
    ) -> datetime | None:
        """Create or replace schedule ``schedule_id`` firing this task with the
        arguments of ``call`` (``t.prepare(...)``; None: no arguments), its
        priority, group and max_attempts applied as ``enqueue`` would
        (``Queue.schedule`` has the timing rules). The reply is the next fire time."""
        fields = _schedule_fields(self, call)
        return await self.home().schedule(
            schedule_id,
            cron=cron,
            every=every,
            tz=tz,
            skip_if_running=skip_if_running,
            catch_up=catch_up,
            **fields,
        )

    def home(self) -> TaskQueue:
        """The queue an enqueue from here goes to: this task's queue, except inside a
        handler run from another queue object of the same tasks (the testing kit's
        queue, a worker's second Queue), where it is the queue that job runs on."""
        job = running_job()
        if job is None or job._queue is None or job._queue is self.queue:
            return self.queue
        if job.name in self.queue.tasks:  # the running task is one of this queue's
            return job._queue  # type: ignore[no-any-return]
        return self.queue


class Enqueuer(Generic[P]):
    """A task with one call's options (``Task.enqueue_with``)."""

    def __init__(self, task: Task[P, Any], options: CallOptions) -> None:
        self._task = task
        self._options = options

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, str]:
        _need_loop(self._task.name, "enqueue")
        return self._task.home().add(**self._task._item(args, kwargs, self._options))

    def enqueue_sync(self, *args: P.args, **kwargs: P.kwargs) -> str:
        return _add_blocking(self._task, self._task._item(args, kwargs, self._options))


def _need_loop(name: str, method: str) -> None:
    """Refuse an async enqueue where no event loop runs: its coroutine could never
    be awaited there, and no job would be added (only a warning at collection)."""
    if running_loop() is None:
        raise EchoMQError(
            f"{name}.{method}(...) is a coroutine and no event loop runs here: in async "
            f"code await it; from blocking code call {method}_sync(...) "
            "(or make the task on a SyncQueue)"
        )


def _add_blocking(task: Task[Any, Any], item: dict[str, Any]) -> str:
    """Add ``item`` to the task's queue from blocking code (Task.enqueue_sync)."""
    target = task.home()
    job = running_job()
    loop = running_loop()
    if job is not None and target is job._queue and job._loop is not None:
        if loop is job._loop:
            raise EchoMQError(
                f"{task.name}.enqueue_sync(...) would block the worker's event loop: "
                f"await {task.name}.enqueue(...) in an async handler"
            )
        return str(on_job_loop(target.add(**item), job._loop))
    if loop is not None:
        raise EchoMQError(
            f"{task.name}.enqueue_sync(...) blocks, and an event loop runs in this thread: "
            f"await {task.name}.enqueue(...) instead"
        )
    return target.blocking().add(**item)


def _schedule_fields(task: BaseTask[Any, Any], call: Prepared | None) -> dict[str, Any]:
    """``Queue.schedule``'s job fields for a task's call (its options applied)."""
    item = (call if call is not None else task.prepare()).item
    if item.get("name") != task.name:
        raise InvalidOption(f"schedule: {call!r:.80} was prepared by another task")
    return {
        "name": task.name,
        "data": item.get("data"),
        "priority": item.get("priority", 0),
        "group": item.get("group"),
        "max_attempts": item.get("max_attempts"),
    }


class SyncTask(BaseTask[P, R]):
    """A task of a blocking :class:`~echomq.sync.SyncQueue`: ``enqueue`` blocks."""

    def __init__(self, queue: SyncTaskQueue, fn: Callable[P, R], options: TaskOptions) -> None:
        super().__init__(fn, options)
        self.queue = queue
        queue.register_task(self)

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> str:
        """Add a job that calls the function with these arguments; returns its id.
        From inside a handler it goes to the queue that handler's job runs on, as
        ``Task.enqueue`` does (:func:`_add_from_sync_task`)."""
        return _add_from_sync_task(self, self._item(args, kwargs, {}))

    def enqueue_with(self, **options: Unpack[CallOptions]) -> SyncEnqueuer[P]:
        """This task with one call's options: ``t.enqueue_with(delay=5).enqueue(x)``."""
        check_known("enqueue_with", options, CALL_OPTION_KEYS)
        return SyncEnqueuer(self, options)

    def enqueue_many(
        self, calls: Iterable[Prepared | tuple[Any, ...] | Mapping[str, Any]]
    ) -> list[str]:
        """Add one job per call in one round trip (see Task.enqueue_many)."""
        return self.queue.add_many(self._items(calls))

    def schedule(
        self,
        schedule_id: str,
        call: Prepared | None = None,
        *,
        cron: str | None = None,
        every: float | None = None,
        tz: str = "UTC",
        skip_if_running: bool = False,
        catch_up: bool = True,
    ) -> datetime | None:
        """Create or replace a schedule firing this task (see Task.schedule)."""
        return self.queue.schedule(
            schedule_id,
            cron=cron,
            every=every,
            tz=tz,
            skip_if_running=skip_if_running,
            catch_up=catch_up,
            **_schedule_fields(self, call),
        )


class SyncEnqueuer(Generic[P]):
    """A sync task with one call's options (``SyncTask.enqueue_with``)."""

    def __init__(self, task: SyncTask[P, Any], options: CallOptions) -> None:
        self._task = task
        self._options = options

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> str:
        return _add_from_sync_task(self._task, self._task._item(args, kwargs, self._options))


def _add_from_sync_task(task: SyncTask[Any, Any], item: dict[str, Any]) -> str:
    """Add a sync task's job: to its own SyncQueue, except inside a handler whose
    job another queue object of the same tasks claimed (the testing kit's queue, a
    worker's own Queue): there it goes to that queue, through the worker's event
    loop when that queue is an asyncio one (a sync handler runs on a thread)."""
    job = running_job()
    target = None if job is None else job._queue
    if job is None or target is None or target is task.queue or job.name not in task.queue.tasks:
        return task.queue.add(**item)
    added = target.add(**item)
    if not inspect.iscoroutine(added):
        return str(added)  # a SyncQueue's add
    loop = job._loop
    if loop is None or running_loop() is loop:
        added.close()
        raise EchoMQError(
            f"{task.name}.enqueue(...) blocks, and it was called on the event loop of the "
            "queue its job runs on: make the task async, or call it from a sync handler"
        )
    return str(on_job_loop(added, loop))


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
    tags: TagsRule | None
    dedupe: DedupeRule | None


def task_options(fn: Callable[..., Any], settings: TaskSettings) -> TaskOptions:
    """The options of a task made from ``fn``; the default name is ``module.qualname``."""
    given = dict(settings)
    check_known("task", given, TaskSettings.__annotations__)
    name = given.pop("name", None) or f"{fn.__module__}.{fn.__qualname__}"
    return TaskOptions(name=name, **given)  # type: ignore[arg-type]


AnyTask = BaseTask[Any, Any]
