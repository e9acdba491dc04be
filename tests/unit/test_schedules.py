"""Fire times (echomq.schedules, no server): cron in a named zone across both
daylight-saving transitions, intervals, catch-up and missed-fire planning."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from echomq import InvalidSchedule
from echomq.schedules import SKIP_MISSED, Definition, ScheduleInfo, Timing, plan_fire

BERLIN = "Europe/Berlin"


def ms(iso: str) -> int:
    return round(datetime.fromisoformat(iso).timestamp() * 1000)


def fires(timing: Timing, start: str, n: int) -> list[str]:
    """The next ``n`` fire times after ``start``, as UTC ``MM-DDTHH:MM``."""
    out, at = [], ms(start)
    for _ in range(n):
        at = timing.next_after(at)
        out.append(datetime.fromtimestamp(at / 1000, UTC).strftime("%m-%dT%H:%M"))
    return out


def test_spring_forward_a_fixed_time_in_the_skipped_hour_runs_once_after_it() -> None:
    # 2026-03-29: Berlin goes from 02:00 CET (UTC+1) to 03:00 CEST (UTC+2)
    daily = Timing.checked("30 2 * * *", None, BERLIN)
    # 02:30 CET = 01:30 UTC; on the 29th 02:30 does not exist: 03:00 CEST = 01:00 UTC
    assert fires(daily, "2026-03-27T12:00:00+00:00", 3) == [
        "03-28T01:30",
        "03-29T01:00",
        "03-30T00:30",
    ]


def test_fall_back_a_fixed_time_in_the_repeated_hour_runs_once() -> None:
    # 2026-10-25: Berlin goes from 03:00 CEST back to 02:00 CET
    daily = Timing.checked("30 2 * * *", None, BERLIN)
    # 02:30 CEST = 00:30 UTC, the first occurrence only (not 02:30 CET = 01:30 UTC)
    assert fires(daily, "2026-10-23T12:00:00+00:00", 3) == [
        "10-24T00:30",
        "10-25T00:30",
        "10-26T01:30",
    ]


def test_from_the_second_pass_of_the_repeated_hour_the_next_fire_is_ahead() -> None:
    # 01:10 UTC on 2026-10-25 is 02:10 CET, the second pass: cronsim names 02:30 CEST
    # (00:30 UTC, past) first; the next fire is the next day's 02:30 CET
    daily = Timing.checked("30 2 * * *", None, BERLIN)
    assert fires(daily, "2026-10-25T01:10:00+00:00", 2) == ["10-26T01:30", "10-27T01:30"]
    # several fixed minutes of the hour: every past one skipped; wildcards are unaffected
    twice = Timing.checked("15,45 2 * * *", None, BERLIN)
    assert fires(twice, "2026-10-25T01:10:00+00:00", 2) == ["10-26T01:15", "10-26T01:45"]
    minutely = Timing.checked("* 2 * * *", None, BERLIN)
    assert fires(minutely, "2026-10-25T01:00:00+00:00", 2) == ["10-25T01:01", "10-25T01:02"]


def test_wildcard_hours_follow_real_time_across_both_transitions() -> None:
    half_hourly = Timing.checked("*/30 * * * *", None, BERLIN)
    # fall back: 02:00 and 02:30 happen twice (CEST then CET), both fire
    assert fires(half_hourly, "2026-10-24T23:50:00+00:00", 4) == [
        "10-25T00:00",
        "10-25T00:30",
        "10-25T01:00",
        "10-25T01:30",
    ]
    # spring forward: every real half hour, none lost
    assert fires(half_hourly, "2026-03-29T00:10:00+00:00", 3) == [
        "03-29T00:30",
        "03-29T01:00",
        "03-29T01:30",
    ]


def test_utc_cron_and_the_first_fire_is_strictly_after() -> None:
    minutely = Timing.checked("* * * * *", None, "UTC")
    at = ms("2026-01-01T10:00:00+00:00")
    assert minutely.next_after(at) == at + 60_000
    assert minutely.next_after(at - 1) == at
    assert minutely.next_after(at + 999) == at + 60_000


def test_every_counts_from_its_anchor() -> None:
    every = Timing(None, 1500, "UTC", anchor_ms=1000)
    assert [every.next_after(x) for x in (1000, 2499, 2500, 2501)] == [2500, 2500, 4000, 4000]
    assert Timing.checked(None, 0.25, "UTC").every_ms == 250


@pytest.mark.parametrize(
    ("cron", "every", "tz"),
    [
        ("61 * * * *", None, "UTC"),
        ("* * * *", None, "UTC"),
        ("0 0 31 2 *", None, "UTC"),
        ("0 3 * * *", None, "Nowhere/Else"),
        ("0 3 * * *", None, 3),
        (None, 0, "UTC"),
        (None, 0.0001, "UTC"),
        (None, float("inf"), "UTC"),
        (None, None, "UTC"),
        ("* * * * *", 5, "UTC"),
    ],
)
def test_bad_timing_is_refused(cron: object, every: object, tz: object) -> None:
    with pytest.raises(InvalidSchedule):
        Timing.checked(cron, every, tz)


def definition(catch_up: bool, every_ms: int = 1000) -> Definition:
    return Definition(Timing(None, every_ms, "UTC", 0), "j", "null", 0, "", 1, False, catch_up)


def test_catch_up_makes_one_job_and_jumps_past_now() -> None:
    # fire at 1000 seen at 5300: one job, next fire 6000 (2000..5000 collapse)
    assert plan_fire(definition(True), 1000, 5300) == (6000, "")
    # on time: the next one
    assert plan_fire(definition(True), 1000, 1010) == (2000, "")


def test_catch_up_false_skips_a_fire_later_than_one_period_or_a_minute() -> None:
    assert plan_fire(definition(False), 1000, 1900) == (2000, "")
    assert plan_fire(definition(False), 1000, 2100) == (3000, SKIP_MISSED)
    hourly = definition(False, every_ms=3_600_000)
    assert plan_fire(hourly, 0, 59_000)[1] == ""
    assert plan_fire(hourly, 0, 61_000)[1] == SKIP_MISSED


def test_a_definition_round_trips() -> None:
    d = Definition(Timing("0 3 * * *", None, BERLIN, 7), "n", '{"a":1}', 3, "g", 5, True, False, 9)
    assert Definition.decode(d.encode()) == d
    row = ["sid", d.encode(), "123", '{"t":"100","j":"job_x","k":2,"ks":"running"}', ""]
    info = ScheduleInfo.from_row(row)
    assert (info.cron, info.tz, info.data, info.group, info.priority) == (
        "0 3 * * *",
        BERLIN,
        {"a": 1},
        "g",
        3,
    )
    assert info.last_outcome == "gone" and info.skipped == 2 and info.last_skip == "running"
    assert info.next_fire == datetime.fromtimestamp(0.123, UTC)
