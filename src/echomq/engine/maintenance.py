"""Maintenance's calls: the periodic maintain (promotion, reaping, pruning, and
firing due schedules), reviving or deleting dead jobs, and dropping the queue."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any, NamedTuple

import orjson

from echomq import ids
from echomq.call import Call
from echomq.engine.base import EngineBase
from echomq.engine.replies import ids as decode_ids
from echomq.engine.replies import ms
from echomq.options import check_int
from echomq.reports import MaintenanceReport
from echomq.schedules import FIRE_BUDGET, fires_to_make
from echomq.steps import Next

#: most dead jobs one retryDead call moves (retry_dead goes on in pages).
RETRY_PAGE = 500
#: most calls one retry_dead takes (its pages, and passes over jobs kept dead
#: for a dependency a later page revived).
MAX_RETRY_CALLS = 2_000
#: a due schedule in maintain.lua's reply: id, fire ms, definition JSON.
DUE_WIDTH = 3


class MaintainReply(NamedTuple):
    """maintain.lua's reply, as its header lists it."""

    promoted: int
    reaped: int
    pruned: int
    next_fire: Any
    next_deadline: Any
    now: Any
    renumbered: int
    next_schedule: Any
    due: list[Any]
    released: int
    releasing: int


class FireReply(NamedTuple):
    """fireSchedules.lua's reply: one outcome per fire, the earliest next fire, now."""

    outcomes: list[Any]
    earliest: Any
    now: Any


class RetryReply(NamedTuple):
    """retryDead.lua's reply: ids moved, ids kept dead (dependencies), ids looked at."""

    moved: list[str]
    kept: list[str]
    looked: int


class Revival:
    """One retry_dead in pages: a pass over the given ids (RETRY_PAGE per call) or
    over the dead set from its oldest (the jobs a page kept dead stay in front:
    the next page starts past them); then, while a pass moved some and kept some
    dead for their dependencies, a pass over the kept ones (their dependency may
    have been revived by a later page)."""

    def __init__(self, engine: EngineBase, given: list[str] | None, limit: int) -> None:
        self.engine, self.limit = engine, limit
        self.todo = given
        self.moved: list[str] = []
        self.pass_moved = 0  # moved by the pass under way
        self.kept: list[str] = []  # kept dead by the pass under way
        self.offset = self.looked = 0

    def first(self) -> Call[list[str] | Next[list[str]]]:
        return self._page()

    def _page(self) -> Call[list[str] | Next[list[str]]]:
        if self.todo is None:  # the oldest dead jobs, from rank offset
            page = min(RETRY_PAGE, self.limit - self.looked)
            return self.engine._script(
                "retryDead", partial(self._decode, page), str(page), str(self.offset)
            )
        chunk, self.todo = self.todo[:RETRY_PAGE], self.todo[RETRY_PAGE:]
        return self.engine._script(
            "retryDead", partial(self._decode, len(chunk)), str(RETRY_PAGE), "0", *chunk
        )

    def _decode(self, asked: int, raw: Any) -> list[str] | Next[list[str]]:
        reply = RetryReply(*raw)
        moved, kept, looked = list(reply.moved), list(reply.kept), int(reply.looked)
        self.moved += moved
        self.pass_moved += len(moved)
        self.kept += kept
        if self.todo is None:
            self.offset += len(kept)
            self.looked += looked
            if looked == asked and self.looked < self.limit:
                return Next(self._page(), most=MAX_RETRY_CALLS)
        elif self.todo:
            return Next(self._page(), most=MAX_RETRY_CALLS)
        if not (self.kept and self.pass_moved):
            return self.moved
        self.todo, self.kept, self.pass_moved = self.kept, [], 0  # another pass
        return Next(self._page(), most=MAX_RETRY_CALLS)


def decode_fired(report: MaintenanceReport, due: int, raw: Any) -> MaintenanceReport:
    """fireSchedules.lua's reply, added to the maintain report it follows."""
    reply = FireReply(*raw)
    outcomes = [str(x) for x in reply.outcomes]
    skipped = sum(1 for x in outcomes if x.startswith("skipped:"))
    fired = sum(1 for x in outcomes if x) - skipped
    earliest = ms(reply.earliest)
    # due schedules this client could not fire (it logged why) stay due:
    # the worker waits for its period rather than spin on them
    if earliest is not None and earliest <= report.server_time and due < FIRE_BUDGET:
        earliest = None
    return replace(report, fired=fired, skipped=skipped, next_schedule=earliest)


class MaintenanceCalls(EngineBase):
    """maintain, retry_dead, purge_dead, drop_page."""

    def maintain(self) -> Call[MaintenanceReport | Next[MaintenanceReport]]:
        """Promote due jobs, return expired leases, prune finished jobs, and fire
        due schedules (at most schedules.FIRE_BUDGET per call)."""
        return self._script("maintain", self._decode_maintain, str(FIRE_BUDGET))

    def _decode_maintain(self, raw: Any) -> MaintenanceReport | Next[MaintenanceReport]:
        r = MaintainReply(*raw)
        now = ms(r.now)
        assert now is not None
        report = MaintenanceReport(
            int(r.promoted),
            int(r.reaped),
            int(r.pruned),
            ms(r.next_fire),
            ms(r.next_deadline),
            now,
            0,
            0,
            ms(r.next_schedule),
            released=int(r.released),
            releasing=int(r.releasing),
        )
        fires = fires_to_make(r.due, int(r.now))
        if not fires:
            return replace(report, next_schedule=None) if r.due else report
        return Next(self._fire_schedules(report, fires, len(r.due) // DUE_WIDTH))

    def _fire_schedules(
        self, report: MaintenanceReport, fires: list[list[str]], due: int
    ) -> Call[MaintenanceReport | Next[MaintenanceReport]]:
        packed = orjson.dumps(fires).decode()
        decode = partial(decode_fired, report, due)
        return self._script("fireSchedules", decode, self.options.ordering, packed)

    def retry_dead(
        self, job_ids: Sequence[str] | None = None, limit: int = 1000
    ) -> Call[list[str] | Next[list[str]]]:
        """Move dead jobs (given ids, else the oldest ``limit``) back with fresh
        attempts; returns the ids moved. A job added with ``depends_on`` goes back
        to blocked while a dependency has not completed (one retried in the same
        call included); it stays dead while a dependency is dead and not retried
        with it, or gone before the job ever ran (retry its dependency with it).
        Works in pages of RETRY_PAGE jobs, one script call each."""
        check_int("limit", limit, 1, 100_000)
        given = list(job_ids) if job_ids else None  # none (or []): the oldest ``limit``
        for job_id in given or ():
            ids.parse_id(job_id)
        return Revival(self, given, limit).first()

    def purge_dead(
        self, job_ids: Sequence[str] | None = None, limit: int = 1000
    ) -> Call[list[str]]:
        """Delete dead jobs for good (given ids, else the oldest ``limit``); returns their ids."""
        check_int("limit", limit, 1, 100_000)
        for job_id in job_ids or ():
            ids.parse_id(job_id)
        return self._script("purgeDead", decode_ids, str(limit), *(job_ids or ()))

    def drop_page(self, cursor: int) -> Call[int]:
        """Delete one page of this queue's keys (SCAN from ``cursor``); the reply is
        the next cursor, 0 when the whole keyspace was scanned."""
        check_int("cursor", cursor, 0, 2**64 - 1)
        return self._script("dropPage", int, str(cursor))
