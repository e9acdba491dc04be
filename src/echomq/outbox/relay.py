"""The relay: committed outbox rows become jobs, exactly once, in row order per queue.

One pass, per queue with rows (all of them, or the ones named):

1. in a database transaction, take the queue (PostgreSQL: an advisory
   transaction lock per table and queue, so several relays can run and each
   queue is relayed by one at a time, which keeps its order; SQLite:
   ``BEGIN IMMEDIATE``, one relay at a time);
2. read its oldest rows (``id`` order, a batch);
3. add them with one ``add`` call (add.lua, like ``add_many``), each job's
   idempotency key being its row's (``outbox:<table>:<id>``, or the row's
   own ``key``): a row added before a crash finds its job instead of
   making a second one;
4. delete them (and move the rows the queue refused for good to
   ``<table>_dead`` with the error), and commit.

A relay killed between 3 and 4 leaves the rows; the next pass adds them
again and gets the same jobs back. A rolled-back row was never visible.
Errors of the database or the server are waited out (capped pauses, one
warning a minute); a row refused for good never blocks the rows behind it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, Row

from echomq import ids
from echomq.engine import NewJob
from echomq.errors import (
    TRANSIENT_ERRORS,
    FormatTooNew,
    InvalidInput,
    InvalidState,
    LaneFull,
    NotReplicated,
    OrderingMismatch,
    PoolTimeout,
    ServerError,
)
from echomq.keys import check_name
from echomq.options import check_int, check_seconds
from echomq.outbox.wake import waiter_for
from echomq.outbox.writer import Outbox
from echomq.sync import SyncQueue
from echomq.urls import redact_url

log = logging.getLogger("echomq.outbox")

DEFAULT_BATCH = 500
MAX_BATCH = 10_000
#: seconds between two looks at the table when nothing woke the relay
DEFAULT_POLL = 0.2  # SQLite (and any database without LISTEN)
DEFAULT_LISTEN_POLL = 5.0  # PostgreSQL: LISTEN wakes it; this is the fallback
#: the pauses after consecutive errors: doubling from FIRST_PAUSE up to MAX_PAUSE seconds
FIRST_PAUSE = 0.05
MAX_PAUSE = 30.0
#: a waited-out error is logged once, then at most once per this many seconds
SAY_EVERY = 60.0
#: batches of one queue per pass before the next queue gets its turn
BATCHES_PER_QUEUE = 20
#: queues' SyncQueue objects kept open
MAX_QUEUES = 256
#: a queue refused for good: these errors move the row to the dead-row table
REFUSED = (InvalidInput, FormatTooNew)
#: database errors worth waiting out (unreachable, restarted, locked)
DB_TRANSIENT = (sa.exc.OperationalError, sa.exc.InterfaceError, sa.exc.TimeoutError)
#: what a running relay waits out: the database or the server unreachable or
#: restarting, a lane at its max_waiting, a queue being dropped, a durable add
#: no replica acknowledged (its jobs exist; the next pass finds them)
WAITED_OUT: tuple[type[BaseException], ...] = (
    *DB_TRANSIENT,
    *TRANSIENT_ERRORS,
    LaneFull,
    InvalidState,
    NotReplicated,
    PoolTimeout,
    ServerError,
)
ORDERINGS = ("composite", "mint")


@dataclass
class Outcome:
    """One batch's fate: the row ids added (or found) and the rows refused for good."""

    added: list[int] = field(default_factory=list)
    dead: list[tuple[Row[Any], str]] = field(default_factory=list)


class Relay:
    """Moves an outbox's committed rows into their queues (``run`` until stopped,
    or ``relay_once``). ``url`` is the Valkey/Redis server (None:
    ``ECHOMQ_URL`` or the embedded Valkey); ``queues`` limits it to those
    queues; ``batch`` rows per add call; ``poll`` seconds between looks when
    nothing woke it (default 0.2 s on SQLite, 5 s on PostgreSQL, where
    LISTEN/NOTIFY wakes it)."""

    def __init__(
        self,
        outbox: Outbox,
        url: str | None = None,
        *,
        queues: Sequence[str] | None = None,
        batch: int = DEFAULT_BATCH,
        poll: float | None = None,
    ) -> None:
        self.outbox = outbox
        self.url = url
        self.queues = None if queues is None else [check_name("queue", q) for q in queues]
        self.batch = check_int("batch", batch, 1, MAX_BATCH)
        listens = outbox.dialect == "postgresql"
        default = DEFAULT_LISTEN_POLL if listens else DEFAULT_POLL
        self.poll = (
            default if poll is None else check_seconds("poll", poll, 0.0, 3600.0, open_low=True)
        )
        self._engine: Engine | None = None
        self._targets: dict[str, SyncQueue] = {}
        self._orderings: dict[str, str] = {}
        self._said_at = float("-inf")
        self.relayed = 0  # rows turned into jobs since this relay started
        self.dead = 0  # rows moved to the dead-row table

    # -- the database side ---------------------------------------------------
    @property
    def engine(self) -> Engine:
        """The relay's Engine: the outbox's on PostgreSQL; on SQLite one of its own
        whose transactions start with BEGIN IMMEDIATE (one writer: one relay)."""
        if self._engine is None:
            if self.outbox.dialect == "sqlite":
                self._engine = immediate_engine(self.outbox)
            else:
                self._engine = self.outbox.engine
        return self._engine

    def _queues_with_rows(self, conn: Connection) -> list[str]:
        rows = self.outbox.tables.rows
        query = sa.select(rows.c.queue).distinct()
        if self.queues is not None:
            query = query.where(rows.c.queue.in_(self.queues))
        return sorted(str(q) for q in conn.execute(query).scalars())

    @contextmanager
    def _taken(self, queue: str) -> Iterator[Connection | None]:
        """A transaction holding ``queue`` for this relay, or None when another relay has it."""
        with self.engine.begin() as conn:
            if self.outbox.dialect == "postgresql":
                lock = sa.func.pg_try_advisory_xact_lock(
                    sa.func.hashtext(self.outbox.table), sa.func.hashtext(queue)
                )
                if not conn.execute(sa.select(lock)).scalar():
                    yield None
                    return
            yield conn

    def _relay_batch(self, queue: str) -> int:
        """Relay the queue's oldest batch of rows; how many rows left the table."""
        tables = self.outbox.tables
        with self._taken(queue) as conn:
            if conn is None:
                return 0
            query = (
                sa.select(tables.rows)
                .where(tables.rows.c.queue == queue)
                .order_by(tables.rows.c.id)
                .limit(self.batch)
            )
            rows = list(conn.execute(query))
            if not rows:
                return 0
            outcome = self._add(queue, rows)
            if outcome.dead:
                conn.execute(
                    sa.insert(tables.dead), [_dead_row(row, error) for row, error in outcome.dead]
                )
            done = outcome.added + [row.id for row, _ in outcome.dead]
            conn.execute(sa.delete(tables.rows).where(tables.rows.c.id.in_(done)))
        self.relayed += len(outcome.added)
        self.dead += len(outcome.dead)
        for row, error in outcome.dead:
            log.error(
                "outbox row %d (queue %r, job %r) refused for good, moved to %s: %s",
                row.id,
                queue,
                row.name,
                tables.dead.name,
                error,
            )
        return len(rows)

    # -- the queue side ------------------------------------------------------
    def _target(self, queue: str) -> SyncQueue:
        target = self._targets.get(queue)
        if target is None:
            if len(self._targets) >= MAX_QUEUES:
                self._close_targets()
            ordering = self._orderings.get(queue, "composite")
            target = SyncQueue(queue, self.url, ordering=ordering)  # type: ignore[arg-type]
            self._targets[queue] = target
        return target

    def _send(self, queue: str, jobs: list[NewJob], durable: bool) -> None:
        """One add call; a queue created with the other ordering is reopened with it."""
        for _ in ORDERINGS:
            target = self._target(queue)
            try:
                target.sender.send(target.engine.add_jobs(jobs, durable=durable))
                return
            except OrderingMismatch:
                current = self._orderings.get(queue, "composite")
                self._orderings[queue] = ORDERINGS[1 - ORDERINGS.index(current)]
                self._targets.pop(queue).close()
        raise OrderingMismatch(f"queue {queue!r} refused both orderings")

    def _add(self, queue: str, rows: list[Row[Any]]) -> Outcome:
        outcome = Outcome()
        jobs: list[tuple[Row[Any], NewJob]] = []
        durable = False
        for row, job_id in zip(rows, ids.new_ids(len(rows)), strict=True):
            try:
                job, wants_durable = self.outbox.checker.job(
                    self.outbox.table, row.id, queue, row.name, row.data, row.options, job_id
                )
            except REFUSED as exc:
                outcome.dead.append((row, str(exc)))
                continue
            jobs.append((row, job))
            durable = durable or wants_durable
        if not jobs:
            return outcome
        try:
            self._send(queue, [job for _, job in jobs], durable)
            outcome.added.extend(row.id for row, _ in jobs)
        except REFUSED:  # one job refused the whole call (nothing was added): find which
            for row, job in jobs:
                try:
                    self._send(queue, [job], durable)
                    outcome.added.append(row.id)
                except REFUSED as exc:
                    outcome.dead.append((row, str(exc)))
        return outcome

    def _close_targets(self) -> None:
        targets, self._targets = self._targets, {}
        for target in targets.values():
            target.close()

    # -- running -------------------------------------------------------------
    def relay_once(self) -> int:
        """One pass over every queue with rows; the rows that left the table (each
        queue up to BATCHES_PER_QUEUE batches, then the next queue's turn)."""
        with self.engine.connect() as conn:
            queues = self._queues_with_rows(conn)
        moved = 0
        for queue in queues:
            for _ in range(BATCHES_PER_QUEUE):
                count = self._relay_batch(queue)
                moved += count
                if count < self.batch:
                    break
        return moved

    def run(self, stop: threading.Event | None = None) -> None:
        """Relay until ``stop`` is set: at once after a commit on PostgreSQL
        (LISTEN/NOTIFY), every ``poll`` seconds elsewhere. Errors of the database
        or the server are waited out with capped pauses (logged once a minute);
        a missing or misshapen table raises OutboxError."""
        stop = stop or threading.Event()
        waiter = waiter_for(self.engine, self.outbox.dialect, self.outbox.tables.channel)
        pause = 0.0
        checked = False
        try:
            while not stop.is_set():
                try:
                    if not checked:
                        self.outbox.check_table()
                        checked = True
                    waiter.arm()
                    moved = self.relay_once()
                    if moved == 0:
                        waiter.wait(self.poll, stop)
                    pause = 0.0
                except WAITED_OUT as exc:
                    pause = min(MAX_PAUSE, max(FIRST_PAUSE, pause * 2))
                    self._say(exc, pause)
                    waiter.close()
                    stop.wait(pause)
        finally:
            waiter.close()
            self._close_targets()

    def _say(self, exc: BaseException, pause: float) -> None:
        now = time.monotonic()
        if now - self._said_at < SAY_EVERY:
            log.debug("relay: %s; retrying in %.2f s", _describe(exc), pause)
            return
        self._said_at = now
        log.warning(
            "relay of %r: %s; retrying (pauses up to %.0f s; said once a minute)",
            self.outbox.table,
            _describe(exc),
            MAX_PAUSE,
        )

    def close(self) -> None:
        self._close_targets()
        if self._engine is not None and self._engine is not self.outbox.engine:
            self._engine.dispose()


def _describe(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    return redact_url(f"{type(exc).__name__}: {first}")


def _dead_row(row: Row[Any], error: str) -> dict[str, Any]:
    return {
        "id": row.id,
        "queue": row.queue,
        "name": row.name,
        "data": row.data,
        "options": row.options,
        "created_at": row.created_at,
        "error": error[:4000],
        "dead_at": datetime.now(UTC),  # tables made by Django's migration have no default
    }


def immediate_engine(outbox: Outbox) -> Engine:
    """An Engine on the outbox's SQLite file whose transactions take the write lock
    at their start (BEGIN IMMEDIATE): a second relay waits instead of reading rows
    the first is relaying."""
    engine = sa.create_engine(outbox.url)

    @sa.event.listens_for(engine, "connect")
    def _no_implicit_begin(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # pysqlite: we say BEGIN ourselves

    @sa.event.listens_for(engine, "begin")
    def _begin_immediate(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine
