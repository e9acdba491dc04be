"""A completion and the next claim in one call (``complete_and_claim``,
scripts/completeClaim.lua; issue 29).

The call is completeMany's completion, then claim's claim, in one script: it
completes exactly once, claims what claim would claim next (a twin queue that
completes and claims apart is the model), obeys lane controls, answers no job
on an empty queue, and still claims when the completion is refused (a lost
lease: the caller's slot is free either way). A worker at concurrency 1 drains
a queue with it, each job run once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

import echomq.worker.worker as worker_module
from echomq import JobNotFound, LeaseLost, Queue, State, SyncQueue, Worker
from echomq.job import Job

pytestmark = pytest.mark.timeout(60)


def _completed_events(q: SyncQueue, job_id: str) -> int:
    return sum(1 for e in q.job_events(job_id) if e.kind == "completed")


def _fill(q: SyncQueue) -> None:
    """Three lanes of weights 2, 1, 1 and two tiers: the rotation has work to do."""
    q.set_weight("a", 2)
    q.add_many(
        [{"name": "j", "data": f"a{i}", "group": "a"} for i in range(5)]
        + [{"name": "j", "data": f"b{i}", "group": "b", "priority": i % 2} for i in range(4)]
        + [{"name": "j", "data": f"d{i}"} for i in range(3)]
    )


def test_completes_once_and_claims_in_claims_order(
    make_sync: Callable[..., SyncQueue], queue_name: str
) -> None:
    combined, apart = make_sync(queue_name + "-cc"), make_sync(queue_name + "-apart")
    for q in (combined, apart):
        _fill(q)
    [held_c], [held_a] = combined.claim(1), apart.claim(1)
    order_c: list[Any] = [held_c.data]
    order_a: list[Any] = [held_a.data]
    for n in (1, 2, 1, 3, 1, 5):  # claims of several sizes, each completing one job
        done = combined.complete_and_claim([(held_c, {"r": held_c.data})], n)
        assert done.completions == [None]
        assert combined.get(held_c.id).state is State.COMPLETED  # type: ignore[union-attr]
        apart.complete(held_a, {"r": held_a.data})
        got_a = apart.claim(n)
        assert [j.data for j in done.claimed] == [j.data for j in got_a]
        order_c += [j.data for j in done.claimed]
        order_a += [j.data for j in got_a]
        if not done.claimed:
            break
        held_c, held_a = done.claimed[0], got_a[0]
        for extra_c, extra_a in zip(done.claimed[1:], got_a[1:], strict=True):
            combined.complete(extra_c)
            apart.complete(extra_a)
    assert order_c == order_a and len(order_c) == 12
    # completed exactly once: one event each, the totals agree with the twin
    assert combined.stats().counts == apart.stats().counts
    assert all(_completed_events(combined, j.id) == 1 for j in combined.jobs("completed"))


def test_sent_again_it_completes_nothing_twice(sq: SyncQueue) -> None:
    """A call sent again after its reply was lost (the same lease): the completion
    answers as recorded, once; the claim claims the next job."""
    sq.add_many([{"name": "j", "data": i} for i in range(3)])
    [job] = sq.claim(1)
    first = sq.complete_and_claim([(job, "r")], 1)
    again = sq.complete_and_claim([(job, "r")], 1)
    assert first.completions == again.completions == [None]
    assert [j.data for j in first.claimed] == [1] and [j.data for j in again.claimed] == [2]
    assert sq.stats().counts["completed"] == 1
    assert _completed_events(sq, job.id) == 1


def test_an_empty_queue_answers_no_job(sq: SyncQueue) -> None:
    sq.add("only", 1)
    [job] = sq.claim(1)
    done = sq.complete_and_claim([(job, None)], 5)
    assert done.completions == [None] and list(done.claimed) == []
    assert sq.get(job.id).state is State.COMPLETED  # type: ignore[union-attr]
    assert sq.stats().counts["active"] == 0


def test_a_lost_lease_is_refused_and_the_claim_goes_on(sq: SyncQueue) -> None:
    """Chosen: the caller's slot is free whether or not its completion counts (the
    job is no longer its to finish), so the claim runs all the same."""
    sq.add_many([{"name": "j", "data": i} for i in range(3)])
    [job] = sq.claim(1)
    token = job.lease_token
    job.lease_token = str(int(str(token)) + 7)  # another claim's token: not the holder
    done = sq.complete_and_claim([(job, "r")], 1)
    assert isinstance(done.completions[0], LeaseLost)
    assert [j.data for j in done.claimed] == [1]
    assert sq.get(job.id).state is State.ACTIVE  # type: ignore[union-attr]
    assert _completed_events(sq, job.id) == 0
    job.lease_token = token  # the holder still completes it, once
    assert sq.complete_and_claim([(job, "r")], 1).completions == [None]


def test_a_removed_job_is_not_found_and_the_claim_goes_on(sq: SyncQueue) -> None:
    sq.add_many([{"name": "j", "data": i} for i in range(2)])
    [job] = sq.claim(1)
    assert sq.remove(job.id)
    done = sq.complete_and_claim([(job, "r")], 1)
    assert isinstance(done.completions[0], JobNotFound)
    assert [j.data for j in done.claimed] == [1]


def test_the_claim_sees_the_slot_the_completion_frees(sq: SyncQueue) -> None:
    """Lane a capped at 1: the completion of a's running job lets the same call
    claim a's next job; a paused lane is passed over."""
    sq.set_lane("a", concurrency=1)
    sq.set_lane("p", paused=True)
    sq.add_many(
        [{"name": "j", "data": f"a{i}", "group": "a"} for i in range(3)]
        + [{"name": "j", "data": "p0", "group": "p"}]
    )
    [running] = sq.claim(1)
    assert running.data == "a0"
    assert sq.claim(5) == []  # a at its cap, p paused
    done = sq.complete_and_claim([(running, None)], 5)
    assert done.completions == [None]
    assert [j.data for j in done.claimed] == ["a1"]  # one: the cap, not five
    again = sq.complete_and_claim([(done.claimed[0], None)], 5)
    assert [j.data for j in again.claimed] == ["a2"]
    last = sq.complete_and_claim([(again.claimed[0], None)], 5)
    assert list(last.claimed) == []  # only the paused lane's job is left
    assert sq.stats().counts["waiting"] == 1


def test_a_capped_lane_stays_capped_for_another_lanes_completion(sq: SyncQueue) -> None:
    sq.set_lane("a", concurrency=1)
    sq.add_many(
        [{"name": "j", "data": f"a{i}", "group": "a"} for i in range(2)]
        + [{"name": "j", "data": f"b{i}", "group": "b"} for i in range(3)]
    )
    first = sq.claim(2)
    assert [j.data for j in first] == ["a0", "b0"]
    done = sq.complete_and_claim([(first[1], None)], 5)
    assert [j.data for j in done.claimed] == ["b1", "b2"]  # a is at its cap


def test_bad_input_is_refused_before_anything_is_sent(sq: SyncQueue) -> None:
    from echomq import EchoMQError

    sq.add("j", 1)
    [job] = sq.claim(1)
    with pytest.raises(EchoMQError, match="claim n 0"):
        sq.complete_and_claim([(job, None)], 0)
    with pytest.raises(EchoMQError, match="at least one"):
        sq.complete_and_claim([], 1)
    assert sq.get(job.id).state is State.ACTIVE  # type: ignore[union-attr]


async def test_a_worker_at_concurrency_1_drains_with_it_each_job_once(
    aq: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_module, "COMPLETE_AND_CLAIM_UP_TO", 1)
    calls = {"combined": 0, "claim": 0}
    combined, claim = aq.complete_and_claim, aq.claim

    async def counted_combined(*args: Any, **kwargs: Any) -> Any:
        calls["combined"] += 1
        return await combined(*args, **kwargs)

    async def counted_claim(*args: Any, **kwargs: Any) -> Any:
        calls["claim"] += 1
        return await claim(*args, **kwargs)

    aq.complete_and_claim = counted_combined  # type: ignore[method-assign]
    aq.claim = counted_claim  # type: ignore[method-assign]
    n = 60
    ids = await aq.add_many([{"name": "j", "data": i} for i in range(n)])
    runs: list[int] = []
    done = asyncio.Event()

    async def handler(job: Job) -> int:
        runs.append(job.data)
        if len(runs) >= n:
            done.set()
        return int(job.data) * 2

    worker = Worker(aq, {"j": handler}, concurrency=1, log_jobs=False)
    task = asyncio.create_task(worker.run(install_signals=False))
    try:
        await asyncio.wait_for(done.wait(), 30)
        deadline = time.monotonic() + 10
        while (await aq.stats()).counts["completed"] < n:
            assert time.monotonic() < deadline, "the last completion was not recorded"
            await asyncio.sleep(0.01)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 10)
    assert sorted(runs) == list(range(n)) and len(runs) == n  # each job once
    assert runs == list(range(n))  # one lane, one tier: in arrival order
    jobs = [await aq.get(i) for i in ids]
    assert all(j is not None and j.result == j.data * 2 for j in jobs)
    # the combined call carried (nearly) every claim: one round trip per job
    assert calls["combined"] >= n - 1
    assert calls["claim"] <= 3


async def test_above_the_threshold_the_worker_claims_apart(
    aq: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_module, "COMPLETE_AND_CLAIM_UP_TO", 1)
    used = 0
    combined = aq.complete_and_claim

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal used
        used += 1
        return await combined(*args, **kwargs)

    aq.complete_and_claim = counted  # type: ignore[method-assign]
    n = 40
    await aq.add_many([{"name": "j", "data": i} for i in range(n)])
    seen: list[int] = []
    done = asyncio.Event()

    async def handler(job: Job) -> None:
        seen.append(job.data)
        if len(seen) >= n:
            done.set()

    worker = Worker(aq, {"j": handler}, concurrency=4, log_jobs=False)
    task = asyncio.create_task(worker.run(install_signals=False))
    try:
        await asyncio.wait_for(done.wait(), 30)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 10)
    assert sorted(seen) == list(range(n)) and used == 0


def test_the_claim_counts_from_what_the_completion_wrote(sq: SyncQueue) -> None:
    """The claim starts as a call of its own would (META.next_transition): the
    default lane's active count the completion lowered, and the events it gave,
    are the claim's starting point, not the values read before the completion."""
    sq.add_many([{"name": "j", "data": i} for i in range(6)])
    [job] = sq.claim(1)
    for _ in range(4):
        [job] = sq.complete_and_claim([(job, None)], 1).claimed
    [lane] = [lane for lane in sq.lanes() if lane.group is None]
    assert lane.active == sq.stats().counts["active"] == 1
    kinds = [e.kind for e in sq.read_events("0").events]
    assert kinds.count("completed") == 4 and kinds.count("claimed") == 5


async def test_a_job_claimed_as_the_worker_stops_is_given_back(
    aq: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stop comes while the combined call is in flight: the job it claimed is
    released before the worker's run ends (waiting again, nothing left active)."""
    monkeypatch.setattr(worker_module, "COMPLETE_AND_CLAIM_UP_TO", 1)
    first, second = await aq.add_many([{"name": "j", "data": i} for i in range(2)])
    ran: list[int] = []

    async def handler(job: Job) -> int:
        ran.append(job.data)
        return int(job.data)

    worker = Worker(aq, {"j": handler}, concurrency=1, log_jobs=False)
    combined = aq.complete_and_claim

    async def stopping_first(*args: Any, **kwargs: Any) -> Any:
        worker.stop()
        return await combined(*args, **kwargs)

    aq.complete_and_claim = stopping_first  # type: ignore[method-assign]
    await asyncio.wait_for(worker.run(install_signals=False), 20)
    one, two = await aq.get(first), await aq.get(second)
    assert one is not None and one.state is State.COMPLETED
    assert two is not None and two.state is State.WAITING
    assert (await aq.stats()).counts["active"] == 0
    assert ran == [0]  # the job claimed as the stop came never started
