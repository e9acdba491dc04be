"""``echomq events``: print a queue's events (docs/lifecycle.md "Events").

Without ``--follow`` it prints the events the stream still holds (after
``--after`` if given) and exits; with ``--follow`` it keeps printing them as
they happen until Ctrl-C (from now on, or after ``--after``). One line per
event, or one JSON object per line with ``--json``. Everything read from the
server is escaped before it is printed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import click

from echomq.cli.common import (
    CONTEXT_SETTINGS,
    escape_text,
    json_option,
    lane_label,
    open_queue,
    queue_options,
    when,
)
from echomq.cli.signals import stoppable
from echomq.events import MISSED, Event
from echomq.sync import SyncQueue

#: the cursor before the first event a stream ever holds.
START = "0"


def _retained(q: SyncQueue, after: str) -> Iterator[Event]:
    """The events the stream holds after ``after``, page by page, then stop."""
    cursor, first = after, True
    while True:
        page = q.read_events(cursor)
        # from the start, events trimmed long ago are no news
        yield from page.with_notice(cursor) if (first and after != START) else page.events
        first = False
        if not page.full:
            return
        cursor = page.cursor


def _details(event: Event) -> str:
    parts = []
    if event.outcome is not None:
        parts.append(f"outcome={event.outcome}")
    if event.attempt is not None:
        parts.append(f"attempt={event.attempt}")
    if event.stalls is not None:
        parts.append(f"stalls={event.stalls}")
    if event.result_size is not None:
        parts.append(f"result={event.result_size}B")
    if event.next_run is not None:
        parts.append(f"next_run={when(event.next_run)}")
    if event.progress is not None:
        parts.append("progress=" + json.dumps(event.progress, ensure_ascii=False))
    if event.error is not None:
        parts.append(f"error={event.error!r}")
    return " ".join(parts)


def event_line(event: Event) -> str:
    """One event as a line of text (escaped: it goes straight to the terminal)."""
    if event.kind == MISSED:
        gone = event.skipped
        return f"{event.id}  … {gone} events after this one were trimmed before they were read"
    lane = lane_label(event.group, markup=False)
    job = event.job_id or "–"  # an event of a lane (unthrottled) names no job
    line = f"{event.id}  {when(event.at)}  {event.kind:<11}  {job}  {lane}"
    details = _details(event)
    return escape_text(f"{line}  {details}" if details else line, markup=False)


def json_line(event: Event) -> str:
    text = json.dumps(event.to_dict(), ensure_ascii=False, separators=(",", ":"))
    return escape_text(text, json_text=True)


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option(
    "--follow", "-f", is_flag=True, help="Keep printing events as they happen (Ctrl-C ends)."
)
@click.option(
    "--after",
    metavar="ID",
    help="Start after this event id (default: the oldest event kept; with --follow, from now).",
)
@json_option
@queue_options
def events(follow: bool, after: str | None, as_json: bool, queue: str, url: str | None) -> None:
    """Print the queue's events: added, claimed, progress, completed, retrying, dead, ….

    \b
    Examples:
      echomq events -q emails
      echomq events -q emails --follow --json
      echomq events -q emails --after 1042
    """
    show = json_line if as_json else event_line
    with open_queue(queue, url) as q:
        stream = q.events(after) if follow else _retained(q, after or START)
        try:
            with stoppable():  # SIGINT/SIGTERM end it even if started with them ignored
                for event in stream:
                    click.echo(show(event))
        except KeyboardInterrupt:
            pass
