"""``echomq logs JOB`` (a job's log), ``echomq workers`` (the running workers) and
``echomq metrics`` (the per-minute metrics kept on the server)."""

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
from echomq.metrics import BUCKETS, KEPT_MINUTES, Histogram, MetricPoint


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


#: the sparkline's eight heights.
SPARKS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[int]) -> str:
    """One character per value, its height scaled to the largest (a space for 0)."""
    top = max(values, default=0)
    if top == 0:
        return " " * len(values)
    return "".join(" " if v == 0 else SPARKS[min(7, (v * 8 - 1) // top)] for v in values)


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option("--name", "-N", metavar="NAME", help="Only jobs with this name.")
@click.option(
    "--minutes",
    "-m",
    type=click.IntRange(1, KEPT_MINUTES),
    default=60,
    show_default=True,
    help="How many minutes, ending now (kept: 72 h).",
)
@json_option
@queue_options
def metrics(name: str | None, minutes: int, as_json: bool, queue: str, url: str | None) -> None:
    """Per job name over the last minutes: jobs completed, failed, dead and
    cancelled (before they ran), a
    sparkline of completions per minute, and run and wait time percentiles
    (the upper bound of the histogram bucket that holds them). Kept on the
    server for a queue with `echomq config Q --set metrics=1`.

    \b
    Examples:
      echomq metrics --queue mail
      echomq metrics --name send --minutes 1440 --json
    """
    with open_queue(queue, url) as q:
        points = q.metrics(name=name, minutes=minutes)
        enabled = q.settings().get("metrics", False)
    if as_json:
        echo_json([_point_dict(p) for p in points])
        return
    if not points:
        hint = "" if enabled else " (metrics are off: echomq config --set metrics=1)"
        click.echo(f"no finished job in the last {minutes} minute(s){hint}")
        return
    last = max(p.minute for p in points)
    start = last.timestamp() / 60 - min(minutes, 60) + 1  # the sparkline: the last hour at most
    rows = []
    for job_name in sorted({p.name for p in points}):
        mine = [p for p in points if p.name == job_name]
        per_minute = [0] * min(minutes, 60)
        for p in mine:
            slot = int(p.minute.timestamp() / 60 - start)
            if 0 <= slot < len(per_minute):
                per_minute[slot] += p.completed
        run = _merged([p.run for p in mine])
        wait = _merged([p.wait for p in mine])
        rows.append(
            [
                escape_text(job_name, markup=False),
                str(sum(p.completed for p in mine)),
                str(sum(p.failed for p in mine)),
                str(sum(p.dead for p in mine)),
                str(sum(p.cancelled for p in mine)),
                sparkline(per_minute),
                f"{_seconds(run.quantile(0.5))} / {_seconds(run.quantile(0.95))}",
                f"{_seconds(wait.quantile(0.5))} / {_seconds(wait.quantile(0.95))}",
            ]
        )
    headers = [
        "NAME",
        "COMPLETED",
        "FAILED",
        "DEAD",
        "CANCELLED",
        "PER MINUTE",
        "RUN p50/p95",
        "WAIT p50/p95",
    ]
    for text in plain_table(headers, rows, right={1, 2, 3, 4}):
        click.echo(text)


def _merged(histograms: list[Histogram]) -> Histogram:
    counts = [sum(column) for column in zip(*(h.counts for h in histograms), strict=True)]
    return Histogram(tuple(counts), sum(h.sum for h in histograms))


def _seconds(value: float | None) -> str:
    if value is None:
        return "–"
    if value == float("inf"):
        return f">{BUCKETS[-1]:g}s"
    return f"≤{value:g}s"


def _point_dict(p: MetricPoint) -> dict[str, object]:
    return {
        "minute": p.minute,
        "name": p.name,
        "completed": p.completed,
        "failed": p.failed,
        "dead": p.dead,
        "cancelled": p.cancelled,
        "run": {"buckets": p.run.cumulative()[:-1], "count": p.run.count, "sum": p.run.sum},
        "wait": {"buckets": p.wait.cumulative()[:-1], "count": p.wait.count, "sum": p.wait.sum},
    }
