"""Client-side batching of concurrent adds: one script call for the adds issued while
another is in flight.

A web server adds one job per request, from many tasks at once. Sent one by
one, each add costs a round trip and a script call's fixed set-up on the
server. The batcher sends the first add at once (a lone add waits for
nothing), and every add issued while a call is in flight joins the next
call, up to MAX_BATCH jobs. Each caller still gets its own outcome:

- its own id, in the order the adds were issued (the server accepts a batch
  in order, and batches go one after the other);
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

State is kept per event loop, so a Queue can be used from one
``asyncio.run`` after another (and from several loops in threads).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from echomq.errors import InvalidInput, LaneFull, NotReplicated

#: most jobs in one batched add call, so no script call runs long.
MAX_BATCH = 1000
#: refusals of a batched call that may be about one of its jobs only (nothing was
#: written): its adds are sent again one by one, each meeting its own outcome.
PER_JOB_REFUSALS = (LaneFull, InvalidInput)

J = TypeVar("J")


@dataclass(slots=True)
class _Pending(Generic[J]):
    job: J
    durable: bool | None
    future: asyncio.Future[str]


@dataclass(slots=True)
class _LoopState(Generic[J]):
    pending: list[_Pending[J]] = field(default_factory=list)
    sender: asyncio.Task[None] | None = None


class AddBatcher(Generic[J]):
    """``await submit(job, durable)`` behaves like one add call but shares round trips.

    ``send_batch(jobs, durable)`` sends one add call and returns the ids in order.
    """

    def __init__(
        self, send_batch: Callable[[Sequence[J], bool | None], Awaitable[list[str]]]
    ) -> None:
        self._send_batch = send_batch
        self._states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState[J]] = (
            weakref.WeakKeyDictionary()
        )

    async def submit(self, job: J, durable: bool | None) -> str:
        loop = asyncio.get_running_loop()
        state = self._states.get(loop)
        if state is None:
            state = self._states[loop] = _LoopState[J]()
        future: asyncio.Future[str] = loop.create_future()
        state.pending.append(_Pending(job, durable, future))
        if state.sender is None or state.sender.done():
            state.sender = loop.create_task(self._send_all(state), name="echomq-adds")
        return await future

    async def _send_all(self, state: _LoopState[J]) -> None:
        while state.pending:
            batch = _next_batch(state.pending)
            del state.pending[: len(batch)]
            await self._send(batch)

    async def _send(self, batch: list[_Pending[J]]) -> None:
        try:
            ids = await self._send_batch([p.job for p in batch], batch[0].durable)
        except PER_JOB_REFUSALS as exc:
            await self._one_by_one(batch, exc)
            return
        except NotReplicated as exc:  # written, not acknowledged: each caller hears of its own job
            for pending, job_id in zip(batch, exc.ids, strict=True):
                _settle(pending, NotReplicated([job_id], exc.replicas, exc.timeout))
            return
        except BaseException as exc:  # every caller in the call sees its failure
            for pending in batch:
                _settle(pending, exc)
            if not isinstance(exc, Exception):
                raise
            return
        for pending, job_id in zip(batch, ids, strict=True):
            if not pending.future.done():  # its caller may have been cancelled
                pending.future.set_result(job_id)

    async def _one_by_one(self, batch: list[_Pending[J]], refusal: Exception) -> None:
        """After ``refusal`` of ``batch`` (nothing was written): each add alone, in
        order, meets its own outcome."""
        if len(batch) == 1:
            _settle(batch[0], refusal)
            return
        for pending in batch:
            await self._send([pending])


def _settle(pending: _Pending[J], error: BaseException) -> None:
    if not pending.future.done():  # its caller may have been cancelled
        pending.future.set_exception(error)


def _next_batch(pending: list[_Pending[J]]) -> list[_Pending[J]]:
    """The longest run at the head of ``pending`` with one durability, at most MAX_BATCH."""
    durable = pending[0].durable
    size = 1
    while size < len(pending) and size < MAX_BATCH and pending[size].durable == durable:
        size += 1
    return pending[:size]
