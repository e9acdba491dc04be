"""Reading the queue: pages of jobs by state, its stats, waiting for a job to
finish (watch), and its event stream (read_events, wait_for_events)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, NamedTuple, overload

from echomq import lanepages
from echomq.call import Call
from echomq.engine.base import EngineBase, find, names_a_job
from echomq.engine.replies import check_code, listed_jobs, ms, pairs
from echomq.errors import InvalidOption
from echomq.events import Event, EventPage, check_event_id, parse_entry, parse_page
from echomq.job import LISTED_STATES, Job, State
from echomq.keys import group_of, lane_of
from echomq.options import check_int, check_job_name, check_seconds
from echomq.position import Position, decode_position
from echomq.reports import LaneInfo, QueueStats
from echomq.steps import Next
from echomq.tags import MAX_FIND_COUNT, JobPage, check_cursor, encode_tags, wrap_cursor

#: the states a page of jobs can be listed from besides ``waiting`` (one lane).
FINISHED_SETS = tuple(state for state in LISTED_STATES if state != State.WAITING)
#: a summary listing (``jobs(..., summary=True)``) leaves out data, result,
#: traceback and progress, and cuts the error to this many bytes on the server.
SUMMARY_ERROR_BYTES = 1024
#: stream entries one read of the event stream returns by default, and at most
#: (an entry holds up to 500 events: includes/events.lua).
EVENT_PAGE = 20
MAX_EVENT_PAGE = 200
#: stream entries ``job_events`` reads by default (the newest).
JOB_EVENT_ENTRIES = 50
#: the most jobs one ``names`` call names.
MAX_NAMES = 100
#: the longest wait() (seconds): a day.
MAX_WAIT = 86_400.0
#: a wait's entry on the server outlives the client's own timeout by this much
#: (ms), so a job that finishes as the client's time runs out still wakes it.
WAIT_SLACK_MS = 1000
#: stats.lua's totals, in order ("lost" where the server counts it).
TOTALS = ("added", "completed", "failed", "lost")


class StatsReply(NamedTuple):
    """stats.lua's reply (its header: counts, lanes, turn, totals, last, more)."""

    counts: list[Any]
    lanes: list[Any]
    turn: list[Any]
    totals: list[Any]
    last: Any
    more: list[Any]


class StateCounts(NamedTuple):
    """stats.lua's counts: one per state (State's names), then the queue's own."""

    waiting: str
    delayed: str
    failed: str
    active: str
    completed: str
    dead: str
    ring_length: str
    paused: str
    ordering: str
    counter: str
    blocked: str = "0"
    cancelled: str = "0"


class RingLane(NamedTuple):
    """One lane of stats.lua's first ring page."""

    lane: str
    backlog: str
    weight: str
    served: str


def ring_lanes(flat: list[Any]) -> list[LaneInfo]:
    """stats.lua's first ring page, in ring order."""
    width = len(RingLane._fields)
    lanes = (RingLane(*flat[i : i + width]) for i in range(0, len(flat), width))
    return [
        LaneInfo(group_of(r.lane), position, int(r.weight), int(r.backlog), int(r.served))
        for position, r in enumerate(lanes)
    ]


def decode_watch(job_id: str, detail: str, reply: Any) -> Job | None:
    """wait.lua's reply: 0 (the wait is registered), the final job's hash, or a code."""
    check_code(reply, detail)
    if reply == 0:
        return None
    return Job.from_hash(job_id, pairs(reply))


def found_jobs(query: str, reply: Any) -> JobPage:
    """findJobs.lua's and listJobs.lua's cursor reply: the position ("" = no
    more), then one entry per job; the position becomes ``query``'s cursor."""
    position, *entries = reply
    return JobPage(listed_jobs(entries), wrap_cursor(position, query))


def events_of(job_id: str, reply: Any) -> list[Event]:
    """XREVRANGE's entries (newest first): ``job_id``'s events, oldest first.
    (redis-py gives each entry's fields as a dict; a script gives a flat list.)"""
    entries = [
        (entry_id, [x for pair in fields.items() for x in pair])
        if isinstance(fields, dict)
        else (entry_id, fields)
        for entry_id, fields in reversed(reply)
    ]
    return [e for entry in entries for e in parse_entry(entry) if e.job_id == job_id]


def stream_moved(reply: Any) -> bool:
    """XREAD's reply: something (an event came) or nothing (timeout)."""
    return bool(reply)


class ReadCalls(EngineBase):
    """Listing jobs, the queue's stats, waiting for a job, the event stream."""

    @overload
    def jobs(
        self,
        state: str,
        *,
        offset: int = 0,
        count: int = 100,
        group: str | None = None,
        summary: bool = False,
        cursor: None = None,
    ) -> Call[list[Job]]: ...
    @overload
    def jobs(
        self,
        state: str,
        *,
        offset: int = 0,
        count: int = 100,
        group: str | None = None,
        summary: bool = False,
        cursor: str,
    ) -> Call[JobPage]: ...
    def jobs(
        self,
        state: str,
        *,
        offset: int = 0,
        count: int = 100,
        group: str | None = None,
        summary: bool = False,
        cursor: str | None = None,
    ) -> Call[list[Job]] | Call[JobPage]:
        """A page of jobs in one state (``waiting`` lists one lane in claim order).

        By ``offset``; or, given a ``cursor`` ("" for the first page), a
        :class:`~echomq.tags.JobPage` whose cursor goes on after it (listJobs.lua
        says what a job that moves meanwhile does). ``summary``: read only what a
        list row shows (see SUMMARY_ERROR_BYTES)."""
        check_int("offset", offset, 0, 10**9)
        check_int("count", count, 1, 10_000 if cursor is None else MAX_FIND_COUNT)
        if state == State.WAITING:
            target, newest = "lane:" + lane_of(group), "0"
        elif state in FINISHED_SETS:
            newest = "1" if state in (State.COMPLETED, State.DEAD, State.CANCELLED) else "0"
            target = state
        else:
            raise InvalidOption(f"state {state!r} is not one of {', '.join(LISTED_STATES)}")
        preview = str(SUMMARY_ERROR_BYTES if summary else 0)
        args = [target, str(offset), str(count), newest, preview]
        if cursor is None:
            return self._script("listJobs", listed_jobs, *args)
        query = f"jobs {target} {newest}"
        position = check_cursor(cursor, query) or "-"
        return self._script("listJobs", partial(found_jobs, query), *args, position)

    def find(
        self,
        tags: Mapping[str, str] | None = None,
        *,
        state: str | None = None,
        name: str | None = None,
        cursor: str | None = None,
        count: int = 50,
        summary: bool = False,
    ) -> Call[JobPage]:
        """A page of the jobs that carry every tag of ``tags`` (and are in ``state``
        and named ``name`` when given), newest first by creation; the page's cursor
        continues after it (findJobs.lua: bounded work, so a page may be short and
        still carry a cursor)."""
        if tags is None:
            raise InvalidOption(
                "find needs tags: a job is found by its tags (list a state with jobs(state))"
            )
        wanted = encode_tags(tags)
        if state is not None and state not in LISTED_STATES:
            raise InvalidOption(f"state {state!r} is not one of {', '.join(LISTED_STATES)}")
        if name is not None:
            check_job_name(name)
        check_int("count", count, 1, MAX_FIND_COUNT)
        query = f"find {wanted} {state or ''} {name or ''}"
        start = "" if cursor is None else check_cursor(cursor, query)
        preview = str(SUMMARY_ERROR_BYTES if summary else 0)
        parse = partial(found_jobs, query)
        return self._script(
            "findJobs", parse, wanted, state or "", name or "", start, str(count), preview
        )

    def names(self, job_ids: Sequence[str]) -> Call[dict[str, str | None]]:
        """The names of up to MAX_NAMES jobs, by id (None: no such job)."""
        given = list(job_ids)
        check_int("job ids", len(given), 0, MAX_NAMES)
        wanted = [job_id for job_id in given if names_a_job(job_id)]
        if not wanted:
            # (no job to read: a call that touches the queue's slot and reads nothing)
            return Call(parse=lambda _: dict.fromkeys(given), command=("EXISTS", self.keys.job("")))

        def decode(reply: Any) -> dict[str, str | None]:
            found = {job_id: name or None for job_id, name in zip(wanted, reply, strict=True)}
            return {job_id: found.get(job_id) for job_id in given}

        return self._script("jobNames", decode, *wanted)

    def dead(self, *, offset: int = 0, count: int = 100) -> Call[list[Job]]:
        """Dead jobs, newest first, with their last error."""
        return self.jobs(State.DEAD, offset=offset, count=count)

    def stats(self, lane_limit: int = 1000) -> Call[QueueStats | Next[QueueStats]]:
        """Counts by state and waiting jobs by lane: the ring's lanes in ring order,
        then the parked lanes, at most ``lane_limit``. One script call for the
        counts and the ring's first lanes, then a bounded call per further page
        of lanes (echomq.lanepages)."""
        check_int("lane_limit", lane_limit, 1, 1_000_000)
        first = min(lane_limit, lanepages.PAGE)
        return self._script("stats", partial(self._decode_stats, lane_limit), str(first))

    def _decode_stats(self, lane_limit: int, raw: Any) -> QueueStats | Next[QueueStats]:
        reply = StatsReply(*raw)
        c = StateCounts(*reply.counts)
        stats = QueueStats(
            self.queue,
            {state: int(getattr(c, state)) for state in LISTED_STATES},
            {},
            int(c.ring_length),
            c.paused == "1",
            c.ordering or "",
            int(c.counter),
            dict(zip(TOTALS, map(int, reply.totals), strict=False)),
            ms(reply.last) if reply.last != "" else None,
        )

        def finish(lanes: list[LaneInfo]) -> QueueStats:
            return replace(stats, lanes={lane.group: lane.backlog for lane in lanes})

        ring = ring_lanes(reply.lanes)
        pages = lanepages.LanePages(self._script, "waiting", lane_limit, finish, ring)
        phase, cursor = reply.more
        return pages.go_on(str(phase), str(cursor))

    # -- where a job stands ---------------------------------------------------
    def position(self, job_id: str) -> Call[Position]:
        """Where a waiting job stands (echomq.position.Position): its rank in its
        lane, the claims the rotation makes before it, an estimate of the wait.
        JobNotFound for an unknown id, InvalidState for a job not waiting."""
        find(job_id, self.queue)
        return self._script("position", partial(decode_position, self.queue, job_id), job_id)

    # -- waiting for a job ----------------------------------------------------
    def watch(self, job_id: str, timeout: float) -> Call[Job | None]:
        """Register a wait on ``job_id`` for ``timeout`` seconds (server clock), or read
        the job at once: the reply is the Job if it is completed or dead, else None
        (the wait is registered: the server publishes the id on the queue's done
        channel when the job becomes final). JobNotFound for an unknown id.
        ``Queue.wait`` subscribes first, then sends this (echomq.flows.waiters)."""
        find(job_id, self.queue)
        seconds = check_seconds("wait timeout", timeout, 0.0, MAX_WAIT, open_low=False)
        wait_ms = math.ceil(seconds * 1000) + WAIT_SLACK_MS
        decode = partial(decode_watch, job_id, f"job {job_id}: no such job to wait for")
        return self._script("wait", decode, job_id, str(wait_ms))

    # -- events ----------------------------------------------------------------
    def read_events(self, after: str | None, count: int = EVENT_PAGE) -> Call[EventPage]:
        """One page of the queue's event stream after event id ``after`` (exclusive;
        None: no events, the cursor is the last event's id, i.e. "from now"): at
        most ``count`` stream entries (an entry holds the events of one call)."""
        cursor = "" if after is None else check_event_id(after)
        check_int("count", count, 1, MAX_EVENT_PAGE)
        return self._script(
            "readEvents", partial(parse_page, after=cursor, count=count), cursor, str(count)
        )

    def job_events(self, job_id: str, *, entries: int = JOB_EVENT_ENTRIES) -> Call[list[Event]]:
        """The events of one job that the newest ``entries`` entries of the stream
        still hold, oldest first (the stream is capped: an older job's first
        events may be gone; an entry holds the events of one call)."""
        check_int("entries", entries, 1, MAX_EVENT_PAGE)
        return Call(
            parse=partial(events_of, job_id),
            command=("XREVRANGE", self.keys.events, "+", "-", "COUNT", entries),
        )

    def wait_for_events(self, after: str, timeout: float, longest: float) -> Call[bool]:
        """Block up to ``timeout`` seconds (at most ``longest``) until the stream has
        an event after ``after``; True if one came."""
        block_ms = max(1, math.ceil(min(timeout, longest) * 1000))
        return Call(
            parse=stream_moved,
            command=(
                "XREAD",
                "COUNT",
                1,
                "BLOCK",
                block_ms,
                "STREAMS",
                self.keys.events,
                f"{after}-0",
            ),
            blocks=block_ms / 1000,
        )
