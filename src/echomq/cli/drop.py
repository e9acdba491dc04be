"""``echomq drop QUEUE``: delete a queue for good (asks first unless --yes)."""

from __future__ import annotations

import click

from echomq.cli.common import CONTEXT_SETTINGS, escape_text, open_queue, url_option


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("queue", metavar="QUEUE")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@url_option
def drop(queue: str, yes: bool, url: str | None) -> None:
    """Delete queue QUEUE for good: its jobs, lanes, schedules, settings and events.

    Adds to it are refused while it runs (page by page, one script call per
    page); stop its workers first. Asks for confirmation unless --yes.

    \b
    Examples:
      echomq drop scratch
      echomq drop old-mail --yes
    """
    shown = escape_text(queue, markup=False)
    with open_queue(queue, url) as q:
        counts = q.stats().counts
        total = sum(counts.values())
        if not yes:
            held = f"{total} job{'s' if total != 1 else ''}"
            if counts.get("active"):
                held += f", {counts['active']} running now: stop its workers first"
            click.confirm(f"Delete queue {shown} ({held}) for good?", abort=True)
        q.drop()
    click.echo(f"dropped queue {shown} ({total} job{'s' if total != 1 else ''})")
