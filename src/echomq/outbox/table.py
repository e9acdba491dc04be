"""The outbox tables as SQLAlchemy Core objects, their DDL, and the shape check.

``<table>`` holds the rows waiting to be relayed: ``id`` (a BIGSERIAL on
PostgreSQL, ``INTEGER PRIMARY KEY AUTOINCREMENT`` on SQLite, so an id is
never reused: it is the row's idempotency key), ``queue``, ``name``,
``data`` (the payload's JSON text), ``options`` (the add options' JSON
text, "" for none) and ``created_at``; an index on ``(queue, id)`` serves
the relay's reads. ``<table>_dead`` holds the rows the queue refused for
good, with the error.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect

from echomq.errors import OutboxError

#: the databases the outbox supports, by SQLAlchemy dialect name
DIALECTS = ("postgresql", "sqlite")
DEFAULT_TABLE = "echomq_outbox"
#: the longest table name (PostgreSQL's identifiers are 63 bytes; "_dead" is added)
MAX_TABLE_NAME = 58
#: the columns of the outbox table, in order
COLUMNS = ("id", "queue", "name", "data", "options", "created_at")
DEAD_COLUMNS = (*COLUMNS, "error", "dead_at")


def check_table_name(table: object) -> str:
    if (
        not isinstance(table, str)
        or not 1 <= len(table) <= MAX_TABLE_NAME
        or not table.replace("_", "a").isalnum()
        or not table.isascii()
        or table[0].isdigit()
    ):
        raise OutboxError(
            f"outbox table name {table!r:.80} must be 1 to {MAX_TABLE_NAME} ASCII letters, "
            "digits and underscores, not starting with a digit"
        )
    return table


def check_dialect(name: str) -> str:
    if name not in DIALECTS:
        raise OutboxError(f"the outbox supports PostgreSQL and SQLite, not {name!r}")
    return name


class OutboxTables:
    """The outbox table and its dead-row table, on one MetaData (``metadata``: pass
    your own to have Alembic's autogenerate see them)."""

    def __init__(self, name: str = DEFAULT_TABLE, metadata: sa.MetaData | None = None) -> None:
        self.name = check_table_name(name)
        self.metadata = metadata if metadata is not None else sa.MetaData()
        self.rows = sa.Table(
            name,
            self.metadata,
            sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
            sa.Column("queue", sa.String(128), nullable=False),
            sa.Column("name", sa.String(512), nullable=False),
            sa.Column("data", sa.Text(), nullable=False),
            sa.Column("options", sa.Text(), nullable=False, server_default=""),
            sa.Column(
                "created_at",
                sa.DateTime(timezone=True),
                nullable=False,
                server_default=sa.func.current_timestamp(),
            ),
            sa.Index(f"{name}_queue_id", "queue", "id"),
            sqlite_autoincrement=True,
        )
        self.dead = sa.Table(
            f"{name}_dead",
            self.metadata,
            sa.Column(
                "id",
                sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                primary_key=True,
                autoincrement=False,
            ),
            sa.Column("queue", sa.String(128), nullable=False),
            sa.Column("name", sa.String(512), nullable=False),
            sa.Column("data", sa.Text(), nullable=False),
            sa.Column("options", sa.Text(), nullable=False, server_default=""),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("error", sa.Text(), nullable=False),
            sa.Column(
                "dead_at",
                sa.DateTime(timezone=True),
                nullable=False,
                server_default=sa.func.current_timestamp(),
            ),
        )

    @property
    def channel(self) -> str:
        """The LISTEN/NOTIFY channel of this outbox on PostgreSQL."""
        return self.name

    def ddl(self, dialect: Dialect) -> str:
        """The CREATE statements of both tables and the index, for ``dialect``."""
        statements: list[sa.schema.ExecutableDDLElement] = [
            sa.schema.CreateTable(self.rows),
            *(sa.schema.CreateIndex(index) for index in self.rows.indexes),
            sa.schema.CreateTable(self.dead),
        ]
        text = "\n".join(f"{str(s.compile(dialect=dialect)).strip()};" for s in statements)
        return "\n".join(line.rstrip().replace("\t", "    ") for line in text.splitlines())

    def create(self, conn: Connection) -> None:
        """Create the tables (and the index) if they do not exist."""
        self.metadata.create_all(conn, tables=[self.rows, self.dead], checkfirst=True)

    def drop(self, conn: Connection) -> None:
        """Drop both tables (a migration's downgrade); rows still in them are lost."""
        self.metadata.drop_all(conn, tables=[self.rows, self.dead], checkfirst=True)

    def check_shape(self, conn: Connection) -> None:
        """OutboxError naming the DDL unless both tables exist with their columns."""
        inspector = sa.inspect(conn)
        for table, expected in ((self.rows, COLUMNS), (self.dead, DEAD_COLUMNS)):
            if not inspector.has_table(table.name):
                raise OutboxError(self._shape_message(conn, f"table {table.name!r} does not exist"))
            found = {column["name"] for column in inspector.get_columns(table.name)}
            absent = [column for column in expected if column not in found]
            if absent:
                raise OutboxError(
                    self._shape_message(
                        conn, f"table {table.name!r} has no column(s) {', '.join(absent)}"
                    )
                )

    def _shape_message(self, conn: Connection, problem: str) -> str:
        return (
            f"outbox {problem}: create it with Outbox.create_table(), a migration "
            f"(docs/outbox.md), or this DDL:\n{self.ddl(conn.dialect)}"
        )
