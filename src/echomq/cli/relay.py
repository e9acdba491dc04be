"""``echomq relay --db URL``: turn committed outbox rows into jobs (docs/outbox.md)."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from types import FrameType
from typing import Any

import click

from echomq.cli.common import CONTEXT_SETTINGS, fail, url_option
from echomq.urls import redact_url

LOG_FORMAT = "%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s"
DB_ENV = "ECHOMQ_DB"
EXTRA = "pip install 'echomq[sqlalchemy]'"


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option(
    "--db",
    required=True,
    envvar=DB_ENV,
    show_envvar=True,
    metavar="URL",
    help="The outbox's database (postgresql+psycopg://…, sqlite:///…).",
)
@click.option(
    "--queue",
    "-q",
    "queues",
    multiple=True,
    metavar="NAME",
    help="Relay only this queue's rows (repeat for more); default: every queue.",
)
@click.option("--table", default="echomq_outbox", show_default=True, help="The outbox table.")
@click.option(
    "--batch", type=click.IntRange(1, 10_000), default=500, show_default=True, help="Rows per add."
)
@click.option(
    "--poll",
    type=click.FloatRange(0.001, 3600),
    help="Seconds between looks when nothing woke it (default 0.2 s; 5 s with LISTEN).",
)
@click.option("--once", is_flag=True, help="Relay the rows committed now, then exit.")
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
)
@url_option
def relay(
    db: str,
    queues: tuple[str, ...],
    table: str,
    batch: int,
    poll: float | None,
    once: bool,
    log_level: str,
    url: str | None,
) -> None:
    """Turn committed outbox rows into jobs, exactly once, in row order per queue.

    On PostgreSQL it wakes on LISTEN/NOTIFY (several relays may run); on SQLite
    it polls (one relay at a time). Runs until Ctrl-C or SIGTERM.

    \b
    Examples:
      echomq relay --db postgresql+psycopg://app@db/app
      echomq relay --db sqlite:///app.db --url redis://10.0.0.5:6379/0 -q mail
    """
    logging.basicConfig(level=log_level.upper(), format=LOG_FORMAT, stream=sys.stderr)
    try:
        import sqlalchemy

        from echomq.outbox import Outbox, Relay
    except ImportError as exc:
        fail(f"the relay needs SQLAlchemy and psycopg ({exc.name} is missing): {EXTRA}")
    try:
        outbox = Outbox(db, table)
        relayer = Relay(outbox, url, queues=queues or None, batch=batch, poll=poll)
    except (sqlalchemy.exc.ArgumentError, ImportError) as exc:
        fail(f"--db {redact_url(db)!r}: {redact_url(str(exc))}")
    try:
        if once:
            try:
                outbox.check_table()
                moved = relayer.relay_once()
            except sqlalchemy.exc.DBAPIError as exc:
                fail(f"database error: {redact_url(str(exc.orig or exc)).splitlines()[0]}")
            click.echo(f"relayed {relayer.relayed} row(s), {relayer.dead} dead ({moved} in all)")
            return
        click.echo(
            f"relaying {table} of {redact_url(db)} to {redact_url(url or 'the embedded Valkey')}"
            f" ({', '.join(queues) if queues else 'every queue'}); Ctrl-C stops",
            err=True,
        )
        _run_until_signal(relayer)
        click.echo(
            f"relay stopped: {relayer.relayed} row(s) relayed, {relayer.dead} dead", err=True
        )
    finally:
        relayer.close()
        outbox.engine.dispose()


def _run_until_signal(relayer: Any) -> None:
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        relayer.run(stop)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
