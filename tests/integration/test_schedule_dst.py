"""Cron schedules in a named zone across a spring-forward and a fall-back, fired
through the queue: the real scripts (maintain.lua, fireSchedules.lua) on a
server whose clock the test sets (tests/clock.py), stepped through two
days around each of Europe/Berlin's 2026 transitions.

Why: a fire time is computed by the client from the server's clock and
stored (echomq/schedules.py); this checks, end to end, that the jobs the
queue adds carry exactly the fire times cronsim defines across both
transitions (tests/unit/test_schedules.py checks the computation alone),
each once.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim

from clock import frozen_server
from echomq import Job, SyncQueue
from servers import require_server

pytestmark = pytest.mark.timeout(120)

BERLIN = ZoneInfo("Europe/Berlin")
#: how far the test moves the server's clock between two maintain() calls
#: (shorter than every period below, so no fire is ever late).
STEP = timedelta(minutes=10)
CRONS = {
    "daily-0230": "30 2 * * *",  # a fixed time inside the skipped / repeated hour
    "half-hourly": "*/30 * * * *",  # wildcard hours: every real half hour
    "daily-0300": "0 3 * * *",  # a fixed time just after the skipped hour
}
#: two days around each transition: 2026-03-29 02:00 CET -> 03:00 CEST
#: (01:00 UTC), 2026-10-25 03:00 CEST -> 02:00 CET (01:00 UTC).
WINDOWS = {
    "spring-forward": (datetime(2026, 3, 27, 22, tzinfo=UTC), datetime(2026, 3, 30, 2, tzinfo=UTC)),
    "fall-back": (datetime(2026, 10, 23, 22, tzinfo=UTC), datetime(2026, 10, 26, 2, tzinfo=UTC)),
}
#: the fixed-time fires on and around each transition day, as cronsim (Debian
#: cron's rules) defines them, in UTC: in the skipped hour 02:30 runs once, at
#: 03:00 CEST; in the repeated hour it runs once, at its first (CEST) occurrence.
PINNED = {
    ("spring-forward", "daily-0230"): ["03-28T01:30", "03-29T01:00", "03-30T00:30"],
    ("spring-forward", "daily-0300"): ["03-28T02:00", "03-29T01:00", "03-30T01:00"],
    ("fall-back", "daily-0230"): ["10-24T00:30", "10-25T00:30", "10-26T01:30"],
    ("fall-back", "daily-0300"): ["10-24T01:00", "10-25T02:00", "10-26T02:00"],
}


def cronsim_next(cron: str, after: datetime) -> datetime:
    """cronsim's first fire time after ``after`` in real time, in UTC.

    From the second pass of a repeated hour cronsim first yields that hour's
    first-pass matches (each fixed time runs once, at its first occurrence),
    which are in the past: skipped. (In UTC: an aware datetime in a repeated
    hour never compares equal to one of another zone.)"""
    for fire in CronSim(cron, after.astimezone(BERLIN)):
        if fire.astimezone(UTC) > after:
            return fire.astimezone(UTC)
    raise AssertionError("unreachable: cronsim yields forever")


def cronsim_fires(cron: str, after: datetime, until: datetime) -> list[datetime]:
    """Each next fire time from ``after`` on, up to ``until``, in UTC."""
    out: list[datetime] = []
    while (after := cronsim_next(cron, after)) <= until:
        out.append(after)
    return out


def steps(start: datetime, end: datetime) -> Iterator[datetime]:
    at = start
    while at < end:
        at = min(at + STEP, end)
        yield at


def fired(queue: SyncQueue, schedule_id: str) -> list[Job]:
    jobs = [j for j in queue.jobs("waiting", count=10_000) if j.schedule_id == schedule_id]
    return sorted(jobs, key=lambda j: j.fire_time or datetime.min)


def utc_text(moments: list[datetime]) -> list[str]:
    return [m.astimezone(UTC).strftime("%m-%dT%H:%M") for m in moments]


#: Valkey 8.1 and 9. Debian's redis-server is left out: its allocator (jemalloc) reads
#: the clock before libfaketime is initialised and the server never starts under it;
#: the fire path is the same scripts and client code on every backend.
KINDS = ("valkey", "valkey9")


@pytest.mark.parametrize("window", list(WINDOWS))
@pytest.mark.parametrize("kind", KINDS)
def test_cron_in_a_named_zone_across_a_transition_through_the_queue(
    kind: str, window: str, tmp_path: Path, queue_name: str
) -> None:
    require_server(kind)
    start, end = WINDOWS[window]
    server, clock = frozen_server(kind, tmp_path, start)
    try:
        with SyncQueue(queue_name, server.url) as queue:
            assert queue.maintain().server_time == start  # the server reads the test's clock
            for schedule_id, cron in CRONS.items():
                nxt = queue.schedule(schedule_id, cron=cron, tz="Europe/Berlin", name="j")
                assert nxt == cronsim_fires(cron, start, end)[0]
            for moment in steps(start, end):
                clock.set_moment(moment)
                queue.maintain()
                for info in queue.schedules():  # the stored next fire is cronsim's next
                    assert info.next_fire == cronsim_next(CRONS[info.id], moment), info.id
            for schedule_id, cron in CRONS.items():
                jobs = fired(queue, schedule_id)
                times = [j.fire_time for j in jobs]
                assert times == cronsim_fires(cron, start, end), schedule_id
                # each made at its fire time or within one step after it, by the server's clock
                for job in jobs:
                    assert job.fire_time is not None and job.created_at is not None
                    assert job.fire_time <= job.created_at < job.fire_time + STEP
            pinned = {k: v for (w, k), v in PINNED.items() if w == window}
            for schedule_id, expected in pinned.items():
                days = [j.fire_time for j in fired(queue, schedule_id) if j.fire_time]
                assert utc_text(days) == expected, schedule_id
            # wildcard hours follow real time: exactly 30 real minutes apart, none lost or doubled
            halves = [j.fire_time for j in fired(queue, "half-hourly") if j.fire_time]
            assert {b - a for a, b in pairwise(halves)} == {timedelta(minutes=30)}
            assert len(halves) == (end - start) // timedelta(minutes=30)
    finally:
        server.stop()


@pytest.mark.parametrize("kind", KINDS)
def test_created_in_the_repeated_hour_a_fixed_time_fires_next_day_once(
    kind: str, tmp_path: Path, queue_name: str
) -> None:
    """02:10 CET on 2026-10-25 is the second pass of the repeated hour: 02:30 ran
    already (its CEST occurrence, cronsim's only one), so the next fire is the next
    day's, not 02:30 CEST again, which is in the past (and would fire at every call)."""
    start = datetime(2026, 10, 25, 1, 10, tzinfo=UTC)  # 02:10 CET, after the fall-back
    server, clock = frozen_server(kind, tmp_path, start)
    try:
        with SyncQueue(queue_name, server.url) as queue:
            nxt = queue.schedule("d", cron="30 2 * * *", tz="Europe/Berlin", name="j")
            assert nxt == datetime(2026, 10, 26, 1, 30, tzinfo=UTC)
            clock.set_moment(start + timedelta(minutes=30))  # 02:40 CET
            assert queue.maintain().fired == 0
            clock.set_moment(datetime(2026, 10, 26, 1, 30, tzinfo=UTC))
            assert queue.maintain().fired == 1 and queue.maintain().fired == 0
            assert [j.fire_time for j in fired(queue, "d")] == [nxt]
    finally:
        server.stop()


def test_the_clock_is_the_servers(tmp_path: Path, queue_name: str) -> None:
    """The frozen clock moves only when set: a guard for the test above."""
    require_server("valkey")
    start = datetime(2026, 3, 29, 0, 59, 50, tzinfo=UTC)
    server, clock = frozen_server("valkey", tmp_path, start)
    try:
        with SyncQueue(queue_name, server.url) as queue:
            assert queue.maintain().server_time == start
            assert queue.maintain().server_time == start
            clock.set_moment(start + timedelta(hours=1))
            assert queue.maintain().server_time == start + timedelta(hours=1)
    finally:
        server.stop()
