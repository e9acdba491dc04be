"""``echomq dead list|retry|purge``: the dead-letter set.

Filters (``--name``, ``--group``) are applied here, page by page over the
dead set (which retention keeps bounded); the moves themselves are one
atomic script each (retryDead, purgeDead) over the selected ids.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import click

from echomq.cli.common import (
    CONTEXT_SETTINGS,
    DEFAULT_LANE_LABEL,
    echo_json,
    escape_text,
    fail,
    json_option,
    open_queue,
    output_width,
    parse_group,
    queue_options,
)
from echomq.cli.queues import note_if_unused
from echomq.job import Job, State
from echomq.keys import lane_of
from echomq.sync import SyncQueue

_PAGE = 500
#: length of a job id (``job_`` + 26 characters): the id column is never narrower.
ID_WIDTH = 30
HEADERS = ("id", "name", "lane", "tries", "died", "last error")
GAP = 2  # spaces between columns
#: the error column is not squeezed under this before other columns give way.
ERROR_MIN = 16


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
        if not jobs:
            note_if_unused(q)
    if as_json:
        echo_json([dead_dict(job) for job in jobs])
        return
    click.echo(f"dead jobs in queue {queue}, newest first:")
    for line in dead_lines(jobs, output_width()):
        click.echo(line)
    if not jobs:
        click.echo("no dead jobs match" if name or group is not None else "no dead jobs")


def _died(job: Job) -> str:
    return "–" if job.finished_at is None else f"{job.finished_at.astimezone():%m-%d %H:%M:%S}"


def _column_widths(total: int, rows: list[list[str]]) -> list[int]:
    """Widths of id, name, lane, tries, died, last error for lines ``total`` wide.

    The id keeps its full width whatever ``total`` is; the error takes what is
    left; name and lane shrink (to 6) before the error gets under ERROR_MIN,
    then the time of death is left out (width 0)."""
    natural = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(HEADERS)]
    widths = [ID_WIDTH, min(natural[1], 24), min(natural[2], 16), natural[3], natural[4], 0]
    room = total - GAP * (len(HEADERS) - 1)
    for shrink in (_narrow_name_and_lane, _without_died):
        if room - sum(widths) >= ERROR_MIN:
            break
        widths = shrink(widths)
    widths[5] = max(1, min(natural[5], room - sum(widths)))
    return widths


def _narrow_name_and_lane(widths: list[int]) -> list[int]:
    return [widths[0], min(widths[1], 6), min(widths[2], 6), *widths[3:]]


def _without_died(widths: list[int]) -> list[int]:
    return [*widths[:4], 0, widths[5]]


def _fit(text: str, width: int, right: bool = False) -> str:
    if len(text) > width:
        return text[: width - 1] + "…"
    return text.rjust(width) if right else text.ljust(width)


def dead_lines(jobs: list[Job], width: int) -> list[str]:
    """Dead jobs as table lines at most ``width`` wide (at least an id's) whose ids
    are never cut, at 80 columns or piped: the other columns give way (see
    _column_widths). Every text from the server is escaped (escape_text)."""
    rows = [
        [
            job.id,
            escape_text(job.name, markup=False),
            DEFAULT_LANE_LABEL if job.group is None else escape_text(job.group, markup=False),
            f"{job.attempts}/{job.max_attempts}",
            _died(job),
            escape_text(_first_line(job.error, width=1000), markup=False),
        ]
        for job in jobs
    ]
    widths = _column_widths(width, rows)
    shown = [i for i, w in enumerate(widths) if w]

    def line(cells: Sequence[str]) -> str:
        parts = (_fit(cells[i], widths[i], right=HEADERS[i] == "tries") for i in shown)
        return (" " * GAP).join(parts).rstrip()

    rule = (" " * GAP).join("─" * widths[i] for i in shown)
    return [line(HEADERS), rule, *(line(row) for row in rows)]


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


def _report(verb: str, wanted: list[str] | None, done: list[str], kept: Sequence[str] = ()) -> None:
    click.echo(f"{verb} {len(done)} dead job{'s' if len(done) != 1 else ''}")
    moved = set(done) | set(kept)
    missing = [job_id for job_id in wanted or () if job_id not in moved]
    if kept:
        click.echo(
            f"{len(kept)} stay dead: a dependency of theirs is dead and was not retried"
            f" with them, or is gone before they ran: {', '.join(kept[:10])}"
            + (" …" if len(kept) > 10 else "")
        )
    if missing:
        fail(f"not in the dead set: {', '.join(missing)}")
    if kept and wanted is not None:
        raise SystemExit(1)


def _kept_dead(q: SyncQueue, wanted: list[str] | None, done: list[str]) -> list[str]:
    """The given ids retry_dead left dead because of a dependency (still dead, with one)."""
    moved = set(done)
    kept = []
    for job_id in wanted or ():
        job = q.get(job_id) if job_id not in moved else None
        if job is not None and job.state is State.DEAD and job.dependencies:
            kept.append(job_id)
    return kept


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

    A job added with --depends-on goes back to blocked while a dependency has
    not completed (retry the dependency with it); it stays dead while a
    dependency is dead and not retried with it, or gone before it ran. Exits 1
    if a given JOB_ID is not dead or stays dead (the others are still moved).

    \b
    Examples:
      echomq dead retry job_01m8vfye84ec3a377q2197v469
      echomq dead retry --group acme
      echomq dead retry --all --limit 100
    """
    with open_queue(queue, url) as q:
        wanted = _targets(q, job_ids, DeadFilter(name, group), all_, limit)
        done = q.retry_dead(wanted, limit) if wanted != [] else []
        kept = _kept_dead(q, wanted, done)
    _report("retried", wanted, done, kept)


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
