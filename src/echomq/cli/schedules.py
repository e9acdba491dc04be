"""``echomq schedules [list|add|remove|pause|resume]``: the queue's schedules.

The schedules live on the server (Queue.schedule); workers fire them. Every
text read from the server is escaped before it is printed (escape_text).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from echomq.cli.common import (
    CONTEXT_SETTINGS,
    echo_json,
    escape_text,
    fail,
    json_option,
    lane_label,
    open_queue,
    parse_group,
    parse_json,
    plain_table,
    queue_options,
)
from echomq.schedules import ScheduleInfo, zoned_time

HEADERS = ("id", "when", "job", "lane", "next fire", "last fire", "last outcome")


def _when(s: ScheduleInfo) -> str:
    if s.cron is not None:
        return s.cron if s.tz == "UTC" else f"{s.cron} ({s.tz})"
    return f"every {s.every:g}s"


def _outcome(s: ScheduleInfo) -> str:
    text = s.last_outcome or "–"
    if s.skipped:
        text += f" ({s.skipped} skipped, last: {s.last_skip})"
    return text


def schedule_lines(schedules: list[ScheduleInfo]) -> list[str]:
    """The schedules as a table (every server text escaped)."""
    rows = [
        (
            escape_text(s.id, markup=False),
            escape_text(_when(s), markup=False),
            escape_text(s.name, markup=False),
            lane_label(s.group, markup=False),
            "paused" if s.paused else (s.in_zone(s.next_fire) or "–"),
            s.in_zone(s.last_fire) or "–",
            escape_text(_outcome(s), markup=False),
        )
        for s in schedules
    ]
    return plain_table(HEADERS, rows)


@click.group("schedules", invoke_without_command=True, context_settings=CONTEXT_SETTINGS)
@json_option
@queue_options
@click.pass_context
def schedules(ctx: click.Context, as_json: bool, queue: str, url: str | None) -> None:
    """List, add or remove the queue's schedules (jobs added on a cron or interval).

    With no subcommand, lists them with their next fire time.

    \b
    Examples:
      echomq schedules
      echomq schedules add nightly --cron "0 3 * * *" --tz Europe/Berlin --name report
      echomq schedules add beat --every 30 --name ping --data '{"n": 1}'
      echomq schedules pause nightly
      echomq schedules remove nightly
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_schedules, as_json=as_json, queue=queue, url=url)


@schedules.command("list", context_settings=CONTEXT_SETTINGS)
@json_option
@queue_options
def list_schedules(as_json: bool, queue: str, url: str | None) -> None:
    """The schedules with their next fire, last fire and that job's outcome.

    \b
    Example:
      echomq schedules list --json
    """
    with open_queue(queue, url) as q:
        found = q.schedules()
    if as_json:
        echo_json([s.to_dict() for s in found])
        return
    if not found:
        click.echo(f"no schedules in queue {queue}")
        return
    click.echo(f"schedules of queue {queue}:")
    for line in schedule_lines(found):
        click.echo(line)


@schedules.command("add", context_settings=CONTEXT_SETTINGS)
@click.argument("schedule_id")
@click.option("--cron", metavar="EXPR", help='A 5-field cron expression, e.g. "0 3 * * *".')
@click.option("--every", type=float, metavar="SECONDS", help="Fire every SECONDS instead.")
@click.option("--tz", default="UTC", show_default=True, help="IANA time zone of --cron.")
@click.option("--name", "-n", "job_name", required=True, help="Name of the job each fire adds.")
@click.option("--data", "-d", metavar="JSON", help="The job's data, as JSON.")
@click.option("--priority", "-p", type=int, default=0, show_default=True)
@click.option("--group", "-g", metavar="GROUP", help="The job's lane.")
@click.option("--max-attempts", type=int, help="Attempts per job (default: the queue's).")
@click.option("--skip-if-running", is_flag=True, help="Skip a fire while the last job runs.")
@click.option("--no-catch-up", is_flag=True, help="Skip fires reached late (no catch-up job).")
@queue_options
def add_schedule(
    schedule_id: str,
    cron: str | None,
    every: float | None,
    tz: str,
    job_name: str,
    data: str | None,
    priority: int,
    group: str | None,
    max_attempts: int | None,
    skip_if_running: bool,
    no_catch_up: bool,
    queue: str,
    url: str | None,
) -> None:
    """Create or replace schedule SCHEDULE_ID (give --cron or --every).

    \b
    Examples:
      echomq schedules add nightly --cron "0 3 * * *" --tz Europe/Berlin --name report
      echomq schedules add heartbeat --every 60 --name ping
    """
    payload: Any = None if data is None else parse_json(data, "--data")
    with open_queue(queue, url) as q:
        nxt = q.schedule(
            schedule_id,
            cron=cron,
            every=every,
            name=job_name,
            data=payload,
            priority=priority,
            group=None if group is None else parse_group(group),
            tz=tz,
            max_attempts=max_attempts,
            skip_if_running=skip_if_running,
            catch_up=not no_catch_up,
        )
    state = "paused" if nxt is None else f"next fire {zoned_time(nxt, tz)}"
    click.echo(f"schedule {escape_text(schedule_id, markup=False)} saved: {state}")


def _control(verb: str, done: str) -> Callable[..., None]:
    @click.argument("schedule_id")
    @queue_options
    def command(schedule_id: str, queue: str, url: str | None) -> None:
        with open_queue(queue, url) as q:
            found = getattr(q, verb)(schedule_id)
        shown = escape_text(schedule_id, markup=False)
        if not found:
            fail(f"no schedule {shown} in queue {queue}")
        click.echo(f"schedule {shown} {done}")

    return command


def _help(what: str, verb: str) -> str:
    return f"{what}\n\n\b\nExample:\n  echomq schedules {verb} nightly"


schedules.command(
    "remove", context_settings=CONTEXT_SETTINGS, help=_help("Remove a schedule.", "remove")
)(_control("unschedule", "removed"))
schedules.command(
    "pause", context_settings=CONTEXT_SETTINGS, help=_help("Stop a schedule firing.", "pause")
)(_control("pause_schedule", "paused"))
schedules.command(
    "resume",
    context_settings=CONTEXT_SETTINGS,
    help=_help("Fire a paused schedule again.", "resume"),
)(_control("resume_schedule", "resumed"))
