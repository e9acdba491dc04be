"""Outbox.add: a job written as one row in the caller's own database transaction.

The row becomes a job when the transaction commits and a relay
(echomq.outbox.relay) moves it; a rolled-back row never becomes one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Unpack

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession
from sqlalchemy.orm import Session

from echomq.engine import AddOptions
from echomq.errors import OutboxError
from echomq.options import QueueOptions
from echomq.outbox.rows import RowChecker, RowValues
from echomq.outbox.table import DEFAULT_TABLE, OutboxTables, check_dialect
from echomq.urls import redact_url

#: async drivers → the sync driver the relay and create_table use on the same database
SYNC_DRIVERS = {
    "postgresql+asyncpg": "postgresql+psycopg",
    "postgresql+psycopg_async": "postgresql+psycopg",
    "sqlite+aiosqlite": "sqlite",
}

#: the columns an add writes (the rest have defaults)
ROW_PARAMS = ("queue", "name", "data", "options")

SyncTarget = Connection | Session
AsyncTarget = AsyncConnection | AsyncSession


def sync_url(url: URL) -> URL:
    driver = SYNC_DRIVERS.get(url.drivername)
    return url.set(drivername=driver) if driver else url


class Outbox:
    """Jobs written in the application's database transaction (docs/outbox.md).

    ``db`` is a SQLAlchemy url (``postgresql+psycopg://…``, ``sqlite:///…``),
    an ``Engine`` or an ``AsyncEngine``; ``table`` the outbox table's name
    (its dead rows go to ``<table>_dead``); ``metadata`` a MetaData to put
    the tables on (Alembic's autogenerate then sees them); ``max_payload``
    the payload limit rows are checked against (the queues' default).
    """

    def __init__(
        self,
        db: str | URL | Engine | AsyncEngine,
        table: str = DEFAULT_TABLE,
        *,
        metadata: sa.MetaData | None = None,
        max_payload: int | None = None,
    ) -> None:
        self.tables = OutboxTables(table, metadata)
        self._given: Engine | None = None
        if isinstance(db, Engine):
            self._given, self.url = db, db.url
        elif isinstance(db, AsyncEngine):
            self.url = sync_url(db.url)
        elif isinstance(db, str | URL):
            self.url = sync_url(make_url(db))
        else:
            raise OutboxError(
                f"db {type(db).__name__!r} is not a database url, an Engine or an AsyncEngine"
            )
        self.dialect = check_dialect(self.url.get_backend_name())
        settings = QueueOptions() if max_payload is None else QueueOptions(max_payload=max_payload)
        self.checker = RowChecker(settings)
        self._engine: Engine | None = self._given

    @property
    def table(self) -> str:
        return self.tables.name

    @property
    def engine(self) -> Engine:
        """The sync Engine of the outbox's database (made from the url on first use)."""
        if self._engine is None:
            self._engine = sa.create_engine(self.url)
        return self._engine

    def __repr__(self) -> str:
        shown = redact_url(self.url.render_as_string(hide_password=False))
        return f"Outbox({shown!r}, table={self.table!r})"

    # -- the tables ----------------------------------------------------------
    def create_table(self) -> None:
        """Create the outbox table, its index and the dead-row table if missing."""
        with self.engine.begin() as conn:
            self.tables.create(conn)

    def check_table(self) -> None:
        """OutboxError naming the DDL unless the tables exist with their columns."""
        with self.engine.connect() as conn:
            self.tables.check_shape(conn)

    def ddl(self) -> str:
        """The CREATE statements of the tables, for this database."""
        return self.tables.ddl(self.engine.dialect)

    # -- writing rows --------------------------------------------------------
    def add(
        self,
        conn: SyncTarget,
        queue: str,
        name: str,
        data: Any = None,
        **options: Unpack[AddOptions],
    ) -> int:
        """Write the job as one row in ``conn``'s transaction (a Connection or
        Session); its row id. Checks the job as ``Queue.add`` does: bad input
        raises before anything is written."""
        values = self.checker.check(queue, name, data, options)
        try:
            result = conn.execute(self._insert(), self._params(values))
        except sa.exc.DBAPIError as exc:
            raise self._explain(exc) from exc
        return int(result.scalar_one())

    async def add_async(
        self,
        conn: AsyncTarget,
        queue: str,
        name: str,
        data: Any = None,
        **options: Unpack[AddOptions],
    ) -> int:
        """``add`` for asyncio: an AsyncConnection or AsyncSession in a transaction."""
        values = self.checker.check(queue, name, data, options)
        try:
            result = await conn.execute(self._insert(), self._params(values))
        except sa.exc.DBAPIError as exc:
            raise self._explain(exc) from exc
        return int(result.scalar_one())

    def _insert(self) -> sa.Executable:
        """One statement: the insert (and, on PostgreSQL, the NOTIFY that wakes the
        relays at commit: notifications are sent only if the transaction commits)."""
        rows = self.tables.rows
        insert = (
            sa.insert(rows)
            .values({column: sa.bindparam(column) for column in ROW_PARAMS})
            .returning(rows.c.id)
        )
        if self.dialect != "postgresql":
            return insert
        row = insert.cte("echomq_row")
        notify = sa.func.pg_notify(sa.literal(self.tables.channel), sa.bindparam("queue"))
        return sa.select(row.c.id, notify.label("notified"))

    @staticmethod
    def _params(values: RowValues) -> Mapping[str, Any]:
        return {
            "queue": values.queue,
            "name": values.name,
            "data": values.data,
            "options": values.options,
        }

    def _explain(self, exc: sa.exc.DBAPIError) -> Exception:
        """OutboxError with the DDL when the table is missing or of another shape;
        the database's own error otherwise."""
        try:
            self.check_table()
        except OutboxError as shape:
            return shape
        except Exception:
            return exc
        return exc
