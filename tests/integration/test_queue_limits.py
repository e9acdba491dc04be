"""Queue-wide ``concurrency`` and ``rate`` (``configure``, DESIGN §8 "Lane controls",
docs/ordering.md "Queue-wide limits"): they cap all lanes together, on the
server clock, and leave the ring's order alone."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime

import pytest
import redis

from echomq import Queue, SyncQueue, Worker
from echomq.job import Job
from echomq.keys import QueueKeys
from echomq.worker.fetcher import Fetcher
from echomq.worker.maintenance import Maintenance
from integration.test_lane_controls import (
    claim_after_the_window,
    groups,
    one_by_one,
    running,
    total_calls,
    wait_until,
)


def test_cap_is_never_exceeded_across_queue_objects(make_sync: Callable[..., SyncQueue]) -> None:
    q1, q2, q3 = make_sync(), make_sync(), make_sync()
    q1.configure(concurrency=3)
    q1.add_many([{"name": "j", "group": g} for g in "ABCD" * 5])
    got = q1.claim(2) + q2.claim(5) + q3.claim(1) + q1.claim(5)
    assert len(got) == 3
    assert q2.stats().counts["active"] == 3
    assert not any(info.parked for info in q1.lanes())  # no lane is parked for it


def test_the_rotation_goes_on_where_the_cap_stopped_it(
    make_sync: Callable[..., SyncQueue], queue_name: str
) -> None:
    """Capped claims serve the same order as uncapped single claims."""
    capped, free = make_sync(queue_name + "-c"), make_sync(queue_name + "-f")
    for q in (capped, free):
        q.set_weight("A", 2)
        q.add_many([{"name": "j", "group": g} for g in "AAAABBBBCCCC"])
    capped.configure(concurrency=2)
    order = ""
    while True:
        jobs = capped.claim(5)
        if not jobs:
            break
        assert len(jobs) <= 2
        order += groups(jobs)
        for job in jobs:
            capped.complete(job)
    reference, _ = one_by_one(free, 12)
    assert order == reference == "AABCAABCBCBC"


def test_a_full_queue_claims_nothing_and_keeps_the_turn(sq: SyncQueue) -> None:
    sq.set_weight("A", 3)
    sq.add_many([{"name": "j", "group": g} for g in "AAAAAABBB"])
    sq.configure(concurrency=1)
    [first] = sq.claim(5)
    assert sq.claim(5) == []
    sq.complete(first)
    [second] = sq.claim(5)
    assert groups([first, second]) == "AA"  # A's turn of 3 goes on
    sq.configure(concurrency=None)
    assert groups(sq.claim(5)) == "ABAAA"


def test_raising_the_cap_lets_claims_through(sq: SyncQueue) -> None:
    sq.configure(concurrency=1)
    sq.add_many([{"name": "j"}] * 4)
    assert len(sq.claim(4)) == 1
    sq.configure(concurrency=3)
    assert len(sq.claim(4)) == 2


def test_rate_is_exact_over_the_window(sq: SyncQueue) -> None:
    sq.configure(rate=(3, 0.5))
    sq.add_many([{"name": "j", "group": g} for g in "ABC" * 4])
    first = sq.claim(10)
    assert len(first) == 3
    assert sq.claim(10) == []
    second = claim_after_the_window(sq, first, 0.5)
    assert len(second) == 3
    assert groups(first + second) == "ABCABC"


def test_rate_counts_single_claims_in_a_sliding_window(sq: SyncQueue) -> None:
    sq.configure(rate=(2, 0.6))
    sq.add_many([{"name": "j"}] * 6)
    times: list[float] = []
    deadline = time.monotonic() + 10
    while len(times) < 6 and time.monotonic() < deadline:
        for job in sq.claim(1):
            assert job.claimed_at is not None
            times.append(job.claimed_at.timestamp())
        time.sleep(0.02)
    assert len(times) == 6
    # any 3 consecutive claims span at least the window (server clock, ms)
    for i in range(len(times) - 2):
        assert times[i + 2] - times[i] >= 0.6 - 0.0015


# -- every way out of active gives the queue's slot back ----------------------


def queue_full(sq: SyncQueue, **add: object) -> Job:
    """Queue capped at 1 with its slot taken and a job of another lane waiting."""
    sq.configure(concurrency=1)
    sq.add_many([{"name": "j", "group": "e", **add}, {"name": "j", "group": "f"}])
    [job] = sq.claim(5)
    assert sq.claim(5) == []
    return job


def assert_queue_slot_free(sq: SyncQueue) -> None:
    assert sq.stats().counts["active"] == 0
    assert len(sq.claim(5)) == 1  # one slot, not more


@pytest.mark.parametrize(
    "leave",
    [
        lambda sq, job: sq.complete(job),
        lambda sq, job: sq.fail(job, "boom", retry_delay=60),
        lambda sq, job: sq.fail(job, "boom", retry=False),
        lambda sq, job: sq.release(job, delay=60),
        lambda sq, job: sq.remove(job.id),
        lambda sq, job: sq.cancel(job.id),
    ],
    ids=["complete", "fail-retry", "fail-dead", "release", "remove", "cancel"],
)
def test_slot_back_on_every_exit(sq: SyncQueue, leave: Callable[[SyncQueue, Job], object]) -> None:
    leave(sq, queue_full(sq, max_attempts=3))
    assert_queue_slot_free(sq)


def test_slot_back_on_lease_expiry(sq: SyncQueue) -> None:
    sq.configure(concurrency=1)
    sq.add_many([{"name": "j", "group": "e"}, {"name": "j", "group": "f"}])
    assert len(sq.claim(5, lease=0.3)) == 1
    assert sq.claim(5) == []
    deadline = time.monotonic() + 5
    got: list[Job] = []
    while not got and time.monotonic() < deadline:
        time.sleep(0.05)
        got = sq.claim(5)
    assert len(got) == 1  # reaped by this claim, then one slot again
    assert sq.stats().counts["active"] == 1


def test_the_slot_freeing_rings_the_doorbell(sq: SyncQueue, redis_client: redis.Redis) -> None:
    job = queue_full(sq)
    wake = QueueKeys(sq.name).wake
    redis_client.delete(wake)
    sq.complete(job)
    assert redis_client.llen(wake) == 1


# -- with a worker ------------------------------------------------------------


async def test_a_worker_runs_at_most_the_queue_cap(aq: Queue) -> None:
    await aq.configure(concurrency=2)
    running_now, most = 0, 0

    async def work(job: Job) -> None:
        nonlocal running_now, most
        running_now += 1
        most = max(most, running_now)
        await asyncio.sleep(0.05)
        running_now -= 1

    ids = await aq.add_many([{"name": "w", "group": g} for g in "abcd" * 3])
    async with running(Worker(aq, {"w": work}, concurrency=6)):

        async def all_done() -> bool:
            jobs = [await aq.get(i) for i in ids]
            return all(j is not None and j.state == "completed" for j in jobs)

        await wait_until(all_done)
    assert most == 2


@pytest.mark.no_cluster("INFO commandstats counts one server's calls")
async def test_an_idle_worker_sleeps_at_the_cap_and_wakes_on_completion(
    aq: Queue, redis_client: redis.Redis
) -> None:
    await aq.configure(concurrency=1)
    hold, done = asyncio.Event(), asyncio.Event()
    seen: list[str] = []

    async def work(job: Job) -> None:
        seen.append(job.id)
        if len(seen) == 1:
            await hold.wait()
        else:
            done.set()

    await aq.add_many([{"name": "w", "group": "a"}, {"name": "w", "group": "b"}])
    async with running(Worker(aq, {"w": work}, concurrency=4)):
        await wait_until(lambda: _true(len(seen) == 1))
        await asyncio.sleep(0.3)  # settle: the worker is idle, the queue full
        before = total_calls(redis_client)
        await asyncio.sleep(1.0)
        idle_calls = total_calls(redis_client) - before
        hold.set()  # the completion frees the slot and rings
        await asyncio.wait_for(done.wait(), 3)
    assert idle_calls < 20, f"{idle_calls} commands in 1 s while the queue was full"


async def _true(value: bool) -> bool:
    return value


async def test_an_idle_worker_wakes_when_the_rate_window_ends(aq: Queue) -> None:
    """Not at the next periodic maintenance (5 s): when the window ends."""
    await aq.configure(rate=(2, 1.0))
    starts: list[datetime] = []

    async def work(job: Job) -> None:
        assert job.claimed_at is not None
        starts.append(job.claimed_at)

    await aq.add_many([{"name": "w"}] * 4)
    async with running(Worker(aq, {"w": work}, concurrency=4)):
        await wait_until(lambda: _true(len(starts) == 4))
    starts.sort()
    # by the server's clock (claim times): the third claim waits for the window's
    # end (1 ms either way: a script's clock reads), and comes soon after it
    gap = (starts[2] - starts[0]).total_seconds()
    assert 1.0 - 0.0015 <= gap < 3.0, gap


# -- the claim reply says when --------------------------------------------------


def test_an_empty_claim_says_when_the_clock_frees_a_lane(sq: SyncQueue) -> None:
    sq.add_many([{"name": "j", "group": g} for g in "pcc"])
    sq.set_lane("p", paused=True)
    sq.set_lane("c", concurrency=1)
    [job] = sq.claim(5)
    assert job.group == "c"
    none = sq.claim(5)  # paused and capped lanes wait for events (resume, freed slot)
    assert none == [] and none.retry_in is None
    sq.add("j", group="t")
    sq.throttle("t", 0.8)
    empty = sq.claim(5)
    assert empty == [] and empty.retry_in is not None and 0.5 < empty.retry_in <= 0.8


def test_an_empty_claim_says_when_the_queue_rate_window_ends(sq: SyncQueue) -> None:
    sq.configure(rate=(1, 0.7))
    sq.add_many([{"name": "j"}] * 2)
    assert len(sq.claim(5)) == 1
    empty = sq.claim(5)
    assert empty == [] and empty.retry_in is not None and 0.4 < empty.retry_in <= 0.7
    sq.configure(concurrency=1, rate=None)
    capped = sq.claim(5)
    assert capped == [] and capped.retry_in is None


async def test_the_fetcher_sleeps_until_the_time_the_claim_said(aq: Queue) -> None:
    """No maintenance timer runs here and its period is 10 s: the wait ends
    when the throttle does, because the empty claim said when."""
    await aq.add("w", group="t")
    await aq.throttle("t", 0.8)
    fetcher = Fetcher(aq, lease=30.0, maintenance=Maintenance(aq, 10.0), worker_id="w1")
    assert await fetcher.claim(1) == []
    started = time.monotonic()
    waits, jobs = 0, list[Job]()
    while not jobs and waits < 5:  # the add's ring is still there: one wait ends at once
        jobs = await fetcher.wait_and_claim(1)
        waits += 1
    waited = time.monotonic() - started
    assert [j.group for j in jobs] == ["t"]
    assert waits <= 2 and 0.4 <= waited < 3.0, (waits, waited)
