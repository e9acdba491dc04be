"""Coalescing: the calls issued while another is in flight share the next call.

A :class:`Coalescer` sends the first item at once (a lone item waits for
nothing), and every item handed to it while a call is in flight joins the
next call, up to ``max_batch`` items. Each caller still gets its own outcome:
the call it builds answers each item (a value or an error), and a call that
fails as a whole (the server is unreachable) fails each of its items with that
error. Items of one *run* (``run(item)``, e.g. durable or not) share a call;
a call never mixes two. State is kept per event loop, so its owner can be used
from one ``asyncio.run`` after another (and from several loops in threads).

Two users, one shape:

- :class:`AddCoalescer`, concurrent ``Queue.add`` calls (a web server adds one
  job per request, from many tasks at once);
- the worker's completions (``echomq.worker.completions``): one
  ``completeMany`` call for the jobs that finished while one was in flight.

Adds keep these outcomes:

- each its own id, in the order the adds were issued (the server accepts a
  batch in order, and batches go one after the other);
- its own input errors: every job is checked before it is queued, so a bad
  job raises in its caller and never reaches a batch;
- idempotency keys work per job, as the add script handles each in turn;
- durable and ordinary adds never share a call (a call is durable or not);
- a refusal that may concern one job only (``LaneFull``: one lane at its
  ``max_waiting``; ``InvalidDependency``) refuses the whole call and writes
  nothing (add.lua reads and checks every job before its first write, as
  ``add_many`` is all-or-nothing): the call's adds are then sent again one by
  one, in order, so each caller meets its own outcome (ten adds to lane ``a``
  batched with one to a full lane ``b``: ten ids and one LaneFull). Chosen
  over per-job outcomes in the script because it costs nothing until a lane
  is full, and keeps add.lua's one all-or-nothing rule for ``add_many``;
- a refusal that concerns the queue, not a job (another ordering,
  ``drop()`` under way: each of the adds alone would meet it too), and a call
  that fails (the server is unreachable) fail every add in it with that
  error; the jobs' ids were minted before sending, so an add retried after a
  lost reply is not written twice.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from echomq.errors import InvalidInput, LaneFull, NotReplicated

#: most jobs in one coalesced add call, so no script call runs long.
MAX_ADDS = 1000
#: refusals of a coalesced add call that may be about one of its jobs only (nothing
#: was written): its adds are sent again one by one, each meeting its own outcome.
PER_JOB_REFUSALS = (LaneFull, InvalidInput)

I = TypeVar("I")  # noqa: E741 - an item
R = TypeVar("R")
J = TypeVar("J")

#: sends one add call for the jobs (durable or not) and returns their ids in order.
SendAdds = Callable[[Sequence[J], bool | None], Awaitable[list[str]]]
#: sends one call for the items, in order; answers each item: its value or its error.
SendItems = Callable[[list[I]], Awaitable[Sequence[R | BaseException]]]


@dataclass(slots=True)
class _Waiting(Generic[I, R]):
    item: I
    future: asyncio.Future[R]


@dataclass(slots=True)
class _LoopState(Generic[I, R]):
    waiting: list[_Waiting[I, R]] = field(default_factory=list)
    sender: asyncio.Task[None] | None = None


def _one_run(_: object) -> None:
    return None


class Coalescer(Generic[I, R]):
    """``await submit(item)`` behaves like one call for ``item`` but shares round trips."""

    def __init__(
        self,
        send: SendItems[I, R],
        *,
        max_batch: int,
        name: str,
        run: Callable[[I], object] = _one_run,
    ) -> None:
        self._send = send
        self.max_batch = max_batch
        self._name = name
        self._run = run
        self._states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState[I, R]] = (
            weakref.WeakKeyDictionary()
        )

    async def submit(self, item: I) -> R:
        loop = asyncio.get_running_loop()
        state = self._states.get(loop)
        if state is None:
            state = self._states[loop] = _LoopState[I, R]()
        future: asyncio.Future[R] = loop.create_future()
        state.waiting.append(_Waiting(item, future))
        if state.sender is None or state.sender.done():
            state.sender = loop.create_task(self._send_all(state), name=self._name)
        return await future

    async def close(self) -> None:
        """Wait until the items already handed over (on the running loop) are sent."""
        state = self._states.get(asyncio.get_running_loop())
        if state is not None and state.sender is not None:
            await asyncio.gather(state.sender, return_exceptions=True)

    async def _send_all(self, state: _LoopState[I, R]) -> None:
        while state.waiting:
            batch = self._next_batch(state.waiting)
            del state.waiting[: len(batch)]
            await self._send_batch(batch)

    def _next_batch(self, waiting: list[_Waiting[I, R]]) -> list[_Waiting[I, R]]:
        """The longest run at the head of ``waiting`` of one run, at most max_batch."""
        run = self._run(waiting[0].item)
        size = 1
        while (
            size < len(waiting) and size < self.max_batch and self._run(waiting[size].item) == run
        ):
            size += 1
        return waiting[:size]

    async def _send_batch(self, batch: list[_Waiting[I, R]]) -> None:
        try:
            outcomes = await self._send([waiting.item for waiting in batch])
        except BaseException as exc:  # the whole call failed: every caller in it sees why
            for waiting in batch:
                _settle(waiting.future, exc)
            if not isinstance(exc, Exception):
                raise
            return
        for waiting, outcome in zip(batch, outcomes, strict=True):
            _settle(waiting.future, outcome)


def _settle(future: asyncio.Future[R], outcome: R | BaseException) -> None:
    if future.done():  # its caller was cancelled
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


@dataclass(frozen=True, slots=True)
class _Add(Generic[J]):
    job: J
    durable: bool | None


class AddCoalescer(Generic[J]):
    """``await submit(job, durable)`` behaves like one add call but shares round trips.

    ``send_adds(jobs, durable)`` sends one add call and returns the ids in order."""

    def __init__(
        self, send_adds: Callable[[Sequence[J], bool | None], Awaitable[list[str]]]
    ) -> None:
        self._send_adds = send_adds
        self.calls = Coalescer[_Add[J], str](
            self._send, max_batch=MAX_ADDS, name="echomq-adds", run=_durability
        )

    async def submit(self, job: J, durable: bool | None) -> str:
        return await self.calls.submit(_Add(job, durable))

    async def _send(self, adds: list[_Add[J]]) -> list[str | BaseException]:
        try:
            return list(await self._send_adds([add.job for add in adds], adds[0].durable))
        except PER_JOB_REFUSALS as refusal:  # nothing was written: each add alone, in order
            if len(adds) == 1:
                return [refusal]
            return [await self._send_alone(add) for add in adds]
        except NotReplicated as exc:  # written, not acknowledged: each hears of its own job
            return [NotReplicated([job_id], exc.replicas, exc.timeout) for job_id in exc.ids]

    async def _send_alone(self, add: _Add[J]) -> str | BaseException:
        try:
            (outcome,) = await self._send([add])
        except Exception as exc:  # this add's call failed: the others are still sent
            return exc
        return outcome


def _durability(add: _Add[Any]) -> bool | None:
    return add.durable
