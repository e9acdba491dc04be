"""``echomq batch status|cancel ID``: a batch's progress, and cancelling it.

A batch's counts are one read (``Queue.batch_status``); a cancel works through
its children in bounded steps (``Queue.cancel_batch``). Errors (an unknown
batch, a malformed id) are one line, exit status 1.
"""

from __future__ import annotations

import dataclasses

import click

from echomq.batches import BatchStatus
from echomq.cli.common import (
    CONTEXT_SETTINGS,
    EchoGroup,
    echo_json,
    escape_text,
    json_option,
    open_queue,
    percent,
    queue_options,
    when,
)

#: the width of the progress bar, in characters.
BAR = 30


def progress_bar(status: BatchStatus) -> str:
    """``[#####-----] 12/40`` (finished of total)."""
    done = round(BAR * status.finished / status.total) if status.total else BAR
    return f"[{'#' * done}{'-' * (BAR - done)}] {status.finished}/{status.total}"


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
      echomq batch status bat_01j9…
      echomq batch status bat_01j9… --json
      echomq batch cancel bat_01j9…
    """


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
