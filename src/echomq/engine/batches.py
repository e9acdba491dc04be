"""Batches' calls: make, close, read and cancel a batch, and read its finished
children in order (as_completed). The rules are in echomq.batches and
scripts/includes/batch.lua."""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import orjson

from echomq.batches import (
    BATCH_PAGE,
    MAX_BATCH_PAGE,
    BatchPage,
    BatchState,
    BatchStatus,
    check_batch_id,
    encode_callbacks,
    new_batch_id,
)
from echomq.call import Call
from echomq.engine.base import EngineBase
from echomq.engine.replies import fields_after_id, heads_code, is_code, pairs
from echomq.errors import (
    E_INVALID_STATE,
    E_NOT_FOUND,
    E_ORDERING,
    BatchNotFound,
    EchoMQError,
    OrderingMismatch,
)
from echomq.job import Job
from echomq.options import check_int, check_seconds
from echomq.steps import Next
from echomq.tags import check_cursor, wrap_cursor

#: children one cancelBatch.lua call handles at most (bounded work per call). As
#: many as one call prunes from the cancelled set (PRUNE_BUDGET, retention.lua),
#: so that set stays within the dead jobs' retention count plus one page.
CANCEL_PAGE = 100
#: most calls one cancel_batch takes (100,000 children / CANCEL_PAGE, and room).
MAX_CANCEL_CALLS = 100_000 // CANCEL_PAGE + 10
#: finished children one as_completed read returns at most.
DONE_PAGE = 500
#: seconds one as_completed wait registers on the server before it reads again.
DONE_WAIT = 30.0
#: what a cursor of ``batches()`` is bound to (echomq.tags.wrap_cursor).
BATCHES_QUERY = "batches"


def not_found(queue: str, batch_id: str) -> BatchNotFound:
    return BatchNotFound(
        f"no batch {batch_id!r} in queue {queue!r} (never made in this queue, or gone "
        "with its retention)"
    )


class CancelStep(NamedTuple):
    """cancelBatch.lua's reply: the next rank (-1: done), cancelled, stopped."""

    next_rank: int
    cancelled: int
    stopped: int


class DonePage(NamedTuple):
    """batchDone.lua's reply when children finished: their places and hashes."""

    places: list[Any]
    hashes: list[Any]


class Finished(NamedTuple):
    """One finished child as as_completed yields it, with its place (``after=``)."""

    place: int
    job: Job


def decode_batches(reply: Any) -> BatchPage:
    """listBatches.lua's reply: the position ("" = no more), then one entry per
    batch, its id then its hash's fields (a callback given: its field, "1")."""
    position, *entries = reply
    return BatchPage(
        [BatchStatus.from_hash(entry[0], fields_after_id(entry)) for entry in entries],
        wrap_cursor(position, BATCHES_QUERY),
    )


def decode_done(queue: str, batch_id: str, reply: Any) -> list[Finished] | None:
    """A page of finished children; [] at the end; None when a wait was registered."""
    if is_code(reply, E_NOT_FOUND):
        raise not_found(queue, batch_id)
    if reply == "end":
        return []
    if reply == 0:
        return None
    page = DonePage(*reply)
    out = []
    for place, raw in zip(page.places, page.hashes, strict=True):
        h = pairs(raw)
        job_id = h.pop("id")
        out.append(Finished(int(place), Job.from_hash(job_id, h)))
    return out


class BatchCalls(EngineBase):
    """Make, close, read and cancel batches; read their finished children."""

    def create_batch(
        self, *, on_success: Any = None, on_complete: Any = None, on_death: Any = None
    ) -> Call[str]:
        """Make an open batch; the reply is its id (``bat_…``). Each callback is a job
        spec (a dict with name, data, priority, group, delay, max_attempts, headers,
        or ``task.prepare(...)``), checked here: InvalidOption, nothing written."""
        callbacks = encode_callbacks(
            {"on_success": on_success, "on_complete": on_complete, "on_death": on_death},
            self.options.max_payload,
        )
        batch_id = new_batch_id()

        def decode(reply: Any) -> str:
            if is_code(reply, E_ORDERING):
                raise OrderingMismatch(
                    f"queue {self.queue!r} exists with another ordering than "
                    f"{self.options.ordering!r}; open it with the ordering it was created with"
                )
            if heads_code(reply, E_INVALID_STATE):
                raise EchoMQError(f"batch id {batch_id} is taken (try again)")
            return batch_id

        packed = orjson.dumps(callbacks).decode()
        return self._script("createBatch", decode, self.options.ordering, batch_id, packed)

    def close_batch(self, batch_id: str) -> Call[BatchState]:
        """Seal a batch: it takes no more children; a callback that is due then (every
        child finished already) is added in the same step. Closing a closed batch
        changes nothing. The reply is the batch's state; BatchNotFound if unknown."""
        check_batch_id(batch_id)

        def decode(reply: Any) -> BatchState:
            if is_code(reply, E_NOT_FOUND):
                raise not_found(self.queue, batch_id)
            return reply  # type: ignore[no-any-return]

        return self._script("closeBatch", decode, batch_id)

    def batch_status(self, batch_id: str) -> Call[BatchStatus]:
        """A batch's counts and state, read in one command (O(1)); BatchNotFound for
        an unknown id (or a batch of another queue)."""
        check_batch_id(batch_id)

        def decode(reply: Any) -> BatchStatus:
            h = pairs(reply)
            if not h:
                raise not_found(self.queue, batch_id)
            return BatchStatus.from_hash(batch_id, h)

        return Call(parse=decode, command=("HGETALL", self.keys.batch(batch_id)))

    def peek_batch(self, batch_id: str) -> Call[BatchStatus]:
        """``batch_status`` without reading the callbacks' job specs on the server:
        the same BatchStatus in a reply that stays small whatever the callbacks'
        data (a read-only script: HKEYS, then HMGET of the counters and flags).
        BatchNotFound for an unknown id."""
        check_batch_id(batch_id)

        def decode(reply: Any) -> BatchStatus:
            if is_code(reply, E_NOT_FOUND):
                raise not_found(self.queue, batch_id)
            return BatchStatus.from_hash(batch_id, fields_after_id(reply))

        return self._script("peekBatch", decode, batch_id)

    def batches(self, *, cursor: str | None = None, count: int = BATCH_PAGE) -> Call[BatchPage]:
        """A page of the queue's batches, newest first by creation, each as
        ``batch_status`` gives it; ``cursor`` (a page's ``cursor``) goes on after that
        page. Bounded work per call: the server looks at up to 200 batches, so a page
        may be shorter than ``count`` (1 … MAX_BATCH_PAGE) and still carry a cursor.
        A batch gone with its retention is no longer listed."""
        check_int("count", count, 1, MAX_BATCH_PAGE)
        start = "" if cursor is None else check_cursor(cursor, BATCHES_QUERY)
        return self._script("listBatches", decode_batches, start, str(count))

    def cancel_batch(self, batch_id: str) -> Call[bool | Next[bool]]:
        """Cancel a batch: its children not started end ``cancelled`` (never run),
        running ones are cancelled as ``cancel`` does (dead), and no callback fires
        from then on. Done in steps of CANCEL_PAGE children (each one atomic
        script); the first step marks the batch, so a child claimed between two
        steps is cancelled instead of run. The reply is False when the batch had
        succeeded or failed already (nothing changes); BatchNotFound if unknown."""
        check_batch_id(batch_id)
        return self._cancel_step(batch_id, 0)

    def _cancel_step(self, batch_id: str, rank: int) -> Call[bool | Next[bool]]:
        def decode(reply: Any) -> bool | Next[bool]:
            if is_code(reply, E_NOT_FOUND):
                raise not_found(self.queue, batch_id)
            if reply == "finished":
                return False
            step = CancelStep(*(int(x) for x in reply))
            if step.next_rank < 0:
                return True
            return Next(self._cancel_step(batch_id, step.next_rank), MAX_CANCEL_CALLS)

        return self._script("cancelBatch", decode, batch_id, str(rank), str(CANCEL_PAGE))

    def batch_done(
        self, batch_id: str, after: int = 0, wait: float = DONE_WAIT
    ) -> Call[list[Finished] | None]:
        """The batch's children that finished after place ``after`` (as_completed's
        read): a page, [] when every child has finished and none is left, or None
        when none is there yet and a wait of ``wait`` seconds was registered (the
        server publishes the batch id when one finishes)."""
        check_batch_id(batch_id)
        check_int("after", after, 0, 10**9)
        check_seconds("wait", wait, 0.0, 3600.0, open_low=False)
        decode = partial(decode_done, self.queue, batch_id)
        return self._script(
            "batchDone", decode, batch_id, str(after), str(DONE_PAGE), str(round(wait * 1000))
        )
