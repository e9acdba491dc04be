"""Cron schedules across daylight-saving transitions, end to end on a real server
whose clock the test moves (tests/clock.py ``FrozenClock``): the fires the
workers' maintenance makes are the ones docs/lifecycle.md promises ("Cron and
time zones"), each fire time once. tests/unit/test_schedules.py checks the
same rules on the fire-time arithmetic alone.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from conftest import FrozenServer
from echomq import SyncQueue, connection
from integration.test_order_model import drop_queue, ms

BERLIN = ZoneInfo("Europe/Berlin")
STEP_MS = 30 * 60_000  # a maintenance call every half hour of server time


def last_sunday(year: int, month: int) -> date:
    day = date(year + (month == 12), month % 12 + 1, 1) - timedelta(days=1)
    return day - timedelta(days=(day.weekday() + 1) % 7)


@contextlib.contextmanager
def frozen_queue(frozen: FrozenServer, base: str) -> Iterator[SyncQueue]:
    client = connection.sync_client(frozen.url)
    queue = SyncQueue(f"{base[:100]}-{os.urandom(4).hex()}", client=client)
    try:
        yield queue
    finally:
        drop_queue(client, queue.engine.keys)
        client.close()


def fires_over_the_weekend(
    frozen: FrozenServer, queue: SyncQueue, sunday: date
) -> dict[str, list[int]]:
    """Set the server's clock to noon (Berlin) the day before ``sunday``, create the
    schedules, then run maintenance every half hour until noon on Sunday; returns
    each schedule's fire times, from the jobs the fires added."""
    saturday = datetime.combine(sunday - timedelta(days=1), datetime.min.time(), BERLIN)
    start = ms(saturday.replace(hour=12))
    frozen.clock.set(start)
    queue.schedule("fixed", cron="30 2 * * *", tz="Europe/Berlin", name="fixed")
    queue.schedule("hourly", cron="0 * * * *", tz="Europe/Berlin", name="hourly")
    cursor = queue.read_events(None).cursor
    while frozen.clock.now_ms < start + 24 * 3_600_000:
        frozen.clock.advance(STEP_MS)
        report = queue.maintain()
        assert ms(report.server_time) == frozen.clock.now_ms
    fires: dict[str, list[int]] = {"fixed": [], "hourly": []}
    while (page := queue.read_events(cursor)).events:
        cursor = page.cursor
        for e in page.events:
            if e.kind == "scheduled" and e.job_id:
                job = queue.get(e.job_id)
                assert job is not None and job.schedule_id is not None
                fires[job.schedule_id].append(ms(job.fire_time))
    return fires


def utc_hours(start: datetime, count: int) -> list[int]:
    """``count`` fire times an hour apart in real time (UTC arithmetic, not local)."""
    first = start.astimezone(UTC)
    return [ms(first + timedelta(hours=i)) for i in range(count)]


def test_spring_forward_and_fall_back_on_the_servers_clock(
    frozen_server: FrozenServer, queue_name: str
) -> None:
    """Spring forward: a fixed time in the skipped hour (02:30) fires once, at
    03:00 CEST; an hourly schedule fires every real hour (no 02:00 that night).
    Fall back: 02:30 fires once, at its first occurrence (CEST); the hourly one
    fires in the repeated hour both times. Each fire time makes one job."""
    # a year ahead of wherever the session's clock is (it only moves forward)
    year = datetime.fromtimestamp(frozen_server.clock.now_ms / 1000, UTC).year + 1
    spring, fall = last_sunday(year, 3), last_sunday(year, 10)

    with frozen_queue(frozen_server, queue_name + "-spring") as queue:
        fires = fires_over_the_weekend(frozen_server, queue, spring)
    three_cest = datetime.combine(spring, datetime.min.time(), BERLIN).replace(hour=3)
    assert fires["fixed"] == [ms(three_cest)]  # 01:00 UTC
    saturday_13 = datetime.combine(spring - timedelta(days=1), datetime.min.time(), BERLIN)
    assert fires["hourly"] == utc_hours(saturday_13.replace(hour=13), 24)

    with frozen_queue(frozen_server, queue_name + "-fall") as queue:
        fires = fires_over_the_weekend(frozen_server, queue, fall)
    half_past_two_cest = datetime.combine(fall, datetime.min.time(), BERLIN).replace(
        hour=2, minute=30, fold=0
    )
    assert half_past_two_cest.utcoffset() == timedelta(hours=2)
    assert fires["fixed"] == [ms(half_past_two_cest)]  # 00:30 UTC, not again at 01:30 UTC
    saturday_13 = datetime.combine(fall - timedelta(days=1), datetime.min.time(), BERLIN)
    # every real hour: local 02:00 comes twice (CEST, then CET)
    assert fires["hourly"] == utc_hours(saturday_13.replace(hour=13), 24)


@pytest.mark.parametrize("month", [3, 10])
def test_last_sunday(month: int) -> None:
    day = last_sunday(2027, month)
    assert day.weekday() == 6 and day.month == month and (day + timedelta(days=7)).month != month
