"""``echomq queues``, ``pause`` and ``resume``, and finding queues by walking the server.

Which queues exist is read from the server, never kept in a registry: every
queue that ever held a job has a meta hash, found by echomq.discovery (a
bounded SCAN, on every primary of a cluster, as the dashboard's registry does).
A walk here takes at most ``MAX_STEPS`` steps of ``STEP_KEYS`` keys (about 2
million keys in all) and says when it stopped short.

The same walk answers "a command named a queue that has never held a job"
(:func:`note_if_unused`: most often a forgotten ``-q``) and finds a job's queue
from its id alone (:func:`find_job`).
"""

from __future__ import annotations

from typing import Any

import click
from click.core import ParameterSource

from echomq.cli.common import (
    CONTEXT_SETTINGS,
    QUEUE_ENV,
    echo_json,
    escape_text,
    json_option,
    open_queue,
    plain_table,
    queue_options,
    short_when,
    url_option,
)
from echomq.discovery import MAX_QUEUES, MAX_STEPS, STEP_KEYS, Listing, list_queues
from echomq.engine import PREVIEW_BYTES
from echomq.ids import is_id
from echomq.reports import JobPreview, QueueStats
from echomq.sync import SyncQueue


def _listing(walk: Listing) -> str:
    names = ", ".join(walk.names[:10])
    more = len(walk.names) - 10
    if more > 0 or not walk.complete:
        names += f", … ({'more' if not walk.complete else f'{more} more'})"
    return names


def unused_note(q: SyncQueue) -> str:
    """Why a queue looks empty: it has never held a job, and which queues have."""
    walk = list_queues(q, limit=11)
    others = [n for n in walk.names if n != q.name]
    if not others and not walk.complete:
        return f"queue {q.name!r} has never held a job (no other queue found in a bounded search)"
    if not others:
        return (
            f"queue {q.name!r} has never held a job, and no queue on this server has "
            f"(add one with: echomq add NAME -q QUEUE)"
        )
    return (
        f"queue {q.name!r} has never held a job; queues on this server: "
        f"{_listing(Listing(others, walk.complete))} (choose one with -q NAME or {QUEUE_ENV})"
    )


def note_if_unused(q: SyncQueue, stats: QueueStats | None = None) -> None:
    """Print a note on stderr when ``q`` has never held a job (exit status unchanged)."""
    if not (stats or q.stats(lane_limit=1)).ever_used:
        click.echo(f"note: {unused_note(q)}", err=True)


def queue_was_given(name: str = "queue") -> bool:
    """Whether the command's queue came from ``-q`` or ECHOMQ_QUEUE (not the default)."""
    source = click.get_current_context().get_parameter_source(name)
    return source not in (None, ParameterSource.DEFAULT)


def find_job(
    q: SyncQueue, job_id: str, preview: int = PREVIEW_BYTES
) -> tuple[JobPreview, str] | None:
    """The job ``job_id`` and its queue: ``q``, or (no queue given) whichever holds it.

    The job is read by ``peek``: a long field (payload, result, error, …) only
    up to ``preview`` bytes. Ids are unique across queues, so when no queue was
    named the server's queues are searched one ``peek`` each, up to MAX_QUEUES
    of them (none for a string that is not a job id: it names no job)."""
    if not is_id(job_id):
        return None
    job = q.peek(job_id, preview)
    if job is not None or queue_was_given():
        return None if job is None else (job, q.name)
    for name in list_queues(q).names:
        if name == q.name:
            continue
        with SyncQueue(name, client=q.client()) as other:
            job = other.peek(job_id, preview)
        if job is not None:
            return job, name
    return None


def not_found(q: SyncQueue, job_id: str) -> str:
    """The one-line error for an id find_job did not find."""
    if not is_id(job_id):
        return f"no job {job_id!r}: not a job id (an id is job_ and 26 characters, job_01…)"
    if not queue_was_given():
        walk = list_queues(q)
        where = f"any of the {len(walk.names)} queues on this server"
        if not walk.complete:
            where += " searched (the search stopped short: name the queue with -q)"
        return f"no job {job_id} in {where} (never added, removed, or pruned)"
    message = f"no job {job_id} in queue {q.name!r} (never added, removed, or pruned)"
    if not q.stats(lane_limit=1).ever_used:
        message += f"; {unused_note(q)}"
    return message


# -- echomq queues -------------------------------------------------------------------


def queue_row(stats: QueueStats) -> dict[str, Any]:
    """One queue's line of ``echomq queues`` as JSON values."""
    return {
        "queue": stats.queue,
        "counts": dict(stats.counts),
        "lanes": stats.ring_length,
        "paused": stats.paused,
        "last_activity": stats.last_activity,
    }


def _activity(stats: QueueStats) -> str:
    text = short_when(stats.last_activity)
    return f"{text} (running)" if stats.counts["active"] else text


STATES = ("waiting", "delayed", "failed", "active", "completed", "dead")


def queues_table(rows: list[QueueStats]) -> list[str]:
    return plain_table(
        ("queue", *STATES, "lanes", "paused", "last activity"),
        (
            (
                escape_text(stats.queue, markup=False),
                *(str(stats.counts[state]) for state in STATES),
                str(stats.ring_length),
                "paused" if stats.paused else "",
                _activity(stats),
            )
            for stats in rows
        ),
        right=set(range(1, len(STATES) + 2)),
    )


@click.command(context_settings=CONTEXT_SETTINGS)
@json_option
@url_option
def queues(as_json: bool, url: str | None) -> None:
    """Every queue on the server: counts by state, lanes, paused, last activity.

    A queue is listed once it has held a job. "failed" counts jobs whose
    retry is pending; "lanes" the lanes with waiting jobs; the last activity
    is the last add, completion or failed attempt.

    \b
    Examples:
      echomq queues
      echomq queues --json | jq '.queues[] | select(.counts.dead > 0) | .queue'
    """
    with open_queue("default", url) as q:
        walk = list_queues(q)
        rows = []
        for name in walk.names:
            with SyncQueue(name, client=q.client()) as one:
                rows.append(one.stats(lane_limit=1))
    if as_json:
        echo_json({"queues": [queue_row(s) for s in rows], "complete": walk.complete})
        return
    if not rows:
        click.echo("no queues yet: a queue appears once it has held a job")
        return
    for line in queues_table(rows):
        click.echo(line)
    if not walk.complete:
        click.echo(
            f"(maybe not all: the walk stops after {MAX_QUEUES} queues or {MAX_STEPS} "
            f"SCAN steps of {STEP_KEYS} keys)"
        )


# -- pause and resume ----------------------------------------------------------------


def _pause_text(name: str, paused: bool) -> str:
    if paused:
        return f"paused queue {name}: workers claim nothing from it until `echomq resume`"
    return f"resumed queue {name}: workers claim from it again"


@click.command(context_settings=CONTEXT_SETTINGS)
@queue_options
def pause(queue: str, url: str | None) -> None:
    """Stop workers claiming from the queue (jobs keep their places; adds go on).

    Jobs already running finish normally. `echomq resume` undoes it.

    \b
    Example:
      echomq pause -q mail
    """
    with open_queue(queue, url) as q:
        q.pause()
        note_if_unused(q)
    click.echo(_pause_text(queue, True))


@click.command(context_settings=CONTEXT_SETTINGS)
@queue_options
def resume(queue: str, url: str | None) -> None:
    """Let workers claim from a paused queue again.

    \b
    Example:
      echomq resume -q mail
    """
    with open_queue(queue, url) as q:
        q.resume()
        note_if_unused(q)
    click.echo(_pause_text(queue, False))
