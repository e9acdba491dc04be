"""``echomq position JOB``: where a waiting job stands (docs/ordering.md "Where a
job stands")."""

from __future__ import annotations

import click

from echomq.cli.common import (
    CONTEXT_SETTINGS,
    echo_json,
    fail,
    json_option,
    open_queue,
    queue_options,
)
from echomq.errors import InvalidState, JobNotFound
from echomq.position import Position
from echomq.sync import SyncQueue


def readout(job_id: str, queue: str, pos: Position) -> list[str]:
    """The position as lines for a person."""
    if pos.queue_ahead is None:
        queue_line = "not counted: its lane is paused, capped, throttled or over its rate"
    else:
        queue_line = f"{pos.queue_ahead}   (the weighted rotation, if nothing is added)"
    eta = "unknown (no job completed in the last 10 minutes)"
    if pos.eta is not None:
        eta = f"{pos.eta:.1f} s   (at the last 10 minutes' completion rate)"
    return [
        f"job {job_id} in queue {queue}",
        f"  ahead in its lane   {pos.lane_ahead}",
        f"  claims before it    {queue_line}",
        f"  estimated wait      {eta}",
    ]


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("job_id")
@queue_options
@json_option
def position(job_id: str, queue: str, url: str | None, as_json: bool) -> None:
    """Where a waiting job stands: jobs ahead of it in its lane, claims the
    queue makes before it, and an estimate of its wait.

    Without -q (or ECHOMQ_QUEUE) the job's queue is found from its id. Exits 1
    for a job that is not waiting or not there.

    \b
    Examples:
      echomq position job_01m8vfye84ec3a377q2197v469
      echomq position job_01m8vfye84ec3a377q2197v469 -q mail --json
    """
    from echomq.cli.queues import find_job, not_found

    with open_queue(queue, url) as q:
        found = find_job(q, job_id, preview=1)
        if found is None:
            fail(not_found(q, job_id))
        where = found[1]
        with SyncQueue(where, client=q.client()) as holder:
            try:
                pos = holder.position(job_id)
            except (InvalidState, JobNotFound) as exc:
                fail(str(exc))
    if as_json:
        echo_json({"job": job_id, "queue": where, **pos.to_dict()})
    else:
        for line in readout(job_id, where, pos):
            click.echo(line)
