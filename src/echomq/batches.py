"""Batches: a group of jobs with exactly-once callbacks, progress, cancel and
as-completed (DESIGN §10 "Batches", docs/lifecycle.md "Batches").

``b = await q.batch(on_success=…, on_complete=…, on_death=…)`` makes an open
batch; children join it with ``b.add``, ``b.add_many``, ``q.add(...,
batch=b.id)`` or ``task.enqueue_with(batch=b.id)``; ``await b.close()`` seals
it (``async with q.batch(...) as b:`` closes on exit). The server keeps the
batch in one hash (scripts/includes/batch.lua): its status is one read, and
each callback is added as a job by the script of the transition that makes
it due, in the same atomic step, exactly once.

This module holds what involves no I/O: batch ids, the callbacks' checks and
encoding, :class:`BatchStatus`, and the thin :class:`Batch` / :class:`SyncBatch`
handles over a queue.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, cast

from echomq import ids
from echomq.errors import InvalidOption
from echomq.job import encode_payload
from echomq.keys import lane_of
from echomq.options import MAX_ATTEMPTS, check_int, check_job_name, delay_ms, encode_headers
from echomq.score import check_tier

if TYPE_CHECKING:
    from echomq.call import Call

#: the queue a batch handle adds to (a Queue or a SyncQueue: Any, so this module
#: imports neither and stays below them)
AnyQueue = Any

#: a batch id starts with this, then 26 Crockford base32 characters (a UUIDv7, as job ids).
BATCH_PREFIX = "bat_"
#: most children one batch holds (an add past it is refused, nothing written).
MAX_CHILDREN = 100_000
#: the callbacks a batch takes, by keyword → their letter in the batch hash.
CALLBACKS = {"on_success": "s", "on_complete": "c", "on_death": "d"}
#: what a callback job spec may hold (a dict, or ``task.prepare(...)``'s item).
CALLBACK_KEYS = frozenset({"name", "data", "priority", "group", "delay", "max_attempts", "headers"})

#: batches one page of ``q.batches()`` holds at most, and by default.
MAX_BATCH_PAGE = 200
BATCH_PAGE = 50

BatchState = Literal["open", "running", "succeeded", "failed", "cancelled"]


def new_batch_id() -> str:
    """A new batch id: ``bat_`` and the body of a fresh branded id (mint order)."""
    return BATCH_PREFIX + ids.new_id()[len(ids.PREFIX) :]


def is_batch_id(value: object) -> bool:
    """Whether ``value`` is a well-formed batch id."""
    return (
        isinstance(value, str)
        and value.startswith(BATCH_PREFIX)
        and ids.is_id(ids.PREFIX + value[len(BATCH_PREFIX) :])
    )


def check_batch_id(value: object, what: str = "batch") -> str:
    """``value`` if it is a batch id, else InvalidOption naming it and the form."""
    if not is_batch_id(value):
        raise InvalidOption(
            f"{what} {value!r:.80} is not a batch id (bat_ and 26 Crockford base32 "
            "characters, as Batch.id gives)"
        )
    return value  # type: ignore[return-value]


def encode_callback(keyword: str, spec: object, max_payload: int) -> list[Any]:
    """One callback as createBatch.lua stores it: [id, name, data, tier, lane,
    delay_ms, max_attempts (-3: the stored setting, else 3), headers]; raises
    InvalidOption for anything that is not a job spec."""
    item = getattr(spec, "item", spec)  # task.prepare(...) gives a Prepared
    if not isinstance(item, Mapping) or "name" not in item:
        raise InvalidOption(
            f"{keyword} {spec!r:.80} is not a job spec: give a dict with 'name' (and "
            "'data', priority, group, delay, max_attempts) or task.prepare(...)"
        )
    unknown = sorted(set(item) - CALLBACK_KEYS)
    if unknown:
        raise InvalidOption(
            f"{keyword}: unknown key(s) {unknown} in the job spec; allowed: "
            f"{', '.join(sorted(CALLBACK_KEYS))}"
        )
    name = check_job_name(item["name"])
    data = encode_payload(item.get("data"), what=f"{keyword} data", limit=max_payload)
    delay = item.get("delay")
    attempts = item.get("max_attempts")
    headers = item.get("headers")
    return [
        ids.new_id(),
        name,
        data,
        check_tier(item.get("priority", 0)),
        lane_of(item.get("group")),
        0 if delay is None else delay_ms(delay),
        -3 if attempts is None else check_int("max_attempts", attempts, 1, MAX_ATTEMPTS),
        "" if headers is None else encode_headers(headers),
    ]


def encode_callbacks(callbacks: Mapping[str, object], max_payload: int) -> dict[str, list[Any]]:
    """The batch's callbacks by letter (s, c, d), those given only."""
    return {
        CALLBACKS[keyword]: encode_callback(keyword, spec, max_payload)
        for keyword, spec in callbacks.items()
        if spec is not None
    }


@dataclass(frozen=True, slots=True)
class BatchStatus:
    """A batch's counts and state (``q.batch_status``), read in one command.

    ``total`` children were added (a child removed by hand before it finished
    leaves the batch); ``waiting`` counts those not running and not finished
    (waiting, delayed, retry pending, blocked). ``callbacks`` maps each
    callback given (on_success, on_complete, on_death) to its job id once it
    fired, else None."""

    id: str
    total: int
    waiting: int
    active: int
    completed: int
    dead: int
    cancelled: int
    closed: bool
    state: BatchState
    created_at: datetime | None
    callbacks: dict[str, str | None]

    @property
    def finished(self) -> int:
        """Children completed, dead or cancelled."""
        return self.completed + self.dead + self.cancelled

    @classmethod
    def from_hash(cls, batch_id: str, h: Mapping[str, str]) -> BatchStatus:
        def count(name: str) -> int:
            return int(h.get(name) or 0)

        total, active = count("t"), count("a")
        completed, dead, cancelled = count("c"), count("d"), count("x")
        closed = h.get("cl") == "1"
        state: BatchState
        if h.get("k"):
            state = "cancelled"
        elif not closed:
            state = "open"
        elif completed + dead < total:
            state = "running"
        else:
            state = "succeeded" if dead == 0 else "failed"
        created = h.get("ca")
        return cls(
            id=batch_id,
            total=total,
            waiting=max(0, total - active - completed - dead - cancelled),
            active=active,
            completed=completed,
            dead=dead,
            cancelled=cancelled,
            closed=closed,
            state=state,
            created_at=None if not created else datetime.fromtimestamp(int(created) / 1000, tz=UTC),
            callbacks={
                keyword: h.get("f" + letter)
                for keyword, letter in CALLBACKS.items()
                if "o" + letter in h
            },
        )


@dataclass(frozen=True, slots=True)
class BatchPage:
    """One page of the queue's batches (``q.batches()``), newest first, and the
    cursor that goes on after it (None: nothing more). A page may be shorter than
    asked and still carry a cursor (the server looks at a bounded number of
    batches per call, and skips those gone with their retention)."""

    batches: list[BatchStatus]
    cursor: str | None


class Batch:
    """An open batch of an asyncio :class:`~echomq.Queue` (``await q.batch(...)``)."""

    def __init__(self, queue: AnyQueue, batch_id: str) -> None:
        self.queue = queue
        self.id = batch_id

    def __repr__(self) -> str:
        return f"<Batch {self.id} of queue {self.queue.name!r}>"

    async def add(self, name: str, data: Any = None, **options: Any) -> str:
        """Add one child (``q.add``'s options); returns its id."""
        _no_batch_option(options)
        return cast(str, await self.queue.add(name, data, batch=self.id, **options))

    async def add_many(self, items: Iterable[Mapping[str, Any]]) -> list[str]:
        """Add many children in one call (``q.add_many``'s items); all or nothing."""
        return cast(list[str], await self.queue.add_many(_with_batch(items, self.id)))

    async def close(self) -> BatchState:
        """Seal the batch: no more children; what is due then fires at once."""
        return cast(BatchState, await self.queue.close_batch(self.id))

    async def status(self) -> BatchStatus:
        return cast(BatchStatus, await self.queue.batch_status(self.id))

    async def __aenter__(self) -> Batch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class BatchStart:
    """What ``q.batch(...)`` returns: awaitable (the open Batch) or ``async with``
    (closes on exit)."""

    def __init__(self, queue: AnyQueue, call: Call[str]) -> None:
        self._queue = queue
        self._call = call
        self._batch: Batch | None = None

    async def _open(self) -> Batch:
        return Batch(self._queue, cast(str, await self._queue.sender.send(self._call)))

    def __await__(self) -> Generator[Any, None, Batch]:
        return self._open().__await__()

    async def __aenter__(self) -> Batch:
        self._batch = await self._open()
        return self._batch

    async def __aexit__(self, *exc: object) -> None:
        if self._batch is not None:
            await self._batch.close()


class SyncBatch:
    """An open batch of a :class:`~echomq.SyncQueue` (``sq.batch(...)``; ``with``
    closes it on exit)."""

    def __init__(self, queue: AnyQueue, batch_id: str) -> None:
        self.queue = queue
        self.id = batch_id

    def __repr__(self) -> str:
        return f"<SyncBatch {self.id} of queue {self.queue.name!r}>"

    def add(self, name: str, data: Any = None, **options: Any) -> str:
        _no_batch_option(options)
        return cast(str, self.queue.add(name, data, batch=self.id, **options))

    def add_many(self, items: Iterable[Mapping[str, Any]]) -> list[str]:
        return cast(list[str], self.queue.add_many(_with_batch(items, self.id)))

    def close(self) -> BatchState:
        return cast(BatchState, self.queue.close_batch(self.id))

    def status(self) -> BatchStatus:
        return cast(BatchStatus, self.queue.batch_status(self.id))

    def __enter__(self) -> SyncBatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _no_batch_option(options: Mapping[str, Any]) -> None:
    if "batch" in options:
        raise InvalidOption("Batch.add: the batch is the batch itself; give no batch=")


def _with_batch(items: Iterable[Mapping[str, Any]], batch_id: str) -> list[dict[str, Any]]:
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InvalidOption(f"add_many item {i} must be a mapping with a 'name'")
        if "batch" in item:
            raise InvalidOption(f"add_many item {i}: Batch.add_many sets batch itself")
        out.append({**item, "batch": batch_id})
    return out
