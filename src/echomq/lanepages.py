"""Reading a queue's lanes in pages: ``lanes(limit=…)`` and ``stats(lane_limit=…)``.

A queue may hold 10^5 lanes; one script listing them all would hold the
server for a second. Each page is one read-only script call of bounded work
(laneList.lua: at most PAGE ring lanes, or one HSCAN step of PAGE fields of
the controls hash), and the client goes on from the page's cursor
(echomq.steps.Next) until it has ``limit`` lanes or the lanes end: first the
ring in ring order, then the lanes out of it. Pages are separate snapshots:
a lane the rotation moves while the pages are read is listed once (the first
time it is met) and may be missed; positions are those of the page that read it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from echomq.call import Call
from echomq.job import ms_to_datetime
from echomq.keys import group_of
from echomq.lanecontrols import parse_rate
from echomq.reports import LaneInfo
from echomq.steps import Next

T = TypeVar("T")

#: the most lanes (ring pages) or controls-hash fields (the other pages) one call reads.
PAGE = 200
#: Next's bound on the calls of one listing (the ring and the hash scan end sooner).
MAX_PAGES = 1_000_000
#: the fields of one lane in laneList.lua's reply.
ROW = 12

#: ``script(name, parse, *args)``: the engine's script call builder.
Script = Callable[..., Call[Any]]


def lane_info(row: list[Any], turn: list[Any], now: int) -> LaneInfo:
    """One lane of a laneList page."""
    lane, pos = row[0], int(row[1])
    left = int(turn[1]) if turn[0] == lane and turn[1] != "" and pos == 0 else None
    until = int(row[9]) if row[9] != "" and int(row[9]) > now else None
    return LaneInfo(
        group_of(lane),
        pos,
        int(row[3]),
        int(row[2]),
        int(row[4]),
        left,
        concurrency=int(row[5]) if row[5] != "" else None,
        rate=parse_rate(row[6]) if row[6] != "" else None,
        paused=row[7] == "1",
        max_waiting=int(row[8]) if row[8] != "" else None,
        active=max(0, int(row[10] or "0")),
        parked=row[11] == "1",
        throttled_until=ms_to_datetime(row[9]) if until is not None else None,
    )


class LanePages(Generic[T]):
    """One listing in progress: the lanes found so far, then ``finish(lanes)``.

    ``mode``: "all" (every lane, with controls) or "waiting" (the ring, then
    the parked lanes)."""

    def __init__(
        self,
        script: Script,
        mode: str,
        limit: int,
        finish: Callable[[list[LaneInfo]], T],
        found: list[LaneInfo] | None = None,
    ) -> None:
        self.script, self.mode, self.limit, self.finish = script, mode, limit, finish
        self.found = found or []
        self.seen = {lane.group for lane in self.found}

    def call(self, phase: str = "r", cursor: str = "0") -> Call[T | Next[T]]:
        """The laneList call of the page at ``phase``/``cursor``."""
        size = min(PAGE, self.limit - len(self.found)) if phase == "r" else PAGE
        return self.script("laneList", self._parse, self.mode, phase, cursor, str(size))

    def go_on(self, phase: str, cursor: str) -> T | Next[T]:
        """The result, or the next page's call when the lanes go on past ``phase``."""
        if phase == "" or len(self.found) >= self.limit:
            return self.finish(self.found[: self.limit])
        return Next(self.call(phase, cursor), most=MAX_PAGES)

    def _parse(self, reply: Any) -> T | Next[T]:
        flat, turn, now = reply[0], reply[1], int(reply[2])
        for i in range(0, len(flat), ROW):
            lane = lane_info(flat[i : i + ROW], turn, now)
            if lane.group not in self.seen:
                self.seen.add(lane.group)
                self.found.append(lane)
        return self.go_on(str(reply[3]), str(reply[4]))
