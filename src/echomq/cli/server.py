"""``echomq server status|start|stop|logs``: the embedded Valkey of this user.

The embedded server lives in ``$ECHOMQ_HOME`` (else the XDG data directory);
see :mod:`echomq.embedded`. These commands never touch a server named by
``--url`` or ``ECHOMQ_URL``: status only notes that queues use that one.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import click
from rich.table import Table

from echomq.cli.common import (
    CONTEXT_SETTINGS,
    console,
    echo_json,
    escape_text,
    fail,
    json_option,
)
from echomq.cli.signals import stoppable
from echomq.embedded import EmbeddedServer, ServerStatus
from echomq.urls import URL_ENV, redact_url


def uptime_text(seconds: int | None) -> str:
    """``3d 4h 05m 06s`` style uptime."""
    if seconds is None:
        return "–"
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{hours}h {minutes:02d}m {secs:02d}s" if hours or days else f"{minutes}m {secs:02d}s"
    return f"{days}d {text}" if days else text


def _status_table(status: ServerStatus) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    state = (
        "[green]running[/]" if status["running"] else "[yellow]not running[/] (starts on first use)"
    )
    rows = [
        ("state", state),
        ("pid", str(status["pid"] or "–")),
        ("version", status["version"] or "–"),
        ("memory", status["used_memory_human"] or "–"),
        ("uptime", uptime_text(status["uptime_seconds"])),
        ("url", status["url"]),
        ("data dir", status["data_dir"]),
        ("log", status["log"]),
    ]
    for label, value in rows:
        # paths and versions are data, never markup (state is the only styled cell)
        table.add_row(label, value if label == "state" else escape_text(value))
    return table


@click.group(context_settings=CONTEXT_SETTINGS)
def server() -> None:
    """Manage the embedded Valkey (status, start, stop, logs).

    echomq starts it when no --url and no ECHOMQ_URL is given.

    Its data directory is $ECHOMQ_HOME, else $XDG_DATA_HOME/echomq, else
    ~/.local/share/echomq.

    \b
    Examples:
      echomq server status
      echomq server logs -n 100
      echomq server stop
    """


@server.command(context_settings=CONTEXT_SETTINGS)
@json_option
def status(as_json: bool) -> None:
    """Where the embedded server lives, its pid, memory and uptime.

    \b
    Example:
      echomq server status --json | jq .pid
    """
    info = EmbeddedServer().status()
    if as_json:
        echo_json(dict(info))
        return
    console.print(_status_table(info))
    if os.environ.get(URL_ENV):
        url = redact_url(os.environ[URL_ENV])
        console.print(f"note: {URL_ENV} is set, so queues use {url} instead", markup=False)


@server.command(context_settings=CONTEXT_SETTINGS)
def start() -> None:
    """Start the embedded server if it is not running (commands do this on first use).

    \b
    Example:
      echomq server start
    """
    embedded = EmbeddedServer()
    already = embedded.is_running()
    url = embedded.ensure_running()
    click.echo(f"{'already running' if already else 'started'}: {url}")


@server.command(context_settings=CONTEXT_SETTINGS)
def stop() -> None:
    """Shut the embedded server down (its AOF keeps the jobs for the next start).

    \b
    Example:
      echomq server stop
    """
    embedded = EmbeddedServer()
    if embedded.stop():
        click.echo(f"stopped the embedded Valkey in {embedded.data_dir}")
    else:
        click.echo(f"the embedded Valkey in {embedded.data_dir} was not running")


def _tail(path: Path, lines: int) -> list[str]:
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()[-lines:] if lines else []
    except FileNotFoundError:
        fail(f"no log yet at {path}: the embedded server has never started there")


def _follow(path: Path) -> None:
    """Print lines appended to ``path`` until Ctrl-C."""
    try:
        with stoppable(), path.open(encoding="utf-8", errors="replace") as f:
            f.seek(0, os.SEEK_END)
            while True:
                line = f.readline()
                if line:
                    click.echo(escape_text(line.rstrip("\n"), markup=False))
                else:
                    time.sleep(0.2)
    except KeyboardInterrupt:
        return


@server.command(context_settings=CONTEXT_SETTINGS)
@click.option(
    "--lines",
    "-n",
    type=click.IntRange(min=0),
    default=50,
    show_default=True,
    help="How many of the last lines to print.",
)
@click.option("--follow", "-f", is_flag=True, help="Keep printing new lines until Ctrl-C.")
def logs(lines: int, follow: bool) -> None:
    """Print the end of the embedded server's log.

    \b
    Examples:
      echomq server logs
      echomq server logs -n 0 --follow
    """
    path = EmbeddedServer().log_path
    for line in _tail(path, lines):
        click.echo(escape_text(line, markup=False))
    if follow:
        _follow(path)
