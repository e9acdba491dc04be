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

Progress: ``find`` walks one tag index newest first (the smallest of the tags
asked for, findJobs.lua), so how far a bulk action has gone is how far along
that index its cursor is. Each step's reply says ``candidates``, the entries
of that index when the step began (the first step's is the whole action's
total: what the page's bar goes up to), and ``remaining``, the entries
older than the step's cursor when it ended (0 at the end): the page draws
``total - remaining`` of ``total``. Two reads of bounded work per step (a
ZCARD per tag asked for, at most 8; a ZSCORE, ZCARD and ZREVRANK of the index),
whatever the size of the index. ``remaining`` is read after the search and
before the step acts, while the entry its cursor names is still in the
index (a remove takes it out), so it is exact; the step acts only on jobs at
or before its cursor, so it does not change it. Jobs added during the action
are newer than its cursor and change neither figure. (Should the cursor's
entry have gone meanwhile, the entries older than its creation time are
counted: the bar may run a little ahead until the next step.)
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable, Mapping
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


async def _driving_index(queue: Queue, tags: Mapping[str, str]) -> tuple[str, int]:
    """The tag index ``find`` walks for ``tags`` (as findJobs.lua picks it: the
    smallest, then the lowest key) and its size."""
    client = await queue.client()
    keys = [queue.engine.keys.tag(k, v) for k, v in tags.items()]
    sizes = await asyncio.gather(*(client.zcard(key) for key in keys))
    size, key = min(zip((int(n) for n in sizes), keys, strict=True))
    return key, size


def _position(cursor: str) -> tuple[float, str]:
    """The position a cursor ``find`` just handed out names: the creation time
    (ms) and id of the last job it looked at (echomq.tags.wrap_cursor's format)."""
    encoded = cursor.partition(".")[2]
    text = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    at, _, job_id = text.partition(" ")
    return float(at), job_id.partition(" ")[0]


async def _remaining(queue: Queue, index: str, cursor: str | None) -> int:
    """The entries of ``index`` after ``cursor`` in find's order (older), 0 at the end."""
    if cursor is None:
        return 0
    client = await queue.client()
    at, job_id = _position(cursor)
    score, size, rank = await asyncio.gather(
        client.zscore(index, job_id), client.zcard(index), client.zrevrank(index, job_id)
    )
    if score is not None and rank is not None and float(score) == at:
        return max(0, int(size) - int(rank) - 1)
    return int(await client.zcount(index, "-inf", "(" + format(at, ".17g")))


async def act_on_found(kind: str, queue: Queue, body: dict[str, Any]) -> dict[str, Any]:
    """One step of a bulk ``kind`` on the search ``body`` names (see the module)."""
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        raise InvalidOption(f"unknown field {unknown[0]!r}: a bulk step takes {sorted(_FIELDS)}")
    tags = parse_tag_args(_text(body, "tags").split())
    index, candidates = await _driving_index(queue, tags)
    page = await queue.find(
        tags,
        state=_text(body, "state") or None,
        name=_text(body, "name") or None,
        cursor=_text(body, "cursor") or None,
        count=STEP,
        summary=True,
    )
    remaining = await _remaining(queue, index, page.cursor)  # before acting: see the module
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
        # how far along the index find walks (see the module): the bar's figures
        "candidates": candidates,
        "remaining": remaining,
    }
