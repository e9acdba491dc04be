"""``lanes(limit=…)`` and ``stats(lane_limit=…)`` read a queue's lanes in pages of
bounded server work (issue 27.11; echomq.lanepages): every lane is listed once,
the ring in ring order first, and no script call does work that grows with the
number of lanes. Measured with MONITOR, which shows each command a script runs.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis

from echomq import SyncQueue
from echomq.lanepages import PAGE

pytestmark = pytest.mark.parametrize("backend", ["valkey"], indirect=True)

RING_LANES = 2 * PAGE + 57
#: lanes with controls and no waiting job: more than a listpack holds (512 fields
#: by default), which HSCAN returns whole in one step whatever COUNT says
IDLE_LANES = 3 * PAGE + 111
PARKED_LANES = 5
#: the commands one page may run: per lane (or per controls field) at most six,
#: and a few of its own (LRANGE or HSCAN, the turn, TIME, the option block)
PAGE_COMMANDS = 6 * PAGE + 20
SCRIPTS = ("fcall", "fcall_ro", "evalsha", "eval")


@contextmanager
def monitored(url: str) -> Iterator[list[list[str]]]:
    """Per script call, the commands it ran (MONITOR, from a thread of its own)."""
    calls: list[list[str]] = []
    started, stop = threading.Event(), threading.Event()
    client = redis.Redis.from_url(url, decode_responses=True, socket_timeout=10)

    def watch() -> None:
        with client.monitor() as m:  # type: ignore[no-untyped-call]
            started.set()
            for entry in m.listen():
                command = entry["command"].split(" ", 1)[0].strip('"').lower()
                if command in SCRIPTS:
                    calls.append([])
                elif entry.get("client_type") == "lua" and calls:
                    calls[-1].append(command)
                if stop.is_set() and command == "echo":
                    return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    assert started.wait(10)
    try:
        yield calls
    finally:
        stop.set()
        client.echo("stop")  # the watcher returns at this mark
        thread.join(10)
        client.close()


def seed(sq: SyncQueue) -> tuple[list[str], set[str], set[str]]:
    parked = [f"p{i}" for i in range(PARKED_LANES)]
    sq.add_many([{"name": "j", "group": g} for g in parked])
    for group in parked:
        sq.set_lane(group, paused=True)
    assert sq.claim(1) == []  # the rotation parks every paused lane
    ring = [f"r{i:04d}" for i in range(RING_LANES)]
    sq.add_many([{"name": "j", "group": g} for g in ring])
    idle = {f"c{i:04d}" for i in range(IDLE_LANES)}
    for group in idle:
        sq.set_lane(group, concurrency=3)
    return ring, set(parked), idle


def test_every_lane_is_listed_once_in_pages_of_bounded_work(
    sq: SyncQueue, backend_url: str, redis_client: Any
) -> None:
    ring, parked, idle = seed(sq)
    with monitored(backend_url) as calls:
        lanes = sq.lanes(limit=1_000_000)
        stats = sq.stats(lane_limit=1_000_000)
    groups = [lane.group for lane in lanes]
    assert groups[:RING_LANES] == ring  # the ring in ring order
    assert [lane.position for lane in lanes[:RING_LANES]] == list(range(RING_LANES))
    assert sorted(str(g) for g in groups[RING_LANES:]) == sorted(
        parked | idle
    )  # then the rest, once each
    assert all(lane.position == -1 for lane in lanes[RING_LANES:])
    assert {lane.group for lane in lanes if lane.parked} == parked
    assert list(stats.lanes)[:RING_LANES] == ring and set(stats.lanes) == set(ring) | parked
    assert stats.lanes["r0000"] == 1 and stats.lanes["p0"] == 1
    # each call's work is bounded by the page, not by the 1,300-odd lanes
    assert len(calls) >= (RING_LANES + IDLE_LANES) // PAGE
    assert max(len(c) for c in calls) <= PAGE_COMMANDS, sorted(map(len, calls))[-3:]
    # a limit stops early: the first lanes of the ring, from their first pages only
    with monitored(backend_url) as few:
        assert [lane.group for lane in sq.lanes(limit=3)] == ring[:3]
        assert list(sq.stats(lane_limit=3).lanes) == ring[:3]
    assert len(few) == 2 and max(len(c) for c in few) < 40
