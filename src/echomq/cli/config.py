"""``echomq config``: show, and with ``--set`` store, a queue's settings on the server.

Stored settings are obeyed by every client of the queue (docs/settings.md);
what nobody stored falls back to each client's own options, shown here as
the built-in defaults (what a client opened with no options uses).
"""

from __future__ import annotations

from typing import Any

import click

from echomq.cli.common import (
    CONTEXT_SETTINGS,
    echo_json,
    escape_text,
    fail,
    json_option,
    open_queue,
    plain_table,
    queue_options,
)
from echomq.errors import InvalidOption
from echomq.lanecontrols import format_rate, parse_rate_text
from echomq.options import Backoff, QueueOptions
from echomq.settings import NAMES, defaults

#: what ``--set k=none`` (or ``k=``) means: remove the stored value.
REMOVE = ("", "none")
#: the settings given in seconds on the command line.
SECONDS = frozenset({"keep_completed_age", "keep_dead_age"})


def _number(name: str, text: str, kind: type[int] | type[float]) -> Any:
    try:
        return kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        fail(f"--set {name}={text!r}: expected {what}")


def parse_setting(item: str) -> tuple[str, Any]:
    """One ``--set k=v``: the setting's name and its value (None: remove it)."""
    name, sep, text = item.partition("=")
    name, text = name.strip(), text.strip()
    if not sep or name not in NAMES:
        fail(f"--set {item!r}: expected NAME=VALUE with NAME one of {', '.join(NAMES)}")
    if text.lower() in REMOVE:
        return name, None
    if name in SECONDS:
        return name, _number(name, text, float)
    if name == "backoff":  # BASE[,FACTOR[,CAP[,JITTER]]], seconds and plain numbers
        parts = [_number(name, part, float) for part in text.split(",")]
        if len(parts) > 4:
            fail(f"--set backoff={text!r}: expected BASE[,FACTOR[,CAP[,JITTER]]]")
        return name, Backoff(*parts)
    if name == "metrics":  # on or off
        if text.lower() not in ("1", "0", "true", "false", "on", "off"):
            fail(f"--set metrics={text!r}: expected 1 or 0 (true/false, on/off)")
        return name, text.lower() in ("1", "true", "on")
    if name == "rate":  # MAX/WINDOW, as echomq lane --rate
        try:
            return name, parse_rate_text(text)
        except InvalidOption as exc:
            fail(f"--set {exc}")
    return name, _number(name, text, int)


def _plain(value: Any) -> Any:
    """A setting as JSON: a backoff as its fields, a rate as [max, seconds]."""
    if isinstance(value, Backoff):
        return dict(base=value.base, factor=value.factor, cap=value.cap, jitter=value.jitter)
    if isinstance(value, tuple):
        return list(value)
    return value


def _text(name: str, value: Any) -> str:
    if value is None:
        return "off"
    if isinstance(value, Backoff):
        return (
            f"base {value.base:g}s · factor {value.factor:g} · cap {value.cap:g}s · "
            f"jitter {value.jitter:g}"
        )
    if name == "rate":
        return format_rate(value)
    if name in SECONDS:
        return f"{value:g}s"
    return str(value)


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("queue_name", metavar="[QUEUE]", required=False)
@click.option(
    "--set",
    "changes",
    multiple=True,
    metavar="NAME=VALUE",
    help="Store a setting (repeatable; VALUE none removes it). backoff=BASE[,FACTOR[,CAP"
    "[,JITTER]]], rate=MAX/WINDOW (100/1s, 5/200ms), ages in seconds.",
)
@json_option
@queue_options
def config(
    queue_name: str | None, changes: tuple[str, ...], as_json: bool, queue: str, url: str | None
) -> None:
    """Show a queue's settings stored on the server; --set stores them.

    Every producer, worker and maintenance run of the queue obeys the stored
    settings; a setting nobody stored falls back to each client's own option
    (shown as "default": the built-in one). QUEUE defaults to -q.

    \b
    Examples:
      echomq config emails
      echomq config emails --set keep_completed=100 --set backoff=5,2,600
      echomq config emails --set max_attempts=none --json
    """
    name = queue_name or queue
    updates = dict(parse_setting(item) for item in changes)
    with open_queue(name, url) as q:
        stored = q.configure(**updates) if updates else q.settings()
    fallback = defaults(QueueOptions())
    if as_json:
        echo_json(
            {
                "queue": name,
                "stored": {k: _plain(v) for k, v in stored.items()},
                "effective": {k: _plain(stored.get(k, fallback[k])) for k in NAMES},
            }
        )
        return
    rows = []
    for key in NAMES:
        source = "stored" if key in stored else "default"
        rows.append((key, _text(key, stored.get(key, fallback[key])), source))
    click.echo(f"queue {escape_text(name, markup=False)}: settings on the server")
    click.echo("")
    for line in plain_table(("setting", "value", "from"), rows):
        click.echo(line)
