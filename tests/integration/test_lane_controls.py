"""Lane controls (DESIGN §8 "Lane controls", docs/ordering.md): caps, rates,
pause, throttle, max_waiting, and the slot given back on every way out of active."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime, timedelta

import pytest
import redis

from echomq import (
    EchoMQError,
    InvalidOption,
    InvalidState,
    JobNotFound,
    LaneFull,
    Queue,
    RateLimited,
    SyncQueue,
    Worker,
)
from echomq.job import Job
from echomq.keys import QueueKeys


def groups(jobs: list[Job]) -> str:
    return "".join(j.group or "-" for j in jobs)


def claim_after_the_window(sq: SyncQueue, first: list[Job], window: float) -> list[Job]:
    """Claim (up to 10) until a claim gets jobs, within 5 s; assert they start at
    least ``window`` seconds (server clock) after ``first``'s claim."""
    deadline = time.monotonic() + 5
    second: list[Job] = []
    while not second and time.monotonic() < deadline:
        second = sq.claim(10)
        time.sleep(0.05)
    assert second, "nothing was claimed after the window"
    span = (second[0].claimed_at - first[0].claimed_at).total_seconds()  # type: ignore[operator]
    assert span >= window
    return second


def one_by_one(sq: SyncQueue, count: int) -> tuple[str, list[Job]]:
    got: list[Job] = []
    for _ in range(count):
        got += sq.claim(1)
    return groups(got), got


def lane(sq: SyncQueue, group: str | None):  # type: ignore[no-untyped-def]
    return next(x for x in sq.lanes() if x.group == group)


def test_rotation_with_a_capped_lane_is_the_contract_example(sq: SyncQueue) -> None:
    sq.set_lane("C", concurrency=1)
    sq.add_many([{"name": "j", "group": g} for g in "ABCD" * 4])
    order, jobs = one_by_one(sq, 8)
    assert order == "ABCDABDA"
    # C's slot frees: C is served when the rotation next reaches it (after B)
    c_job = next(j for j in jobs if j.group == "C")
    sq.complete(c_job)
    order, _ = one_by_one(sq, 4)
    assert order == "BCDA"


def test_claim_n_is_n_single_claims_with_caps(make_sync, queue_name: str) -> None:  # type: ignore[no-untyped-def]
    a, b = make_sync(queue_name + "-a"), make_sync(queue_name + "-b")
    for q in (a, b):
        q.set_weight("A", 2)
        q.set_lane("B", concurrency=2)
        q.set_lane("C", paused=True)
        q.add_many([{"name": "j", "group": g} for g in "AAAABBBBCCCCDDDD"])
    many = groups(a.claim(9))
    single, _ = one_by_one(b, 9)
    assert many == single == "AABDAABDD"  # C paused; B parked at its cap


def test_cap_is_never_exceeded_across_queue_objects(make_sync) -> None:  # type: ignore[no-untyped-def]
    q1 = make_sync()
    q2 = make_sync()
    q1.set_lane("t", concurrency=3)
    q1.add_many([{"name": "j", "group": "t"} for _ in range(10)] + [{"name": "j"}] * 2)
    got = q1.claim(2) + q2.claim(5) + q1.claim(5)
    assert sum(1 for j in got if j.group == "t") == 3
    assert lane(q1, "t").active == 3
    assert lane(q1, "t").parked


def test_pause_and_resume(sq: SyncQueue) -> None:
    sq.set_lane("p", paused=True)
    sq.add_many([{"name": "j", "group": g} for g in "ppq"])
    assert groups(sq.claim(3)) == "q"
    info = lane(sq, "p")
    assert info.paused and info.backlog == 2 and info.parked and info.position == -1
    assert sq.stats().lanes == {"p": 2}  # a parked lane's waiting jobs are counted
    sq.set_lane("p", paused=False)
    assert groups(sq.claim(3)) == "pp"


def test_omitted_is_unchanged_and_none_removes(sq: SyncQueue) -> None:
    sq.set_lane("x", concurrency=2, rate=(5, 1.0), max_waiting=10, weight=3)
    sq.set_lane("x", paused=True)
    info = lane(sq, "x")
    assert (info.concurrency, info.rate, info.max_waiting, info.weight, info.paused) == (
        2,
        (5, 1.0),
        10,
        3,
        True,
    )
    sq.set_lane("x", concurrency=None, rate=None, paused=False)
    info = lane(sq, "x")
    assert (info.concurrency, info.rate, info.max_waiting, info.paused) == (None, None, 10, False)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"concurrency": 0},
        {"concurrency": 1.5},
        {"rate": (0, 1.0)},
        {"rate": (5, 0)},
        {"rate": 5},
        {"paused": 1},
        {"max_waiting": -1},
        {"weight": 0},
        {},
    ],
)
def test_bad_controls_raise_and_write_nothing(
    sq: SyncQueue, redis_client: redis.Redis, kwargs: dict[str, object]
) -> None:
    sq.add("j", group="x")
    before = redis_client.hgetall(QueueKeys(sq.name).lanectl)
    with pytest.raises(EchoMQError):
        sq.set_lane("x", **kwargs)  # type: ignore[arg-type]
    assert redis_client.hgetall(QueueKeys(sq.name).lanectl) == before


def test_bad_throttle_raises(sq: SyncQueue) -> None:
    with pytest.raises(InvalidOption, match="throttle seconds"):
        sq.throttle("x", 0)


def test_max_waiting_refuses_and_writes_nothing(sq: SyncQueue, redis_client: redis.Redis) -> None:
    sq.set_lane("m", max_waiting=3)
    sq.add("j", group="m")
    sq.add("j", group="m", delay=60)
    before = sq.stats()
    with pytest.raises(LaneFull, match="max_waiting 3"):
        sq.add_many([{"name": "j", "group": "m"}, {"name": "j", "group": "m"}, {"name": "j"}])
    after = sq.stats()
    assert after.counts == before.counts and after.totals == before.totals
    sq.add("j", group="m")  # the third fits
    with pytest.raises(LaneFull):
        sq.add("j", group="m")
    # a job coming back is never refused
    [job] = sq.claim(1)
    sq.release(job)
    assert lane(sq, "m").backlog == 2


def test_rate_is_exact_over_the_window(sq: SyncQueue) -> None:
    sq.set_lane("r", rate=(3, 0.5))
    sq.add_many([{"name": "j", "group": "r"} for _ in range(10)])
    first = sq.claim(10)
    assert len(first) == 3
    assert sq.claim(10) == []
    info = lane(sq, "r")
    assert info.parked
    # within the window nothing more; after it exactly 3 again
    second = claim_after_the_window(sq, first, 0.5)
    assert len(second) == 3


def test_throttle_holds_the_lane_until_the_server_time(sq: SyncQueue) -> None:
    sq.add_many([{"name": "j", "group": g} for g in "tts"])
    sq.throttle("t", 0.4)
    assert groups(sq.claim(3)) == "s"
    info = lane(sq, "t")
    assert info.throttled_until is not None
    deadline = time.monotonic() + 5
    got: list[Job] = []
    while not got and time.monotonic() < deadline:
        got = sq.claim(3)
        time.sleep(0.05)
    assert groups(got) == "tt"


# -- every way out of active gives the lane's slot back (one test per path) --


def capped_with_one_active(sq: SyncQueue, **add: object) -> Job:
    """Lane "e" capped at 1 with its one slot taken and a second job waiting."""
    sq.set_lane("e", concurrency=1)
    sq.add_many([{"name": "j", "group": "e", **add}, {"name": "j", "group": "e"}])
    [job] = sq.claim(5)
    assert sq.claim(5) == [] and lane(sq, "e").active == 1
    return job


def assert_slot_free(sq: SyncQueue) -> None:
    assert lane(sq, "e").active == 0
    assert len(sq.claim(5)) == 1  # the waiting job gets the freed slot


def test_slot_back_on_complete(sq: SyncQueue) -> None:
    sq.complete(capped_with_one_active(sq))
    assert_slot_free(sq)


def test_slot_back_on_fail_with_retry(sq: SyncQueue) -> None:
    sq.fail(capped_with_one_active(sq, max_attempts=3), "boom", retry_delay=60)
    assert_slot_free(sq)


def test_slot_back_on_fail_to_dead(sq: SyncQueue) -> None:
    sq.fail(capped_with_one_active(sq, max_attempts=1), "boom")
    assert_slot_free(sq)


def test_slot_back_on_release(sq: SyncQueue) -> None:
    job = capped_with_one_active(sq)
    sq.release(job)
    assert lane(sq, "e").active == 0
    assert [j.id for j in sq.claim(5)] == [job.id]  # back at its old place, first


def test_slot_back_on_remove(sq: SyncQueue) -> None:
    sq.remove(capped_with_one_active(sq).id)
    assert_slot_free(sq)


@pytest.mark.parametrize("retry", [False, True])
def test_slot_back_on_cancel(sq: SyncQueue, retry: bool) -> None:
    sq.cancel(capped_with_one_active(sq, max_attempts=3).id, retry=retry)
    assert_slot_free(sq)


def test_slot_back_on_lease_expiry_in_claim(sq: SyncQueue) -> None:
    sq.set_lane("e", concurrency=1)
    sq.add_many([{"name": "j", "group": "e"}, {"name": "j", "group": "e"}])
    [job] = sq.claim(5, lease=0.3)
    assert sq.claim(5) == []
    deadline = time.monotonic() + 5
    got: list[Job] = []
    while not got and time.monotonic() < deadline:
        time.sleep(0.05)
        got = sq.claim(5)
    assert [j.id for j in got] == [job.id]  # reaped by this claim: back first, slot reused
    assert lane(sq, "e").active == 1


def test_slot_back_on_lease_expiry_in_maintenance(sq: SyncQueue) -> None:
    sq.set_lane("e", concurrency=1)
    sq.add_many([{"name": "j", "group": "e", "max_attempts": 5}, {"name": "j", "group": "e"}])
    sq.claim(5, lease=0.3)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and sq.maintain().reaped == 0:
        time.sleep(0.05)
    info = lane(sq, "e")
    assert info.active == 0 and not info.parked
    assert len(sq.claim(5)) == 1


def test_slot_back_when_a_stalled_job_dies(make_sync) -> None:  # type: ignore[no-untyped-def]
    sq = make_sync(max_stalls=0)
    sq.set_lane("e", concurrency=1)
    sq.add_many([{"name": "j", "group": "e"}, {"name": "j", "group": "e"}])
    [job] = sq.claim(5, lease=0.3)
    deadline = time.monotonic() + 5
    got: list[Job] = []
    while not got and time.monotonic() < deadline:
        time.sleep(0.05)
        got = sq.claim(5)
    assert [j.id for j in got] != [job.id] and len(got) == 1
    assert sq.get(job.id).state == "dead"


# -- change keeps the job's arrival -------------------------------------------


@pytest.mark.parametrize("ordering", ["composite", "mint", "aged"])
def test_change_keeps_arrival(make_sync, queue_name: str, ordering: str) -> None:  # type: ignore[no-untyped-def]
    sq = make_sync(f"{queue_name}-{ordering}", ordering=ordering)
    first = sq.add("j", 1, group="x")
    sq.add_many([{"name": "j", "data": i, "group": "y"} for i in (2, 3)])
    moved = sq.change(first, group="y")
    assert moved.group == "y" and moved.state == "waiting"
    # it arrived first, so it stands first in its new lane
    assert [j.data for j in sq.claim(3)] == [1, 2, 3]


def test_change_priority_within_the_lane(sq: SyncQueue) -> None:
    ids = [sq.add("j", i, priority=1) for i in range(3)]
    sq.change(ids[2], priority=0)
    sq.change(ids[0], priority=0)
    assert [j.data for j in sq.claim(3)] == [0, 2, 1]  # tier first, then arrival


def test_change_a_delayed_job_and_refusals(sq: SyncQueue) -> None:
    delayed = sq.add("j", group="a", delay=60)
    assert sq.change(delayed, group="b", priority=4).group == "b"
    sq.add("j")
    [job] = sq.claim(1)
    with pytest.raises(InvalidState):
        sq.change(job.id, priority=1)
    with pytest.raises(JobNotFound):
        sq.change("job_01m8x9050xe61txjab4mt48p6v", priority=1)
    sq.set_lane("full", max_waiting=0)
    with pytest.raises(LaneFull):
        sq.change(delayed, group="full")
    assert sq.get(delayed).group == "b"  # type: ignore[union-attr]


def test_change_out_of_the_last_job_leaves_the_ring(sq: SyncQueue) -> None:
    only = sq.add("j", group="a")
    sq.add("j", group="b")
    sq.change(only, group="b")
    assert [x.group for x in sq.lanes()] == ["b"]
    assert sq.stats().counts["waiting"] == 2


# -- with a worker ------------------------------------------------------------


async def wait_until(predicate: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


@asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[None]:
    task = asyncio.create_task(worker.run(install_signals=False))
    try:
        yield
    finally:
        worker.stop(immediate=True)
        await asyncio.wait_for(task, 10)


async def test_a_capped_lane_runs_at_most_its_cap_and_is_woken_by_completions(aq: Queue) -> None:
    await aq.set_lane("t", concurrency=2)
    running_now, most = 0, 0

    async def work(job: Job) -> None:
        nonlocal running_now, most
        running_now += 1
        most = max(most, running_now)
        await asyncio.sleep(0.05)
        running_now -= 1

    ids = await aq.add_many([{"name": "w", "group": "t"} for _ in range(8)])
    async with running(Worker(aq, {"w": work}, concurrency=6)):

        async def all_done() -> bool:
            jobs = [await aq.get(i) for i in ids]
            return all(j is not None and j.state == "completed" for j in jobs)

        await wait_until(all_done)
    assert most == 2


async def test_rate_limited_from_a_handler_throttles_the_lane_uncounted(aq: Queue) -> None:
    runs: list[float] = []

    async def call_api(job: Job) -> str:
        runs.append(time.monotonic())
        if len(runs) == 1:
            raise RateLimited(0.4)
        return "ok"

    job_id = await aq.add("api", group="tenant", max_attempts=1)
    async with running(Worker(aq, {"api": call_api}, concurrency=2)):

        async def done() -> bool:
            job = await aq.get(job_id)
            return job is not None and job.state == "completed"

        await wait_until(done)
    job = await aq.get(job_id)
    assert job is not None and job.attempts == 1  # the rate-limited run did not count
    assert runs[1] - runs[0] >= 0.35  # the lane was held (server clock; local monotonic ± 50 ms)


@pytest.mark.no_cluster("INFO commandstats counts one server's calls")
async def test_an_idle_worker_does_not_spin_on_a_paused_lane(
    aq: Queue, redis_client: redis.Redis
) -> None:
    await aq.set_lane("p", paused=True)
    job_id = await aq.add("w", group="p")
    done = asyncio.Event()

    async def work(job: Job) -> None:
        done.set()

    async with running(Worker(aq, {"w": work}, concurrency=2)):
        await asyncio.sleep(0.3)  # settle: the worker claims nothing and goes idle
        before = total_calls(redis_client)
        await asyncio.sleep(1.0)
        idle_calls = total_calls(redis_client) - before
        await aq.set_lane("p", paused=False)  # a resume wakes the idle worker at once
        await asyncio.wait_for(done.wait(), 5)
    assert idle_calls < 20, f"{idle_calls} commands in 1 s while nothing could be served"
    assert job_id


def total_calls(client: redis.Redis) -> int:
    stats: dict[str, dict[str, int]] = client.info("commandstats")
    return sum(entry["calls"] for entry in stats.values())


def test_counters_come_back_to_nothing(sq: SyncQueue, redis_client: redis.Redis) -> None:
    """After every kind of exit the lane's active and delayed counts are gone."""
    sq.set_lane("z", concurrency=3, max_waiting=100)
    ids = sq.add_many([{"name": "j", "group": "z", "max_attempts": 2} for _ in range(8)])
    delayed = sq.add("j", group="z", delay=60)
    sq.add("j", group="z", delay=0.3)
    a, b, c = sq.claim(10)
    sq.complete(a)
    sq.fail(b, "boom", retry_delay=0.3)  # retry pending, then due again
    sq.release(c, delay=0.3)
    d, e, f = sq.claim(10, lease=0.5)  # a cancelled run retries when its lease would end
    sq.cancel(d.id, retry=True)
    sq.cancel(e.id)
    sq.remove(f.id)
    sq.remove(delayed)
    sq.cancel(ids[-1])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        jobs = sq.claim(10)
        for job in jobs:
            sq.complete(job)
        counts = sq.stats().counts
        if not jobs and counts["waiting"] + counts["delayed"] + counts["failed"] == 0:
            break
        time.sleep(0.05)
    fields = redis_client.hgetall(QueueKeys(sq.name).lanectl)
    assert {k: v for k, v in fields.items() if k[:2] in ("a:", "d:", "k:")} == {}
    assert sq.stats().counts["active"] == 0


async def test_an_idle_worker_wakes_when_a_throttle_ends(aq: Queue) -> None:
    """Not at the next periodic maintenance (5 s here): at the throttle's end, which
    the maintenance report gives as the next fire time."""
    done = asyncio.Event()
    claimed: list[datetime] = []

    async def work(job: Job) -> None:
        assert job.claimed_at is not None
        claimed.append(job.claimed_at)
        done.set()

    async with running(Worker(aq, {"w": work}, concurrency=2, lease=30.0)):
        await asyncio.sleep(0.3)  # the worker is idle on the doorbell
        await aq.throttle("t", 0.8)
        await aq.add("w", group="t")  # rings: the claim finds the lane throttled, parks it
        [until] = [x.throttled_until for x in await aq.lanes() if x.group == "t"]
        await asyncio.wait_for(done.wait(), 10)
    # by the server's clock: not before the throttle's end, and soon after it
    assert until is not None and until <= claimed[0] < until + timedelta(seconds=2.2)


def test_the_default_lane_with_only_active_jobs_is_listed(sq: SyncQueue) -> None:
    """Since format 2 its active count is in the meta hash, not a lane-controls
    field the listing's scan meets (docs/design.md §9): listed all the same."""
    sq.add("only")
    [job] = sq.claim(1)
    rows = [x for x in sq.lanes() if x.group is None]
    assert len(rows) == 1 and rows[0].active == 1 and rows[0].backlog == 0, rows
    sq.complete(job)
    assert [x for x in sq.lanes() if x.group is None] == []
