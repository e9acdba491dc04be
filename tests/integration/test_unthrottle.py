"""Lifting a throttle (issue 27.4): ``set_lane(group, throttle=None)`` ends a
throttle in force at once, records an ``unthrottled`` event and wakes an idle
worker; a wrong ``RateLimited(seconds)`` no longer freezes a lane for years."""

from __future__ import annotations

import asyncio
import time

import pytest

from echomq import InvalidOption, Queue, SyncQueue, Worker
from echomq.job import Job
from echomq.options import MAX_DELAY

TEN_YEARS = MAX_DELAY


def lane_info(sq: SyncQueue, group: str):  # type: ignore[no-untyped-def]
    return next(x for x in sq.lanes() if x.group == group)


def test_a_throttle_of_years_is_lifted_at_once_with_an_event(sq: SyncQueue) -> None:
    job_id = sq.add("j", group="t")
    sq.throttle("t", TEN_YEARS)
    assert sq.claim(1) == []  # parks the lane until the throttle's end
    assert lane_info(sq, "t").throttled_until is not None
    before = sq.read_events("0").cursor
    sq.set_lane("t", throttle=None)
    assert lane_info(sq, "t").throttled_until is None
    assert [j.id for j in sq.claim(1)] == [job_id]
    events = [e for e in sq.read_events(before).events if e.kind == "unthrottled"]
    assert [(e.job_id, e.group) for e in events] == [(None, "t")]
    # lifting again (no throttle in force) changes nothing and records nothing
    sq.set_lane("t", throttle=None)
    after = sq.read_events(before).events
    assert [e.kind for e in after].count("unthrottled") == 1


def test_set_lane_throttle_seconds_throttles_and_bad_values_write_nothing(sq: SyncQueue) -> None:
    sq.add("j", group="t")
    sq.set_lane("t", throttle=3600)
    assert sq.claim(1) == []
    until = lane_info(sq, "t").throttled_until
    for bad in (0, -1, TEN_YEARS * 2, "soon", float("nan")):
        with pytest.raises(InvalidOption, match="throttle seconds"):
            sq.set_lane("t", throttle=bad)  # type: ignore[arg-type]
    assert lane_info(sq, "t").throttled_until == until


async def test_an_idle_worker_starts_the_lane_as_soon_as_its_throttle_is_lifted(
    aq: Queue,
) -> None:
    """Not at the worker's next periodic claim (maintenance, 5 s): the lift puts the
    parked lane back into the ring, which rings the doorbell."""
    done = asyncio.Event()

    async def work(job: Job) -> None:
        done.set()

    worker = Worker(aq, {"w": work}, concurrency=2, lease=30.0)
    task = asyncio.create_task(worker.run(install_signals=False))
    try:
        await aq.throttle("t", 3600)
        await aq.add("w", group="t")  # rings: the claim finds the lane throttled, parks it
        deadline = time.monotonic() + 10
        while not any(x.parked for x in await aq.lanes()):
            assert time.monotonic() < deadline, "the worker never parked the lane"
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)  # the worker is idle on the doorbell again
        started = time.monotonic()
        await aq.set_lane("t", throttle=None)
        await asyncio.wait_for(done.wait(), 10)
        waited = time.monotonic() - started
    finally:
        worker.stop(immediate=True)
        await asyncio.wait_for(task, 10)
    assert waited < 2.0, waited  # the periodic claim would come after 5 s
