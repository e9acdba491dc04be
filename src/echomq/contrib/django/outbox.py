"""Writing rows through Django's connection, and the relay's view of Django's database.

``write_row`` checks the job with echomq's own checks (echomq.outbox.rows)
and inserts it with the ORM on the current connection; on PostgreSQL it also
sends the NOTIFY that wakes the relays at commit. ``outbox_for`` makes the
SQLAlchemy ``Outbox`` the relay reads from, from ``settings.DATABASES``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connections

from echomq.errors import OutboxError
from echomq.outbox.rows import RowChecker
from echomq.outbox.table import DEFAULT_TABLE

_checker = RowChecker()


def echomq_settings() -> dict[str, Any]:
    configured = getattr(settings, "ECHOMQ", {}) or {}
    if not isinstance(configured, dict):
        raise OutboxError(f"settings.ECHOMQ must be a dict, not {type(configured).__name__}")
    unknown = sorted(set(configured) - {"URL", "QUEUES", "POLL", "DATABASE"})
    if unknown:
        raise OutboxError(
            f"settings.ECHOMQ has unknown key(s) {unknown}; allowed: DATABASE, POLL, QUEUES, URL"
        )
    return configured


def write_row(queue: str, name: str, data: Any, using: str, options: dict[str, Any]) -> int:
    from echomq.contrib.django.models import OutboxRow

    values = _checker.check(queue, name, data, options)
    row = OutboxRow.objects.using(using).create(
        queue=values.queue, name=values.name, data=values.data, options=values.options
    )
    connection = connections[using]
    if connection.vendor == "postgresql":  # delivered at commit, dropped on rollback
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [DEFAULT_TABLE, queue])
    return int(row.id)


def database_url(alias: str) -> Any:
    """The SQLAlchemy URL of Django's database ``alias`` (PostgreSQL or SQLite)."""
    import sqlalchemy as sa

    db = settings.DATABASES[alias]
    engine = db["ENGINE"]
    if engine.endswith("sqlite3"):
        return sa.URL.create("sqlite", database=str(db["NAME"]))
    if "postgresql" in engine:
        port = db.get("PORT")
        return sa.URL.create(
            "postgresql+psycopg",
            username=db.get("USER") or None,
            password=db.get("PASSWORD") or None,
            host=db.get("HOST") or None,
            port=int(port) if port else None,
            database=db.get("NAME") or None,
        )
    raise OutboxError(f"the outbox supports PostgreSQL and SQLite, not {engine!r}")


def outbox_for(alias: str | None = None) -> Any:
    """The echomq.outbox.Outbox on Django's database (settings.ECHOMQ's DATABASE,
    else ``default``)."""
    from echomq.outbox import Outbox

    return Outbox(database_url(alias or echomq_settings().get("DATABASE", "default")))
