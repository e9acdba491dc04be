"""The doorbell and parked lanes (issue 27, items 1 and 2; docs/lifecycle.md
"How an idle worker wakes").

A worker waits on the doorbell after a claim that emptied the ring list: every
lane left was served, emptied or parked (paused, at its cap, throttled, over
its rate). So a job that becomes claimable in a lane that can be served (an
add, a promotion, a release, a dependency's release) rings whenever the ring
list held no lane, whatever parked lanes hold; and a parked lane whose time is
the earliest (a capped lane over its rate whose slot frees) rings too, so an
idle worker learns when to come back (the claim's ``retry_in``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis

from echomq import Queue, SyncQueue, Worker
from echomq.job import Job
from echomq.keys import QueueKeys
from integration.test_lane_controls import wait_until
from integration.test_worker import running

#: a worker's periodic claim in these tests: a wake that waits for it fails
INTERVAL = 5.0


def doorbell(sq: SyncQueue, client: redis.Redis) -> int:
    """Rings not heard yet (0 or 1: the list keeps one element)."""
    return int(client.llen(QueueKeys(sq.name).wake))


def hush(sq: SyncQueue, client: redis.Redis) -> None:
    """Take the ring an idle worker would have taken."""
    client.delete(QueueKeys(sq.name).wake)


@contextmanager
def parked_backlog(sq: SyncQueue, client: redis.Redis, how: str) -> Iterator[None]:
    """Lane ``parked`` holds a backlog it cannot serve (paused, or at its cap with
    its one slot taken), a claim has parked it, and the doorbell is quiet: what an
    idle worker's last claim leaves."""
    if how == "paused":
        sq.set_lane("parked", paused=True)
        sq.add_many([{"name": "j", "group": "parked"} for _ in range(3)])
    else:
        sq.set_lane("parked", concurrency=1)
        sq.add_many([{"name": "j", "group": "parked"} for _ in range(3)])
        assert len(sq.claim(1)) == 1  # its slot is taken
    assert sq.claim(5) == []  # parks it: nothing claimable
    # the queue's waiting count (the old rule rang when it went from 0) stays above 0
    assert int(client.hget(QueueKeys(sq.name).meta, "w") or 0) > 0
    hush(sq, client)
    yield


@pytest.mark.parametrize("how", ["paused", "capped"])
def test_an_add_to_a_lane_that_can_be_served_rings_beside_a_parked_backlog(
    sq: SyncQueue, redis_client: redis.Redis, how: str
) -> None:
    with parked_backlog(sq, redis_client, how):
        sq.add("j", group="parked")  # not claimable: nobody to wake
        assert doorbell(sq, redis_client) == 0
        sq.add("j", group="free")
        assert doorbell(sq, redis_client) == 1
        hush(sq, redis_client)
        sq.add("j", group="free2")  # the ring list holds a lane: the first ring covers it
        assert doorbell(sq, redis_client) == 0
        assert {j.group for j in sq.claim(5)} == {"free", "free2"}


def test_a_promotion_a_release_and_a_dependency_release_ring_beside_a_parked_backlog(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    with parked_backlog(sq, redis_client, "paused"):
        # a release puts the job back in its lane
        sq.add("j", group="free")
        (job,) = sq.claim(5)
        hush(sq, redis_client)
        sq.release(job)
        assert doorbell(sq, redis_client) == 1
        # a dependent released by its dependency's completion
        (job,) = sq.claim(5)
        sq.add("j", group="free", depends_on=[job.id])
        hush(sq, redis_client)
        sq.complete(job)
        assert doorbell(sq, redis_client) == 1
        (dependent,) = sq.claim(5)
        sq.complete(dependent)
        # a delayed job promoted by maintenance
        sq.add("j", group="free", delay=0.3)
        hush(sq, redis_client)
        deadline = time.monotonic() + 5
        while sq.maintain().promoted == 0:
            assert time.monotonic() < deadline, "the delayed job was never promoted"
            time.sleep(0.05)
        assert doorbell(sq, redis_client) == 1


def test_a_claim_that_takes_what_it_promoted_wakes_nobody_else(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    sq.add("j", delay=0.3)
    hush(sq, redis_client)
    deadline = time.monotonic() + 5
    jobs: list[Job] = []
    while not jobs:
        assert time.monotonic() < deadline, "the delayed job was never claimed"
        time.sleep(0.05)
        jobs = sq.claim(5)
    assert doorbell(sq, redis_client) == 0  # no work left behind: a ring would wake for nothing


def test_a_capped_lane_over_its_rate_rings_when_its_slot_frees(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    """Parked at its cap (no time known), its slot frees while its rate window runs:
    the time it can be served is new and the earliest, so an idle worker is woken
    to learn it from its claim."""
    sq.set_lane("acme", concurrency=1, rate=(1, 20.0))
    sq.add_many([{"name": "j", "group": "acme"} for _ in range(2)])
    (job,) = sq.claim(5)  # at its cap and its rate: parked for the cap
    hush(sq, redis_client)
    sq.complete(job)
    assert doorbell(sq, redis_client) == 1
    empty = sq.claim(5)
    assert empty == [] and empty.retry_in is not None
    assert 19.0 < empty.retry_in <= 20.0  # the rate window's end
    hush(sq, redis_client)
    sq.throttle("other", 30.0)  # a later time than the one known: no ring
    sq.add("j", group="other")
    assert doorbell(sq, redis_client) == 1  # the add rang (other joined the empty ring) ...
    hush(sq, redis_client)
    assert sq.claim(5) == []  # ... the claim parks it, with its later time
    assert doorbell(sq, redis_client) == 0


def test_a_short_claim_says_when_a_lane_it_parked_comes_back(sq: SyncQueue) -> None:
    """Some jobs leased, then the lane is over its rate: a worker left with free
    slots learns when to claim again from the same reply."""
    sq.set_lane("acme", rate=(2, 20.0))
    sq.add_many([{"name": "j", "group": "acme"} for _ in range(4)])
    jobs = sq.claim(5)
    assert len(jobs) == 2
    assert jobs.retry_in is not None and 19.0 < jobs.retry_in <= 20.0


def test_a_plain_short_claim_has_no_retry_in(sq: SyncQueue) -> None:
    sq.add("j")
    jobs = sq.claim(5)
    assert len(jobs) == 1 and jobs.retry_in is None


@pytest.mark.parametrize("how", ["paused", "capped"])
async def test_an_idle_worker_starts_a_new_job_at_once_beside_a_parked_backlog(
    aq: Queue, how: str
) -> None:
    """The issue's case: add → start took 4.0-4.4 s (the periodic claim), 2-5 ms
    without the parked lane. Each of three adds must start well before the
    worker's periodic claim (INTERVAL)."""
    started: dict[str, float] = {}
    release = asyncio.Event()

    async def work(job: Job) -> None:
        started[job.id] = time.monotonic()
        if job.group == "parked":
            await release.wait()  # holds the capped lane's one slot

    if how == "paused":
        await aq.set_lane("parked", paused=True)
    else:
        await aq.set_lane("parked", concurrency=1)
    await aq.add_many([{"name": "w", "group": "parked"} for _ in range(3)])
    worker = Worker(aq, {"w": work}, concurrency=4, lease=30.0, maintenance_interval=INTERVAL)
    try:
        async with running(worker):
            await asyncio.sleep(0.5)  # the worker claims what it can and goes idle
            for _ in range(3):
                added = time.monotonic()
                job_id = await aq.add("w", group="free")

                async def began(job_id: str = job_id) -> bool:
                    return job_id in started

                await wait_until(began, timeout=INTERVAL - 1.0)
                assert started[job_id] - added < 1.0, started[job_id] - added
                await asyncio.sleep(0.3)
    finally:
        release.set()


async def test_a_lane_with_a_cap_and_a_rate_runs_at_its_rate(aq: Queue) -> None:
    """The issue's case: concurrency 2 and 20 per second, jobs of 50 ms, a worker of
    concurrency 5: 20 starts, then 20 more at the next periodic claim (5 s later).
    At its rate, 60 jobs take a little over 2 s; the periodic claim would make
    them take over 10 s."""
    await aq.set_lane("acme", concurrency=2, rate=(20, 1.0))
    ids = await aq.add_many([{"name": "w", "group": "acme"} for _ in range(60)])
    running_now, most, finished = 0, 0, 0

    async def work(job: Job) -> None:
        nonlocal running_now, most, finished
        running_now += 1
        most = max(most, running_now)
        await asyncio.sleep(0.05)
        running_now -= 1
        finished += 1

    async def all_done() -> bool:
        return finished == len(ids)

    worker = Worker(aq, {"w": work}, concurrency=5, lease=30.0, maintenance_interval=INTERVAL)
    began = time.monotonic()
    async with running(worker):
        await wait_until(all_done, timeout=7.0)
    took = time.monotonic() - began
    assert most <= 2
    assert took >= 2.0  # the rate held: 20 per second, the first 20 at once
