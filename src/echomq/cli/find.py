"""``echomq find key=value …``: the jobs that carry the given tags, newest first."""

from __future__ import annotations

import click

from echomq.cli.common import (
    CONTEXT_SETTINGS,
    echo_json,
    escape_text,
    fail,
    gather_pages,
    json_option,
    open_queue,
    queue_options,
    short_when,
)
from echomq.cli.jobs import job_dict
from echomq.errors import EchoMQError
from echomq.job import LISTED_STATES, Job
from echomq.tags import MAX_FIND_COUNT, parse_tag_args


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("tags", nargs=-1, required=True, metavar="KEY=VALUE...")
@click.option("--state", "-s", type=click.Choice(LISTED_STATES), help="Only jobs in this state.")
@click.option("--name", "-N", metavar="NAME", help="Only jobs with this name.")
@click.option(
    "--count",
    "-n",
    type=click.IntRange(1, MAX_FIND_COUNT),
    default=50,
    show_default=True,
    help="Most jobs to show.",
)
@click.option("--cursor", metavar="CURSOR", help="Go on after a page (its 'more:' line).")
@json_option
@queue_options
def find(
    tags: tuple[str, ...],
    state: str | None,
    name: str | None,
    count: int,
    cursor: str | None,
    as_json: bool,
    queue: str,
    url: str | None,
) -> None:
    """The jobs that carry every tag given, newest first.

    \b
    Examples:
      echomq find customer=42
      echomq find customer=42 region=eu --state dead --json
    """
    try:
        wanted = parse_tag_args(list(tags))
    except EchoMQError as exc:
        fail(str(exc))
    with open_queue(queue, url) as q:

        def fetch(at: str | None, left: int) -> tuple[list[Job], str | None]:
            page = q.find(wanted, state=state, name=name, cursor=at, count=left)
            return page.jobs, page.cursor

        jobs, next_cursor = gather_pages(fetch, cursor, count)
    if as_json:
        echo_json({"jobs": [job_dict(job, queue) for job in jobs], "cursor": next_cursor})
        return
    for job in jobs:
        click.echo(
            f"{job.id}  {short_when(job.created_at)}  {job.state!s:<9}  "
            f"{escape_text(job.name, markup=False)}"
        )
    if not jobs:
        click.echo("no job carries " + escape_text(" ".join(tags), markup=False))
    if next_cursor is not None:
        click.echo(f"more: --cursor '{next_cursor}'")
