"""What Queue and SyncQueue share: the constructor, the options, the engine and the
two factories that turn an engine method into a queue method.

A queue method is an engine method whose call is handed to the sender: the
engine checks the input and builds the call (and how its reply updates the
caller's Job), the sender sends it. So ``Queue.claim`` is
``sends_async(Engine.claim)``: the same signature, documentation and checks,
written once.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar, Unpack, cast

from echomq.call import Call
from echomq.connection import DEFAULT_MAX_CONNECTIONS, check_max_connections
from echomq.engine import Engine, JobOptions
from echomq.options import DEFAULT_DURABLE_TIMEOUT, QueueOptions, QueueSettings
from echomq.sending import AsyncSender, SyncSender
from echomq.steps import Next, next_call

if TYPE_CHECKING:
    from echomq.tasks import AnyTask

P = ParamSpec("P")
T = TypeVar("T")
SenderT = TypeVar("SenderT", AsyncSender, SyncSender)
F = TypeVar("F", bound=Callable[..., Any])


class QueueShell(Generic[SenderT]):
    """A named queue's options, engine and sender; subclasses add the I/O style.

    ``settings`` are the :class:`~echomq.options.QueueOptions` fields (ordering,
    retention, backoff, …), declared with their defaults there, once.
    """

    sender: SenderT

    def __init__(
        self,
        name: str,
        url: str | None = None,
        *,
        client: Any = None,
        durable: bool = False,
        durable_timeout: float = DEFAULT_DURABLE_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        **settings: Unpack[QueueSettings],
    ) -> None:
        options = QueueOptions.from_settings(settings)
        self.engine = Engine(name, options, durable=durable, durable_timeout=durable_timeout)
        self.name = name
        #: the tasks made on this queue object (``q.task``), by name
        self.tasks: dict[str, AnyTask] = {}
        #: connections this queue's client may hold at once (echomq.connection; not
        #: for a given ``client``, which keeps its own pool)
        self.max_connections = check_max_connections(max_connections)
        self.sender = self._make_sender(url, client, self.engine.check_format())

    def register_task(self, task: AnyTask) -> None:
        """Record a task made on this queue: a job of its name added by hand
        (``add``, ``add_many``) gets the task's plain options (max_attempts,
        expires, a fixed priority or group), and a handler's follow-up
        enqueues find their queue (Task.home)."""
        self.tasks[task.name] = task
        self.engine.task_defaults[task.name] = cast(JobOptions, task.job_defaults())

    def _make_sender(self, url: str | None, client: Any, greeting: Call[Any]) -> SenderT:
        raise NotImplementedError

    @property
    def url(self) -> str | None:
        return self.sender.url

    @property
    def options(self) -> QueueOptions:
        return self.engine.options

    @property
    def durable(self) -> bool:
        return self.engine.durable

    @property
    def durable_timeout(self) -> float:
        return self.engine.durable_timeout


def sends_async(
    build: Callable[Concatenate[Engine, P], Call[T]],
) -> Callable[Concatenate[QueueShell[AsyncSender], P], Coroutine[Any, Any, T]]:
    """The asyncio queue method that sends what ``build`` (an Engine method) builds."""

    async def method(self: QueueShell[AsyncSender], /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.sender.send(build(self.engine, *args, **kwargs))

    return _named_like(method, build)


def sends_steps_async(
    build: Callable[Concatenate[Engine, P], Call[T | Next[T]]],
) -> Callable[Concatenate[QueueShell[AsyncSender], P], Coroutine[Any, Any, T]]:
    """The asyncio queue method that sends what ``build`` builds and every call a
    reply asks for next (echomq.steps)."""

    async def method(self: QueueShell[AsyncSender], /, *args: P.args, **kwargs: P.kwargs) -> T:
        call: Call[Any] | None = build(self.engine, *args, **kwargs)
        steps = 0
        while call is not None:
            value = await self.sender.send(call)
            steps += 1
            call = next_call(value, steps, build.__name__)
        return value  # type: ignore[no-any-return]

    return _named_like(method, build)


# generated from sends_async by tools/unasync.py: edit that, then run it
def sends(
    build: Callable[Concatenate[Engine, P], Call[T]],
) -> Callable[Concatenate[QueueShell[SyncSender], P], T]:
    """The blocking queue method that sends what ``build`` (an Engine method) builds."""

    def method(self: QueueShell[SyncSender], /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.sender.send(build(self.engine, *args, **kwargs))

    return _named_like(method, build)


# end generated


# generated from sends_steps_async by tools/unasync.py: edit that, then run it
def sends_steps(
    build: Callable[Concatenate[Engine, P], Call[T | Next[T]]],
) -> Callable[Concatenate[QueueShell[SyncSender], P], T]:
    """The blocking queue method that sends what ``build`` builds and every call a
    reply asks for next (echomq.steps)."""

    def method(self: QueueShell[SyncSender], /, *args: P.args, **kwargs: P.kwargs) -> T:
        call: Call[Any] | None = build(self.engine, *args, **kwargs)
        steps = 0
        while call is not None:
            value = self.sender.send(call)
            steps += 1
            call = next_call(value, steps, build.__name__)
        return value  # type: ignore[no-any-return]

    return _named_like(method, build)


# end generated


def _named_like(method: F, build: Callable[..., Any]) -> F:
    method.__name__ = method.__qualname__ = build.__name__
    method.__doc__ = build.__doc__
    method.__wrapped__ = build  # type: ignore[attr-defined]  # help() shows its signature
    return method
