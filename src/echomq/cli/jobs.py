"""``echomq add`` and ``echomq inspect``: put one job in, look at one job closely."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import click

from echomq import score as codec
from echomq.cli import common
from echomq.cli.common import (
    CONTEXT_SETTINGS,
    echo_json,
    escape_text,
    fail,
    json_option,
    lane_label,
    open_queue,
    parse_json,
    queue_options,
    when,
)
from echomq.cli.score import aged_readout, hex_split, ruler
from echomq.cli.tracebacks import without_plumbing
from echomq.dedupe import MODES, Dedupe, Mode
from echomq.engine import PREVIEW_BYTES
from echomq.errors import InvalidScore, JobNotFound
from echomq.ids import id_timestamp
from echomq.job import Job, State
from echomq.reports import Dependents, FieldPreview
from echomq.sync import SyncQueue

if TYPE_CHECKING:
    from rich.table import Table


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@click.option(
    "--data",
    "-d",
    metavar="JSON",
    help="The payload as JSON; '-' reads it from stdin. Default: null.",
)
@click.option(
    "--args",
    "task_args",
    metavar="JSON",
    help="For a task: its positional arguments as a JSON array ('-': stdin).",
)
@click.option(
    "--kwargs",
    "task_kwargs",
    metavar="JSON",
    help="For a task: its keyword arguments as a JSON object ('-': stdin).",
)
@click.option(
    "--priority",
    "-p",
    type=int,
    default=0,
    show_default=True,
    metavar="TIER",
    help="Tier 0 … 2^21−1; lower is served first.",
)
@click.option("--group", "-g", metavar="GROUP", help="Lane (tenant); default: the default lane.")
@click.option("--delay", type=float, metavar="SECONDS", help="Become waiting after this long.")
@click.option(
    "--key",
    metavar="KEY",
    help="Idempotency key: returns the live job's id instead of adding a second one.",
)
@click.option(
    "--dedupe",
    "dedupe_mode",
    type=click.Choice(MODES),
    help="What another add with --key does (docs/lifecycle.md): drop (default), "
    "throttle, debounce or latest.",
)
@click.option(
    "--window",
    type=float,
    metavar="SECONDS",
    help="With --dedupe: drop's hold after the job finished, throttle's window, "
    "debounce's quiet time.",
)
@click.option(
    "--max-wait",
    type=float,
    metavar="SECONDS",
    help="With --dedupe debounce: run at the latest this long after the first add.",
)
@click.option("--max-attempts", type=int, metavar="N", help="Attempts before the job is dead.")
@queue_options
def add(
    name: str,
    data: str | None,
    task_args: str | None,
    task_kwargs: str | None,
    priority: int,
    group: str | None,
    delay: float | None,
    key: str | None,
    dedupe_mode: str | None,
    window: float | None,
    max_wait: float | None,
    max_attempts: int | None,
    queue: str,
    url: str | None,
) -> None:
    """Add a job called NAME and print its id.

    For a task (@q.task), NAME is the task's name and --args/--kwargs give
    the call's arguments: the job's data becomes {"args": [...], "kwargs":
    {...}}, what the worker calls the function with (arguments it cannot
    take make the job dead at once, naming the signature). The task's own
    options (max_attempts, priority, group, expires) apply only to jobs
    enqueued through the task: give them here (--max-attempts, ...) or the
    queue's apply.

    \b
    Examples:
      echomq add send --data '{"to": 42}'
      echomq add report --data '{"day": "mon"}' --group acme --priority 1 --delay 30
      echo '{"big": true}' | echomq add import --data - --key import-2024-06-01
      echomq add mail.send_email --args '["ann@example.com"]' --kwargs '{"urgent": true}'
      echomq add reindex --key shop-7 --dedupe debounce --window 5 --max-wait 60
    """
    payload = _payload(data, task_args, task_kwargs)
    dedupe = _dedupe(key, dedupe_mode, window, max_wait)
    with open_queue(queue, url) as q:
        job_id = q.add(
            name,
            payload,
            priority=priority,
            group=group,
            delay=delay,
            max_attempts=max_attempts,
            key=None if dedupe else key,
            dedupe=dedupe,
        )
    click.echo(job_id)


def _dedupe(
    key: str | None, mode: str | None, window: float | None, max_wait: float | None
) -> Dedupe | None:
    """The Dedupe the options ask for (None: a plain --key, or none)."""
    if mode is None and window is None and max_wait is None:
        return None
    if key is None:
        fail("--dedupe, --window and --max-wait need --key (the key the jobs share)")
    return Dedupe(key, cast(Mode, mode or "drop"), window, max_wait)  # bad values: one line


def _payload(data: str | None, task_args: str | None, task_kwargs: str | None) -> Any:
    """The job's data: --data as given, or a task call built from --args/--kwargs
    (keys only for those given non-empty, as task.enqueue writes it)."""
    if task_args is None and task_kwargs is None:
        return parse_json("null" if data is None else data, "--data")
    if data is not None:
        fail("give --data, or --args/--kwargs for a task's arguments, not both")
    if [task_args, task_kwargs].count("-") > 1:
        fail("only one of --args and --kwargs can read stdin ('-')")
    call: dict[str, Any] = {}
    _call_part(call, "args", task_args, list, "a JSON array of positional arguments")
    _call_part(call, "kwargs", task_kwargs, dict, "a JSON object of keyword arguments")
    return call


def _call_part(call: dict[str, Any], key: str, text: str | None, kind: type, what: str) -> None:
    """Parse --args or --kwargs (``key``) into ``call``, if given and not empty."""
    if text is None:
        return
    value = parse_json(text, f"--{key}")
    if not isinstance(value, kind):
        fail(f"--{key} must be {what}, not {text[:60]!r}")
    if value:
        call[key] = value


def job_dict(job: Job, queue: str, cut: Mapping[str, FieldPreview] | None = None) -> dict[str, Any]:
    """Every field of a job, plus its decoded score, as plain JSON values; a long
    field read cut short (``cut``: Queue.peek) is null, its first bytes, whole
    size and bytes shown under ``truncated``."""
    decoded = codec.decode(job.score)
    return {
        "id": job.id,
        "queue": queue,
        "name": job.name,
        "state": str(job.state),
        "priority": job.priority,
        "group": job.group,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "stalls": job.stalls,
        "score": job.score,
        "score_decoded": {
            "tier": decoded.tier,
            "counter": decoded.counter,
            "hex": hex_split(decoded),
        },
        "created_at": job.created_at,
        "run_at": job.run_at,
        "finished_at": job.finished_at,
        "lease_deadline": job.lease_deadline,
        "key": job.key,
        "data": job.data,
        "result": job.result,
        "error": job.error,
        "traceback": job.traceback,
        "progress": job.progress,
        "dependencies": job.dependencies,
        "schedule_id": job.schedule_id,
        "fire_time": job.fire_time,
        "tags": job.tags,
        "worker": job.worker,
        "duration": job.duration,
        "truncated": {name: preview.to_dict() for name, preview in (cut or {}).items()},
    }


def _size(n: int) -> str:
    return f"{n / 1048576:.1f} MiB" if n >= 1048576 else f"{n / 1024:.1f} KiB"


def _print_cut(label: str, preview: FieldPreview, style: str = "bold") -> None:
    """A long field's first bytes as stored, marked truncated with its whole size."""
    shown = len(preview.text.encode())
    common.console.print(
        f"\n[{style}]{label}[/] (truncated: the first {_size(shown)} of {_size(preview.size)} "
        "shown; --whole shows it all)"
    )
    common.console.print(escape_text(preview.text) + "…")


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


#: the rows of the fields table that hold text from the server (lane_label escapes its own).
ESCAPED = ("name", "idempotency key", "schedule", "depends on", "dependents", "read by")


def some_ids(total: int, shown: list[str], what: str) -> str:
    """``N what: id, id, … (and M more)`` for a count and the ids read of it."""
    text = f"{total} {what}: {', '.join(shown)}"
    return text + (f" (and {total - len(shown)} more)" if total > len(shown) else "")


def _run_rows(job: Job) -> list[tuple[str, str]]:
    """Its latest attempt's run time and worker, where known."""
    rows = []
    if job.duration is not None:
        rows.append(("run time", f"{job.duration:.3f} s"))
    if job.worker is not None:
        rows.append(("worker", escape_text(job.worker)))
    return rows


def _fields_table(job: Job, queue: str, dependents: Dependents | None) -> Table:
    from rich.table import Table

    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    rows: list[tuple[str, str]] = [
        ("id", job.id),
        ("queue", queue),
        ("name", job.name),
        ("state", str(job.state)),
        ("lane", lane_label(job.group)),
        ("priority", f"tier {job.priority}"),
        ("attempts", f"{job.attempts} of {job.max_attempts}"),
        ("stalls", str(job.stalls)),
        ("created", when(job.created_at or id_timestamp(job.id))),
    ]
    if job.run_at is not None:
        rows.append(("run at", when(job.run_at)))
    if job.finished_at is not None:
        rows.append(("finished", when(job.finished_at)))
    rows += _run_rows(job)
    if job.state is State.ACTIVE:
        rows.append(("lease until", when(job.lease_deadline)))
    if job.key is not None:
        rows.append(("idempotency key", job.key))
    if job.schedule_id is not None:
        rows.append(("schedule", f"{job.schedule_id}, fire time {when(job.fire_time)}"))
    if job.dependencies:
        rows.append(("depends on", ", ".join(job.dependencies)))
    if dependents is not None and dependents.blocked:
        rows.append(("dependents", some_ids(dependents.blocked, dependents.blocked_ids, "blocked")))
    if dependents is not None and dependents.readers:
        rows.append(("read by", some_ids(dependents.readers, dependents.reader_ids, "dependents")))
    for label, value in rows:
        table.add_row(label, escape_text(value) if label in ESCAPED else value)
    return table


def _print_job(
    job: Job,
    queue: str,
    dependents: Dependents | None,
    full_traceback: bool = False,
    cut: Mapping[str, FieldPreview] | None = None,
    aged: codec.AgedKey | None = None,
) -> None:
    common.console.print(_fields_table(job, queue, dependents))
    common.console.print()
    if aged is not None:
        for line in aged_readout(aged):
            common.console.print(f"  {line}", markup=False)
        _print_long_fields(job, cut or {})
        if job.traceback:
            _print_traceback(job.traceback, full_traceback)
        return
    decoded = codec.decode(job.score)
    common.console.print(
        f"[bold]score[/]  {job.score} = {hex_split(decoded)} → tier {decoded.tier}, "
        f"counter {decoded.counter}"
    )
    if job.state in (State.DELAYED, State.FAILED) and job.score == 0:
        common.console.print("  (no score yet: it is taken when the job becomes waiting)")
    for line in ruler(decoded):
        common.console.print(f"  {line}", markup=False)
    _print_long_fields(job, cut or {})
    if job.traceback:
        _print_traceback(job.traceback, full_traceback)


def _print_long_fields(job: Job, cut: Mapping[str, FieldPreview]) -> None:
    """Payload, result, progress and error: whole, or their first bytes if cut."""
    sections = [
        ("data", job.data, True),
        ("result", job.result, job.result is not None),
        ("progress", job.progress, job.progress is not None),
    ]
    for label, value, show in sections:
        if label in cut:
            _print_cut(label, cut[label])
        elif show:
            common.console.print(f"\n[bold]{label}[/]")
            common.console.print(escape_text(_pretty(value)))
    if "error" in cut:
        _print_cut("last error", cut["error"], "bold red")
    elif job.error:
        common.console.print("\n[bold red]last error[/]")
        common.console.print(escape_text(job.error))
    if "traceback" in cut:  # its head: the frames are read whole with --whole
        _print_cut("traceback", cut["traceback"])


def _print_traceback(traceback: str, full_traceback: bool) -> None:
    text, hidden = traceback.rstrip(), 0
    if not full_traceback:
        text, hidden = without_plumbing(text)
    common.console.print("\n[bold]traceback[/]")
    if hidden:
        common.console.print(
            f"({hidden} frames of the worker running the handler left out;"
            " --full-traceback shows them)"
        )
    common.console.print(escape_text(text))


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("job_id")
@json_option
@click.option(
    "--full-traceback",
    is_flag=True,
    help="Show the traceback whole, with the worker's own frames that called the handler.",
)
@click.option(
    "--whole",
    is_flag=True,
    help=f"Read long fields whole (without it: their first {PREVIEW_BYTES // 1024} KiB).",
)
@queue_options
def inspect(
    job_id: str, as_json: bool, full_traceback: bool, whole: bool, queue: str, url: str | None
) -> None:
    """Show one job: every field, and its score decoded.

    State, attempts, last error and traceback, and the score split into tier
    and counter. The traceback starts at the handler's own code (the
    worker's frames that called it are left out unless --full-traceback;
    --json always gives it whole). A long payload, result, progress, error
    or traceback shows its first 64 KiB, marked truncated with its whole
    size (--json: under "truncated"); --whole reads it all. Without -q (or
    ECHOMQ_QUEUE) the job's queue is found from its id.

    \b
    Examples:
      echomq inspect job_01m8vfye84ec3a377q2197v469
      echomq inspect job_01m8vfye84ec3a377q2197v469 -q mail --json
      echomq inspect job_01m8vfye84ec3a377q2197v469 --whole --json > job.json
    """
    from echomq.cli.queues import find_job, not_found

    with open_queue(queue, url) as q:
        found = find_job(q, job_id)
        if found is None:
            fail(not_found(q, job_id))
        preview, where = found
        job, cut = preview.job, preview.cut
        with SyncQueue(where, client=q.client()) as holder:
            if whole and cut:  # read once more, whole (it may have changed since)
                job = holder.get(job_id) or job
                cut = {}
            try:
                dependents: Dependents | None = holder.dependents(job_id)
            except JobNotFound:  # removed since: its fields are shown as read
                dependents = None
            aged = _aged_key(holder, job)
    if as_json:
        listed = None if dependents is None else dependents.to_dict()
        doc = {**job_dict(job, where, cut), "dependents": listed}
        if aged is not None:  # an aged key is no composite score
            doc["score_decoded"] = None
            doc["aged_key"] = {"key": aged.key, "tier": aged.tier,
                               "age_step_ms": aged.age_step_ms, "due_ms": aged.due_ms}  # fmt: skip
        echo_json(doc)
    else:
        _print_job(job, where, dependents, full_traceback, cut, aged)


def _aged_key(holder: SyncQueue, job: Job) -> codec.AgedKey | None:
    """The job's aged lane key read back, if its queue has ordering="aged" and the
    job has a key (waiting or active); else None."""
    if job.state not in (State.WAITING, State.ACTIVE) or not job.score:
        return None
    if holder.stats(lane_limit=1).ordering != "aged":
        return None
    from echomq.settings import DEFAULT_AGE_STEP

    step = holder.settings().get("age_step", DEFAULT_AGE_STEP)
    try:
        return codec.aged_decode(job.score, job.priority, round(step * 1000))
    except InvalidScore:  # age_step raised since it entered: no due time to show
        return None


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("job_id")
@queue_options
def remove(job_id: str, queue: str, url: str | None) -> None:
    """Delete one job for good, whatever its state.

    A waiting or delayed job leaves its lane; a running one loses its lease
    (its worker's result is dropped). Without -q (or ECHOMQ_QUEUE) the job's
    queue is found from its id. Exits 1 if there is no such job.

    \b
    Examples:
      echomq remove job_01m8vfye84ec3a377q2197v469
      echomq remove job_01m8vfye84ec3a377q2197v469 -q mail
    """
    from echomq.cli.queues import find_job, not_found

    with open_queue(queue, url) as q:
        found = find_job(q, job_id, preview=1)  # only its name and state are shown
        if found is None:
            fail(not_found(q, job_id))
        job, where = found[0].job, found[1]
        with SyncQueue(where, client=q.client()) as holder:
            removed = holder.remove(job_id)
    if not removed:  # removed or pruned between the look-up and now
        fail(f"no job {job_id} in queue {where!r} any more")
    click.echo(
        f"removed job {job_id} ({escape_text(job.name, markup=False)}, {job.state!s}) "
        f"from queue {where}"
    )
