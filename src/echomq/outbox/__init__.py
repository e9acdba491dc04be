"""Enqueue inside the application's database transaction (docs/outbox.md).

``Outbox.add`` writes a job as one row in the caller's SQLAlchemy
transaction; a :class:`Relay` (``echomq relay``, or ``Worker(...,
relay=ob)``) turns each committed row into exactly one job, in row order
per queue. A rolled-back row never becomes a job. PostgreSQL (psycopg 3)
and SQLite; needs the ``echomq[sqlalchemy]`` extra (``import echomq`` never
imports it).
"""

from __future__ import annotations

from echomq.outbox.relay import Relay
from echomq.outbox.rows import row_key
from echomq.outbox.table import DEFAULT_TABLE, OutboxTables
from echomq.outbox.writer import Outbox

__all__ = ["DEFAULT_TABLE", "Outbox", "OutboxTables", "Relay", "row_key"]
