"""``echomq logs JOB`` (a job's log) and ``echomq workers`` (the running workers)."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from echomq.cli.common import (
    CONTEXT_SETTINGS,
    echo_json,
    escape_text,
    json_option,
    open_queue,
    plain_table,
    queue_options,
    when,
)
from echomq.joblogs import LogLine


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("job_id", metavar="JOB")
@json_option
@queue_options
def logs(job_id: str, as_json: bool, queue: str, url: str | None) -> None:
    """A job's log, oldest line first: what its handler logged (job.log and its
    logging records at or above the worker's job_log_level), each line with its
    time, attempt and level. A job keeps 1,000 lines / 256 KiB at most.

    \b
    Examples:
      echomq logs job_01j9...
      echomq logs job_01j9... --json
    """
    with open_queue(queue, url) as q:
        lines = q.logs(job_id)
    if as_json:
        echo_json({"id": job_id, "lines": [_line_dict(line) for line in lines]})
        return
    if not lines:
        click.echo(f"job {escape_text(job_id, markup=False)} logged nothing")
        return
    for line in lines:
        head = f"{when(line.at)}  #{line.attempt}  {line.level:<8} "
        first, *rest = line.message.split("\n")
        click.echo(head + escape_text(first, markup=False))
        for more in rest:  # a traceback: each of its lines escaped, indented under the first
            click.echo(" " * len(head) + escape_text(more, markup=False))


def _line_dict(line: LogLine) -> dict[str, object]:
    return {"at": line.at, "attempt": line.attempt, "level": line.level, "message": line.message}


@click.command(context_settings=CONTEXT_SETTINGS)
@json_option
@queue_options
def workers(as_json: bool, queue: str, url: str | None) -> None:
    """The workers running on the queue: where, since when, last heartbeat, and
    the jobs each runs now. A worker that died is gone within three heartbeats.

    \b
    Examples:
      echomq workers --queue mail
      echomq workers --json
    """
    with open_queue(queue, url) as q:
        found = q.workers()
    if as_json:
        echo_json(
            [
                {
                    "id": w.id,
                    "host": w.host,
                    "pid": w.pid,
                    "queues": w.queues,
                    "concurrency": w.concurrency,
                    "started_at": w.started_at,
                    "seen_at": w.seen_at,
                    "running": w.running,
                }
                for w in found
            ]
        )
        return
    if not found:
        click.echo(f"no worker runs on queue {escape_text(queue, markup=False)}")
        return
    now = datetime.now(UTC)
    rows = [
        [
            w.id,
            escape_text(f"{w.host}:{w.pid}", markup=False),
            escape_text(",".join(w.queues), markup=False),
            f"{len(w.running)}/{w.concurrency}",
            _ago(now, w.started_at),
            _ago(now, w.seen_at),
            " ".join(w.running[:3]) + (f" (+{len(w.running) - 3})" if len(w.running) > 3 else ""),
        ]
        for w in found
    ]
    headers = ["ID", "WHERE", "QUEUES", "BUSY", "STARTED", "SEEN", "RUNNING"]
    for text in plain_table(headers, rows):
        click.echo(text)


def _ago(now: datetime, then: datetime) -> str:
    seconds = max(0.0, (now - then).total_seconds())
    if seconds < 60:
        return f"{seconds:.1f} s ago"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"
