"""``echomq dead list|retry|purge``: the dead-letter set.

Filters (``--name``, ``--group``) are applied here, page by page over the
dead set (which retention keeps bounded); the moves themselves are one
atomic script each (retryDead, purgeDead) over the selected ids.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import click
from rich import box
from rich.table import Table

from echomq.cli.common import (
    CONTEXT_SETTINGS,
    DEFAULT_LANE_LABEL,
    console,
    echo_json,
    fail,
    json_option,
    lane_label,
    open_queue,
    parse_group,
    queue_options,
    short_when,
)
from echomq.job import Job
from echomq.keys import lane_of
from echomq.sync import SyncQueue

_PAGE = 500


class DeadFilter:
    """Which dead jobs a command acts on: by job name and/or lane."""

    def __init__(self, name: str | None, group: str | None) -> None:
        self.name = name
        self.by_group = group is not None
        self.group = parse_group(group) if group is not None else None
        if self.group is not None:
            lane_of(self.group)  # refuse a bad group name before reading anything

    @property
    def active(self) -> bool:
        return self.name is not None or self.by_group

    def matches(self, job: Job) -> bool:
        if self.name is not None and job.name != self.name:
            return False
        return not self.by_group or job.group == self.group


def select(q: SyncQueue, flt: DeadFilter, limit: int) -> Iterator[Job]:
    """Dead jobs matching ``flt``, newest first, at most ``limit``."""
    found, offset = 0, 0
    while found < limit:
        page = q.dead(offset=offset, count=_PAGE)
        for job in page:
            if flt.matches(job):
                yield job
                found += 1
                if found >= limit:
                    return
        if len(page) < _PAGE:
            return
        offset += _PAGE


def filter_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option(
        "--group",
        "-g",
        metavar="GROUP",
        help=f'Only jobs of this lane ("" or {DEFAULT_LANE_LABEL}: default).',
    )(func)
    return click.option("--name", "-N", metavar="NAME", help="Only jobs with this name.")(func)


def _first_line(text: str | None, width: int = 60) -> str:
    line = (text or "").strip().splitlines()[0] if text and text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def dead_dict(job: Job) -> dict[str, Any]:
    return {
        "id": job.id,
        "name": job.name,
        "group": job.group,
        "priority": job.priority,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "died_at": job.finished_at,
        "error": job.error,
        "data": job.data,
    }


@click.group(context_settings=CONTEXT_SETTINGS)
def dead() -> None:
    """List, retry or purge dead jobs.

    A job is dead when it ran out of attempts or stalled too often.

    \b
    Examples:
      echomq dead list --group acme
      echomq dead retry --name send
      echomq dead purge --all --yes
    """


@dead.command("list", context_settings=CONTEXT_SETTINGS)
@filter_options
@click.option(
    "--limit",
    "-l",
    type=click.IntRange(1, 100_000),
    default=20,
    show_default=True,
    help="Most jobs to show.",
)
@json_option
@queue_options
def list_dead(
    name: str | None, group: str | None, limit: int, as_json: bool, queue: str, url: str | None
) -> None:
    """Dead jobs, newest first, with their last error.

    \b
    Examples:
      echomq dead list
      echomq dead list --name send --group acme --limit 100 --json
    """
    with open_queue(queue, url) as q:
        jobs = list(select(q, DeadFilter(name, group), limit))
    if as_json:
        echo_json([dead_dict(job) for job in jobs])
        return
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("id", no_wrap=True)
    for column in ("name", "lane", "attempts", "died"):
        table.add_column(column, no_wrap=True)
    table.add_column("last error", overflow="ellipsis", no_wrap=True)
    for job in jobs:
        table.add_row(
            job.id,
            job.name,
            lane_label(job.group),
            f"{job.attempts}/{job.max_attempts}",
            short_when(job.finished_at),
            _first_line(job.error),
        )
    console.print(f"dead jobs in queue {queue}, newest first:", markup=False)
    console.print(table)
    if not jobs:
        console.print("no dead jobs match" if name or group is not None else "no dead jobs")


def _targets(
    q: SyncQueue, job_ids: tuple[str, ...], flt: DeadFilter, all_: bool, limit: int
) -> list[str] | None:
    """The ids to act on; None means "the oldest ``limit``" (left to the server script)."""
    if job_ids and (flt.active or all_):
        raise click.UsageError("give job ids, or filters / --all, not both")
    if job_ids:
        return list(job_ids)
    if flt.active:
        return [job.id for job in select(q, flt, limit)]
    if all_:
        return None
    raise click.UsageError("say which jobs: job ids, --name/--group filters, or --all")


def selection_options(verb: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The job selection of retry and purge: ids, filters, --all and --limit."""

    def apply(command: Callable[..., Any]) -> Callable[..., Any]:
        command = click.option(
            "--limit",
            "-l",
            type=click.IntRange(1, 100_000),
            default=1000,
            show_default=True,
            help=f"Most jobs to {verb}.",
        )(command)
        command = click.option(
            "--all", "all_", is_flag=True, help="All dead jobs (up to --limit, oldest first)."
        )(command)
        command = filter_options(command)
        return click.argument("job_ids", nargs=-1, metavar="[JOB_ID]...")(command)

    return apply


def _report(verb: str, wanted: list[str] | None, done: list[str]) -> None:
    click.echo(f"{verb} {len(done)} dead job{'s' if len(done) != 1 else ''}")
    missing = [job_id for job_id in wanted or () if job_id not in set(done)]
    if missing:
        fail(f"not in the dead set: {', '.join(missing)}")


@dead.command(context_settings=CONTEXT_SETTINGS)
@selection_options("move")
@queue_options
def retry(
    job_ids: tuple[str, ...],
    name: str | None,
    group: str | None,
    all_: bool,
    limit: int,
    queue: str,
    url: str | None,
) -> None:
    """Move dead jobs back to waiting with fresh attempts.

    Exits 1 if a given JOB_ID is not dead (the others are still moved).

    \b
    Examples:
      echomq dead retry job_01m8vfye84ec3a377q2197v469
      echomq dead retry --group acme
      echomq dead retry --all --limit 100
    """
    with open_queue(queue, url) as q:
        wanted = _targets(q, job_ids, DeadFilter(name, group), all_, limit)
        done = q.retry_dead(wanted, limit) if wanted != [] else []
    _report("retried", wanted, done)


@dead.command(context_settings=CONTEXT_SETTINGS)
@selection_options("delete")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@queue_options
def purge(
    job_ids: tuple[str, ...],
    name: str | None,
    group: str | None,
    all_: bool,
    limit: int,
    yes: bool,
    queue: str,
    url: str | None,
) -> None:
    """Delete dead jobs for good.

    Without JOB_IDs it asks for confirmation unless --yes. Exits 1 if a given
    JOB_ID is not dead (the others are still deleted).

    \b
    Examples:
      echomq dead purge job_01m8vfye84ec3a377q2197v469
      echomq dead purge --name send --yes
      echomq dead purge --all --yes
    """
    with open_queue(queue, url) as q:
        wanted = _targets(q, job_ids, DeadFilter(name, group), all_, limit)
        if not job_ids and not yes:
            what = f"{len(wanted)} dead jobs" if wanted is not None else f"up to {limit} dead jobs"
            click.confirm(f"Delete {what} from queue {queue} for good?", abort=True)
        done = q.purge_dead(wanted, limit) if wanted != [] else []
    _report("purged", wanted, done)
