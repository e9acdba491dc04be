"""``echomq batch list|status|cancel``: the queue's batches, a batch's progress,
and cancelling it.

The list pages the queue's batches newest first (``Queue.batches``: bounded
work per call); a batch's counts are one read (``Queue.batch_status``); a
cancel works through its children in bounded steps (``Queue.cancel_batch``).
Errors (an unknown batch, a malformed id or cursor) are one line, exit status 1.
"""

from __future__ import annotations

import dataclasses

import click

from echomq.batches import MAX_BATCH_PAGE, BatchStatus
from echomq.cli.common import (
    CONTEXT_SETTINGS,
    EchoGroup,
    echo_json,
    escape_text,
    gather_pages,
    json_option,
    open_queue,
    percent,
    queue_options,
    short_when,
    when,
)

#: the width of the progress bar, in characters (the list's is shorter).
BAR = 30
LIST_BAR = 12


def progress_bar(status: BatchStatus, width: int = BAR) -> str:
    """``[#####-----] 12/40`` (finished of total)."""
    done = round(width * status.finished / status.total) if status.total else width
    return f"[{'#' * done}{'-' * (width - done)}] {status.finished}/{status.total}"


def fired_count(status: BatchStatus) -> str:
    """``1/2 fired``: the callbacks that fired of those given."""
    if not status.callbacks:
        return "no callbacks"
    fired = sum(1 for job_id in status.callbacks.values() if job_id)
    return f"{fired}/{len(status.callbacks)} fired"


def list_line(status: BatchStatus) -> str:
    return (
        f"{status.id}  {short_when(status.created_at)}  {status.state:<9}  "
        f"{progress_bar(status, LIST_BAR)}  waiting {status.waiting}  active {status.active}  "
        f"completed {status.completed}  dead {status.dead}  cancelled {status.cancelled}  "
        f"{fired_count(status)}"
    )


def status_lines(status: BatchStatus) -> list[str]:
    fired = ", ".join(
        f"{name} {'fired: ' + job_id if job_id else 'not fired'}"
        for name, job_id in status.callbacks.items()
    )
    return [
        f"batch {status.id}: {status.state}" + ("" if status.closed else " (open: not closed)"),
        f"  {progress_bar(status)} finished ({percent(status.finished, status.total)})",
        f"  waiting {status.waiting}  active {status.active}  completed {status.completed}"
        f"  dead {status.dead}  cancelled {status.cancelled}",
        f"  created {when(status.created_at)}",
        f"  callbacks: {fired or 'none'}",
    ]


@click.group("batch", cls=EchoGroup, context_settings=CONTEXT_SETTINGS)
def batch() -> None:
    """A batch's progress, or cancel it (batches: docs/lifecycle.md "Batches").

    \b
    Examples:
      echomq batch list
      echomq batch status bat_01j9…
      echomq batch status bat_01j9… --json
      echomq batch cancel bat_01j9…
    """


@batch.command("list", context_settings=CONTEXT_SETTINGS)
@click.option(
    "--count",
    "-n",
    type=click.IntRange(1, MAX_BATCH_PAGE),
    default=20,
    show_default=True,
    help="Most batches to show.",
)
@click.option("--cursor", metavar="CURSOR", help="Go on after a page (its 'more:' line).")
@json_option
@queue_options
def list_batches(
    count: int, cursor: str | None, as_json: bool, queue: str, url: str | None
) -> None:
    """The queue's batches, newest first: state, progress, children by state.

    \b
    Examples:
      echomq batch list
      echomq batch list --queue mail --count 50 --json
    """
    with open_queue(queue, url) as q:

        def fetch(at: str | None, left: int) -> tuple[list[BatchStatus], str | None]:
            page = q.batches(cursor=at, count=left)
            return page.batches, page.cursor

        found, next_cursor = gather_pages(fetch, cursor, count)
    if as_json:
        rows = [{**dataclasses.asdict(s), "finished": s.finished} for s in found]
        echo_json({"batches": rows, "cursor": next_cursor})
        return
    for status in found:
        click.echo(escape_text(list_line(status), markup=False))
    if not found:
        click.echo(f"no batch in queue {escape_text(queue, markup=False)}")
    if next_cursor is not None:
        click.echo(f"more: --cursor '{next_cursor}'")


@batch.command("status", context_settings=CONTEXT_SETTINGS)
@click.argument("batch_id")
@json_option
@queue_options
def status(batch_id: str, as_json: bool, queue: str, url: str | None) -> None:
    """Counts by state, the state, and which callbacks fired.

    \b
    Examples:
      echomq batch status bat_01j9…
      echomq batch status bat_01j9… --queue mail --json
    """
    with open_queue(queue, url) as q:
        found = q.batch_status(batch_id)
    if as_json:
        echo_json({**dataclasses.asdict(found), "finished": found.finished})
        return
    for line in status_lines(found):
        click.echo(escape_text(line, markup=False))


@batch.command("cancel", context_settings=CONTEXT_SETTINGS)
@click.argument("batch_id")
@queue_options
def cancel(batch_id: str, queue: str, url: str | None) -> None:
    """Children not started end cancelled, running ones are stopped; no callback fires.

    \b
    Examples:
      echomq batch cancel bat_01j9…
      echomq batch cancel bat_01j9… --queue mail
    """
    with open_queue(queue, url) as q:
        done = q.cancel_batch(batch_id)
        found = q.batch_status(batch_id)
    shown = escape_text(batch_id, markup=False)
    if not done:
        click.echo(f"batch {shown} had {found.state} already: nothing cancelled")
        return
    click.echo(
        f"batch {shown} cancelled: {found.cancelled} cancelled before they ran, "
        f"{found.dead} dead, {found.completed} completed before the cancel"
    )
