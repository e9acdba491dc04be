"""Schedules (DESIGN §8): stored on the server, fired by maintenance and workers,
each fire time exactly once however many firers race (a compare-and-set in
fireSchedules.lua), one catch-up job for fires missed while nothing ran."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import redis

from clock import server_ms, to_ms, wait_past
from conftest import FrozenServer
from echomq import InvalidSchedule, Job, Queue, State, SyncQueue, Worker
from echomq.errors import InvalidName, InvalidOption, PayloadError
from echomq.schedules import MAX_SCHEDULES
from keyspace import keyspace

pytestmark = pytest.mark.timeout(120)


def fired_jobs(sq: SyncQueue, schedule_id: str, group: str | None = None) -> list[Job]:
    """Every waiting, active or completed job that ``schedule_id`` added."""
    out = []
    for state in ("waiting", "active", "completed"):
        jobs = sq.jobs(state, count=10_000, group=group)
        out += [j for j in jobs if j.schedule_id == schedule_id]
    return out


def fire_times_ms(jobs: list[Job]) -> list[int]:
    return sorted(round(j.fire_time.timestamp() * 1000) for j in jobs if j.fire_time)


def info(sq: SyncQueue, schedule_id: str) -> Any:
    return next(s for s in sq.schedules() if s.id == schedule_id)


def test_create_list_replace_remove(sq: SyncQueue, redis_client: redis.Redis) -> None:
    before = server_ms(redis_client)
    nxt = sq.schedule(
        "nightly",
        cron="0 3 * * *",
        tz="Europe/Berlin",
        name="report",
        data={"kind": "daily"},
        priority=2,
        group="acme",
        max_attempts=4,
    )
    assert nxt is not None and nxt.timestamp() * 1000 > before
    assert nxt.astimezone(ZoneInfo("Europe/Berlin")).hour == 3
    [s] = sq.schedules()
    assert (s.id, s.name, s.cron, s.every) == ("nightly", "report", "0 3 * * *", None)
    assert s.tz == "Europe/Berlin"
    assert (s.data, s.priority, s.group, s.max_attempts) == ({"kind": "daily"}, 2, "acme", 4)
    assert s.next_fire == nxt and not s.paused
    assert s.last_fire is None and s.last_outcome is None and s.skipped == 0

    # a replace with the same timing keeps the next fire time; the job part changes
    assert sq.schedule("nightly", cron="0 3 * * *", tz="Europe/Berlin", name="report2") == nxt
    s = info(sq, "nightly")
    assert (s.name, s.data, s.priority, s.group) == ("report2", None, 0, None)
    # another timing: a new next fire time
    every = sq.schedule("nightly", every=5, name="report2")
    assert every is not None and every != nxt and s.every is None
    assert info(sq, "nightly").every == 5.0
    sq.schedule("other", every=60, name="x")
    assert [s.id for s in sq.schedules()] == ["nightly", "other"]

    assert sq.unschedule("nightly") is True
    assert sq.unschedule("nightly") is False
    assert [s.id for s in sq.schedules()] == ["other"]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"cron": "61 * * * *"}, InvalidSchedule),
        ({"cron": "* * *"}, InvalidSchedule),
        ({"cron": "0 * * * * *"}, InvalidSchedule),  # 6 fields: not standard cron
        ({"cron": "0 0 31 2 *"}, InvalidSchedule),  # never fires
        ({"cron": "@daily"}, InvalidSchedule),
        ({"cron": 5}, InvalidSchedule),
        ({"cron": "0 3 * * *", "tz": "Mars/Olympus"}, InvalidSchedule),
        ({"cron": "0 3 * * *", "tz": ""}, InvalidSchedule),
        ({"cron": "0 3 * * *", "tz": "../../etc/passwd"}, InvalidSchedule),
        ({"every": 0}, InvalidSchedule),
        ({"every": -1}, InvalidSchedule),
        ({"every": float("nan")}, InvalidSchedule),
        ({"every": True}, InvalidSchedule),
        ({"every": "5"}, InvalidSchedule),
        ({"every": 1e12}, InvalidSchedule),
        ({}, InvalidSchedule),
        ({"cron": "* * * * *", "every": 5}, InvalidSchedule),
        ({"every": 5, "priority": -1}, Exception),
        ({"every": 5, "group": "a b"}, InvalidName),
        ({"every": 5, "max_attempts": 0}, InvalidOption),
        ({"every": 5, "data": {1, 2}}, PayloadError),
        ({"every": 5, "name": ""}, InvalidOption),
        ({"every": 5, "catch_up": "no"}, InvalidOption),
    ],
)
def test_bad_input_writes_nothing(
    sq: SyncQueue, redis_client: redis.Redis, kwargs: dict[str, Any], error: type[Exception]
) -> None:
    sq.schedule("keep", every=60, name="x")
    before = keyspace(redis_client, sq.name)
    options: dict[str, Any] = {"name": "job", **kwargs}
    with pytest.raises(error):
        sq.schedule("s1", **options)
    with pytest.raises(InvalidSchedule):
        sq.schedule("bad id", every=5, name="x")
    assert keyspace(redis_client, sq.name) == before


def test_the_schedule_limit_writes_nothing(sq: SyncQueue, redis_client: redis.Redis) -> None:
    pipe = redis_client.pipeline(transaction=False)
    for i in range(MAX_SCHEDULES):
        pipe.hset(sq.engine.keys.schedules, f"filler{i}", "{}")
    pipe.execute()
    before = keyspace(redis_client, sq.name)
    with pytest.raises(InvalidSchedule, match="limit"):
        sq.schedule("one-more", every=5, name="x")
    assert keyspace(redis_client, sq.name) == before


def test_a_fire_adds_one_job_with_the_schedule_fields(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    nxt = sq.schedule(
        "tick", every=0.3, name="tick", data=[1, 2], priority=1, group="g1", max_attempts=3
    )
    assert nxt is not None
    assert sq.maintain().fired == 0  # not due yet
    wait_past(redis_client, nxt)
    report = sq.maintain()
    assert report.fired == 1 and report.next_schedule is not None
    assert report.next_schedule > report.server_time
    [job] = fired_jobs(sq, "tick", "g1")
    assert (job.name, job.data, job.priority, job.group) == ("tick", [1, 2], 1, "g1")
    assert job.max_attempts == 3
    assert job.fire_time == nxt and job.state is State.WAITING
    s = info(sq, "tick")
    assert s.last_fire == nxt and s.last_job_id == job.id and s.last_outcome == "waiting"
    assert s.next_fire == report.next_schedule
    # the job's outcome follows the job
    [claimed] = sq.claim(1)
    sq.complete(claimed, "ok")
    assert info(sq, "tick").last_outcome == "completed"
    sq.remove(job.id)
    assert info(sq, "tick").last_outcome == "gone"


def test_missed_fires_yield_one_catch_up_job(sq: SyncQueue, redis_client: redis.Redis) -> None:
    first = sq.schedule("often", every=0.5, name="j")
    assert first is not None
    # nothing runs for two periods: three fire times missed, the next one ~500 ms
    # away when maintenance runs (a margin for the second maintain() below)
    wait_past(redis_client, first + timedelta(seconds=1.0))
    report = sq.maintain()
    assert report.fired == 1
    [job] = fired_jobs(sq, "often")
    assert job.fire_time == first  # the oldest missed fire time, once
    assert report.next_schedule is not None and report.next_schedule > report.server_time
    assert sq.maintain().fired == 0  # the next fire is in the future again


def test_catch_up_false_skips_a_late_fire(sq: SyncQueue, redis_client: redis.Redis) -> None:
    first = sq.schedule("strict", every=0.25, name="j", catch_up=False)
    assert first is not None
    wait_past(redis_client, first + timedelta(seconds=0.6))
    report = sq.maintain()
    assert (report.fired, report.skipped) == (0, 1)
    assert fired_jobs(sq, "strict") == []
    s = info(sq, "strict")
    assert s.skipped == 1 and s.last_skip == "missed" and s.last_fire is None


def test_skip_if_running(sq: SyncQueue, redis_client: redis.Redis) -> None:
    nxt = sq.schedule("solo", every=0.3, name="j", skip_if_running=True)
    assert nxt is not None
    wait_past(redis_client, nxt)
    assert sq.maintain().fired == 1
    # the first job still waits: the next fire is skipped
    wait_past(redis_client, info(sq, "solo").next_fire)
    report = sq.maintain()
    assert (report.fired, report.skipped) == (0, 1)
    s = info(sq, "solo")
    assert s.last_skip == "running" and s.last_outcome == "waiting"
    # still running (active): skipped again
    [job] = sq.claim(1)
    wait_past(redis_client, s.next_fire)
    assert sq.maintain().skipped == 1
    # once it completed, the next fire adds a job
    sq.complete(job, None)
    wait_past(redis_client, info(sq, "solo").next_fire)
    assert sq.maintain().fired == 1
    assert len(fired_jobs(sq, "solo")) == 2
    assert info(sq, "solo").skipped == 2


def test_pause_and_resume(sq: SyncQueue, redis_client: redis.Redis) -> None:
    nxt = sq.schedule("p", every=0.3, name="j")
    assert nxt is not None
    assert sq.pause_schedule("p") is True
    s = info(sq, "p")
    assert s.paused and s.next_fire is None
    wait_past(redis_client, nxt + timedelta(seconds=0.3))
    assert sq.maintain().fired == 0
    # a replace keeps it paused
    assert sq.schedule("p", every=0.3, name="j2") is None
    assert info(sq, "p").paused
    assert sq.resume_schedule("p") is True
    s = info(sq, "p")
    assert not s.paused and s.next_fire is not None
    assert s.next_fire.timestamp() * 1000 > server_ms(redis_client) - 300  # no catch-up
    wait_past(redis_client, s.next_fire)
    assert sq.maintain().fired == 1
    assert sq.pause_schedule("nope") is False and sq.resume_schedule("nope") is False


def test_racing_firers_make_each_fire_time_once(
    make_sync: Callable[..., SyncQueue], redis_client: redis.Redis
) -> None:
    queues = [make_sync() for _ in range(4)]
    first = queues[0].schedule("race", every=0.25, name="j")
    queues[0].schedule("race2", cron="* * * * *", name="j")  # not due: must not disturb
    assert first is not None
    stop = threading.Event()
    errors: list[BaseException] = []

    def fire(q: SyncQueue) -> None:
        try:
            while not stop.is_set():
                q.maintain()
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=fire, args=(q,)) for q in queues]
    for t in threads:
        t.start()
    try:
        wait_past(redis_client, first + timedelta(seconds=2.0))
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert not errors
    times = fire_times_ms(fired_jobs(queues[0], "race"))
    assert len(times) == len(set(times)), Counter(times).most_common(3)
    # every fire time from the first on, none missed while firers ran
    start = round(first.timestamp() * 1000)
    assert times == [start + 250 * i for i in range(len(times))]
    assert len(times) >= 8


async def test_workers_wake_for_a_fire_not_only_at_maintenance(
    aq: Queue, redis_client: redis.Redis
) -> None:
    handled: list[Job] = []

    def record(job: Job) -> None:
        handled.append(job)

    worker = Worker(aq, {"beat": record}, maintenance_interval=30.0)
    task = asyncio.create_task(worker.run(install_signals=False))
    try:
        deadline = time.monotonic() + 10
        while not worker.running:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        nxt = await aq.schedule("beat", every=1.0, name="beat")
        assert nxt is not None
        while len(handled) < 2:
            # far sooner than the 30 s maintenance period
            assert time.monotonic() < deadline, "the worker did not wake for the fire"
            await asyncio.sleep(0.01)
    finally:
        worker.stop(immediate=True)
        await asyncio.wait_for(task, 15)
    assert handled[0].fire_time == nxt
    assert handled[0].schedule_id == "beat"


@pytest.mark.slow
@pytest.mark.only_backends(
    "valkey", "cluster", reason="30 s of wall time; the fire's compare-and-set is one script"
)
async def test_four_workers_one_second_schedules_for_30_seconds(
    backend_url: str, queue_name: str, redis_client: redis.Redis
) -> None:
    queues = [Queue(queue_name, backend_url) for _ in range(4)]
    seen: list[tuple[str, int]] = []

    def record(job: Job) -> None:
        assert job.fire_time is not None and job.schedule_id is not None
        seen.append((job.schedule_id, round(job.fire_time.timestamp() * 1000)))

    workers = [Worker(q, {"beat": record}, maintenance_interval=5.0) for q in queues]
    tasks = [asyncio.create_task(w.run(install_signals=False)) for w in workers]
    try:
        firsts = {}
        for i in range(3):
            nxt = await queues[0].schedule(f"s{i}", every=1.0, name="beat")
            assert nxt is not None
            firsts[f"s{i}"] = round(nxt.timestamp() * 1000)
        end = max(firsts.values()) + 30_000
        deadline = time.monotonic() + 60
        while server_ms(redis_client) < end:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.25)
        for i in range(3):  # stop firing, let the workers drain what fired
            await queues[0].unschedule(f"s{i}")
        while (await queues[0].stats()).counts["waiting"] or (await queues[0].stats()).counts[
            "active"
        ]:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
    finally:
        for w in workers:
            w.stop(immediate=True)
        await asyncio.wait_for(asyncio.gather(*tasks), 20)
        for q in queues:
            await q.close()
    counts = Counter(seen)
    assert max(counts.values()) == 1, counts.most_common(3)
    for sid, start in firsts.items():
        times = sorted(t for s, t in seen if s == sid)
        assert times == [start + 1000 * k for k in range(len(times))], sid
        assert len(times) >= 30


def test_fire_time_is_the_stored_one_not_the_firers_clock(
    frozen_server: FrozenServer, queue_name: str
) -> None:
    """On a server clock a day and some seconds away from this process's clock:
    the first fire is the server's next minute, and a fire made 90.5 s late
    carries the stored fire time (neither the firer's server time nor its local
    clock), as does the schedule's next fire."""
    clock = frozen_server.clock
    minute = 60_000
    local_ms = int(time.time() * 1000)
    # a whole minute of the server's clock, well apart from the local clock
    start = (max(clock.now_ms, local_ms) // minute + 24 * 60 + 1) * minute
    clock.set(start + 17_345)
    with SyncQueue(queue_name, frozen_server.url) as sq:
        nxt = sq.schedule("exact", cron="* * * * *", name="j")
        assert nxt is not None and to_ms(nxt) == start + minute
        clock.set(start + 2 * minute + 30_500)  # fires at +1 and +2 min missed
        report = sq.maintain()
        assert report.fired == 1 and to_ms(report.server_time) == clock.now_ms
        [job] = fired_jobs(sq, "exact")
        assert job.fire_time is not None and to_ms(job.fire_time) == start + minute
        assert report.next_schedule is not None
        assert to_ms(report.next_schedule) == start + 3 * minute
        assert to_ms(info(sq, "exact").next_fire) == start + 3 * minute


def test_max_attempts_none_takes_the_stored_setting_at_the_fire(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    nxt = sq.schedule("retrying", every=0.3, name="j")
    assert nxt is not None and info(sq, "retrying").max_attempts is None
    sq.configure(max_attempts=7)
    wait_past(redis_client, nxt)
    assert sq.maintain().fired == 1
    [job] = fired_jobs(sq, "retrying")
    assert job.max_attempts == 7


def test_a_fire_is_an_event(sq: SyncQueue, redis_client: redis.Redis) -> None:
    cursor = sq.read_events(None).cursor
    nxt = sq.schedule("ev", every=0.3, name="j", group="g")
    assert nxt is not None
    wait_past(redis_client, nxt)
    assert sq.maintain().fired == 1
    [job] = fired_jobs(sq, "ev", "g")
    events = [e for e in sq.read_events(cursor).events if e.job_id == job.id]
    assert [(e.kind, e.group) for e in events] == [("scheduled", "g")]


def test_a_fire_into_a_full_lane_is_skipped(sq: SyncQueue, redis_client: redis.Redis) -> None:
    sq.set_lane("small", max_waiting=1)
    sq.add("filler", group="small")
    cursor = sq.read_events(None).cursor
    nxt = sq.schedule("full", every=0.3, name="j", group="small")
    assert nxt is not None
    wait_past(redis_client, nxt)
    report = sq.maintain()
    assert (report.fired, report.skipped) == (0, 1)
    s = info(sq, "full")
    assert s.last_skip == "lane-full" and s.skipped == 1
    events = [e for e in sq.read_events(cursor).events if e.kind == "skipped"]
    assert [(e.job_id, e.group, e.error) for e in events] == [("full", "small", "lane-full")]
