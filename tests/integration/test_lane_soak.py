"""A 4-worker soak of the lane controls (issue 16): 20 lanes, random caps,
rates and pauses changed while four workers run, under a queue-wide cap.

Checked from the server's own record, the event stream (every claim and
completion, numbered in the order the scripts ran, with the server time of
each call), not from what the clients saw:

- nothing is lost: every job completes exactly once;
- no claim starts while its lane is at its cap or paused, or the queue at its
  queue-wide cap (a control change is placed between the last event before
  the call that made it and the first after; a claim in between is held to
  the looser of the old and new value);
- no rate window holds more claims than the lane's rate allows;
- the lanes that stay eligible throughout (no cap, rate or pause, weights
  1-3) are served in exactly the weighted rotation tests/model.py gives for
  them alone, as long as all of them still have a backlog.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from dataclasses import dataclass

import pytest

from echomq import Queue, SyncQueue, Worker
from echomq.job import Job
from model import OrderModel
from servers import PrivateServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

WORKERS = 4
ELIGIBLE = {f"e{i}": 1 + i % 3 for i in range(5)}  # lane -> weight, never controlled
CONTROLLED = [f"c{i}" for i in range(15)]
RATED = {"c0": (3, 0.5), "c1": (5, 1.0), "c2": (2, 0.3)}  # fixed all run
QUEUE_CAP = 10
ELIGIBLE_JOBS = 200
CONTROLLED_JOBS = 20
CONTROL_SECONDS = 12.0


@dataclass
class Change:
    """A control change, placed between two event numbers."""

    before: int  # the last event before the call
    after: int  # the last event after it
    lane: str
    cap: int | None  # the cap after the change
    paused: bool


def last_event(q: SyncQueue) -> int:
    return int(q.read_events(None).cursor or 0)


def run_worker(url: str, name: str, stop: threading.Event, seed: int) -> None:
    rng = random.Random(seed)

    async def work(job: Job) -> None:
        await asyncio.sleep(rng.uniform(0.001, 0.01))

    async def main() -> None:
        async with Queue(name, url) as q:
            worker = Worker(q, {"w": work}, concurrency=4, lease=60.0)
            task = asyncio.create_task(worker.run(install_signals=False))
            while not stop.is_set():
                await asyncio.sleep(0.05)
            worker.stop()
            await asyncio.wait_for(task, 30)

    asyncio.run(main())


@pytest.mark.parametrize("backend", ["valkey", "redis"], indirect=True)
def test_four_workers_twenty_lanes_random_controls(
    backend: PrivateServer, backend_url: str, queue_name: str
) -> None:
    rng = random.Random(16)
    ctl = SyncQueue(queue_name, backend_url)
    ctl.configure(concurrency=QUEUE_CAP, event_stream_length=1_000_000)
    caps: dict[str, int | None] = {}
    paused: dict[str, bool] = {}
    for lane in CONTROLLED:
        caps[lane] = rng.choice([1, 2, 3])
        paused[lane] = False
        ctl.set_lane(lane, concurrency=caps[lane], rate=RATED.get(lane))
    for lane, weight in ELIGIBLE.items():
        ctl.set_weight(lane, weight)
    # the controlled lanes first (the ring's head), then the eligible ones
    ids = ctl.add_many(
        [{"name": "w", "group": lane} for _ in range(CONTROLLED_JOBS) for lane in CONTROLLED]
    )
    eligible_ids = ctl.add_many(
        [{"name": "w", "group": lane} for _ in range(ELIGIBLE_JOBS) for lane in ELIGIBLE]
    )
    ids += eligible_ids
    changes = [Change(0, 0, lane, caps[lane], False) for lane in CONTROLLED]

    stop = threading.Event()
    threads = [
        threading.Thread(target=run_worker, args=(backend_url, queue_name, stop, i), daemon=True)
        for i in range(WORKERS)
    ]
    for t in threads:
        t.start()
    try:
        end = time.monotonic() + CONTROL_SECONDS
        while time.monotonic() < end:
            lane = rng.choice(CONTROLLED)
            if rng.random() < 0.3:
                paused[lane] = not paused[lane]
            else:
                caps[lane] = rng.choice([1, 2, 3, None])
            before = last_event(ctl)
            ctl.set_lane(lane, concurrency=caps[lane], paused=paused[lane])
            changes.append(Change(before, last_event(ctl), lane, caps[lane], paused[lane]))
            time.sleep(rng.uniform(0.05, 0.3))
        before = last_event(ctl)
        for lane in CONTROLLED:  # let everything drain
            ctl.set_lane(lane, paused=False)
        changes += [Change(before, last_event(ctl), x, caps[x], False) for x in CONTROLLED]
        deadline = time.monotonic() + 60
        while ctl.stats().totals.get("completed", 0) < len(ids):
            assert time.monotonic() < deadline, ctl.stats().counts
            time.sleep(0.1)
    finally:
        stop.set()
        for t in threads:
            t.join(40)

    page = ctl.read_events("0")
    events = list(page.events)
    while page.events:
        page = ctl.read_events(page.cursor)
        events += page.events
    assert not any(e.kind == "missed" for e in events)
    claimed = [e for e in events if e.kind == "claimed"]
    completed = [e for e in events if e.kind == "completed"]
    # nothing lost, nothing run twice
    assert sorted(e.job_id or "" for e in completed) == sorted(ids)
    assert len(claimed) == len(ids)

    check_caps_and_pauses(events, changes)
    check_rates(claimed)
    check_rotation(claimed, eligible_ids)
    ctl.close()


def check_caps_and_pauses(events: list, changes: list[Change]) -> None:  # type: ignore[type-arg]
    active: dict[str, int] = {}
    queue_active = 0
    by_lane: dict[str, list[Change]] = {}
    for c in changes:
        by_lane.setdefault(c.lane, []).append(c)
    for e in events:
        lane = e.group or ""
        if e.kind == "claimed":
            active[lane] = active.get(lane, 0) + 1
            queue_active += 1
            assert queue_active <= QUEUE_CAP, f"queue cap passed at event {e.id}"
            number = int(e.id)
            # the controls in force: the last change surely before, and any in flight
            history = by_lane.get(lane, [])
            done = [c for c in history if c.after < number]
            flight = [c for c in history if c.before < number <= c.after]
            states = ([done[-1]] if done else []) + flight
            if not states:
                continue
            if all(s.paused for s in states):
                raise AssertionError(f"lane {lane} claimed while paused at event {e.id}")
            if all(s.cap is not None for s in states):
                cap = max(s.cap for s in states if s.cap is not None)
                assert active[lane] <= cap, f"lane {lane}: {active[lane]} > cap {cap} at {e.id}"
        elif e.kind in ("completed", "released", "retrying", "dead", "stalled"):
            active[lane] -= 1
            queue_active -= 1


def check_rates(claimed: list) -> None:  # type: ignore[type-arg]
    for lane, (most, per) in RATED.items():
        times = sorted(e.at.timestamp() for e in claimed if e.group == lane)
        assert len(times) == CONTROLLED_JOBS
        for i in range(len(times) - most):
            assert times[i + most] - times[i] >= per - 0.0015, (lane, i)


def check_rotation(claimed: list, eligible_ids: list[str]) -> None:  # type: ignore[type-arg]
    model = OrderModel()
    for lane, weight in ELIGIBLE.items():
        model.set_weight(lane, weight)
    groups = [lane for _ in range(ELIGIBLE_JOBS) for lane in ELIGIBLE]
    for job_id, lane in zip(eligible_ids, groups, strict=True):
        model.add(job_id, 0, lane)
    served = [e.job_id for e in claimed if e.group in ELIGIBLE]  # stream order
    # while every eligible lane has a backlog: up to the first lane's last claim
    seen: dict[str, int] = {}
    prefix = 0
    for e in (e for e in claimed if e.group in ELIGIBLE):
        seen[e.group] = seen.get(e.group, 0) + 1
        prefix += 1
        if seen[e.group] == ELIGIBLE_JOBS:
            break
    expected = [model.claim(1)[0] for _ in range(prefix)]
    assert served[:prefix] == expected
    assert prefix >= ELIGIBLE_JOBS
