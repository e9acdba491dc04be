"""Bulk actions on what a search found: retry, remove or cancel, one step at a time.

``POST /api/queues/{q}/found/{retry|remove|cancel}`` with the search (``tags``
as ``key=value`` words, ``state``, ``name``) and a ``cursor`` ("" to start)
acts on one page of the search (at most :data:`STEP` jobs) and answers with
what it did and the cursor of the next step (null: the search is done). The
page repeats the step until then, drawing its progress, and can stop between
two steps; each step is one guarded, audited action, so no request runs
long and nothing acts on jobs the user has not asked for.

What each action does to a found job (every call is one of ``Queue``'s own):

- ``retry``: a dead job goes back with fresh attempts (``retry_dead``); a job
  in any other state is skipped.
- ``remove``: the job is deleted whatever its state (``remove``).
- ``cancel``: a job that has not finished is cancelled (``cancel``: one not
  started is removed, a running one ends dead); a finished job is skipped.

The search's cursor is a position, so the jobs a step removes do not shift
the next step: it goes on after the last job the step looked at.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from echomq.errors import InvalidOption, JobNotFound
from echomq.job import Job, State
from echomq.queue import Queue
from echomq.tags import parse_tag_args
from echomq.web.registry import gather_bounded

#: the most jobs one step acts on (one page of the search).
STEP = 100
#: the kinds of bulk action, and the states each leaves alone.
KINDS = ("retry", "remove", "cancel")
_FINISHED = (State.COMPLETED, State.DEAD)
_FIELDS = frozenset({"tags", "state", "name", "cursor"})


def _text(body: dict[str, Any], name: str) -> str:
    value = body.get(name, "")
    if not isinstance(value, str):
        raise InvalidOption(f"{name} {value!r:.60} must be a string")
    return value


async def _each(jobs: list[Job], call: Callable[[str], Awaitable[bool]]) -> int:
    """Run ``call`` on each job (a bounded number at once): how many it changed."""

    async def one(job_id: str) -> bool:
        try:
            return await call(job_id)
        except JobNotFound:  # gone since the search found it
            return False

    done = await gather_bounded([partial(one, job.id) for job in jobs])
    return sum(done)


async def act_on_found(kind: str, queue: Queue, body: dict[str, Any]) -> dict[str, Any]:
    """One step of a bulk ``kind`` on the search ``body`` names (see the module)."""
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        raise InvalidOption(f"unknown field {unknown[0]!r}: a bulk step takes {sorted(_FIELDS)}")
    tags = parse_tag_args(_text(body, "tags").split())
    page = await queue.find(
        tags,
        state=_text(body, "state") or None,
        name=_text(body, "name") or None,
        cursor=_text(body, "cursor") or None,
        count=STEP,
        summary=True,
    )
    if kind == "retry":
        dead = [job.id for job in page.jobs if job.state is State.DEAD]
        done = len(await queue.retry_dead(dead)) if dead else 0
    elif kind == "remove":
        done = await _each(page.jobs, queue.remove)
    else:
        running = [job for job in page.jobs if job.state not in _FINISHED]
        done = await _each(running, queue.cancel)
    return {
        "action": kind,
        "looked": len(page.jobs),
        "done": done,
        "skipped": len(page.jobs) - done,
        "cursor": page.cursor,
    }
