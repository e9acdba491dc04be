"""Batches (DESIGN §10 "Batches"): children, counts, exactly-once callbacks, cancel,
depends_on a batch, as_completed. Every test runs on each backend."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from echomq import Dedupe, Queue, SyncQueue
from echomq.batches import MAX_CHILDREN, new_batch_id
from echomq.errors import (
    BatchNotFound,
    EchoMQError,
    InvalidOption,
    InvalidPriority,
    InvalidState,
)
from echomq.job import Job, State

CALLBACKS = {
    "on_success": {"name": "cb_success", "data": {"k": "s"}},
    "on_complete": {"name": "cb_complete", "data": {"k": "c"}},
    "on_death": {"name": "cb_death", "data": {"k": "d"}},
}
CALLBACK_NAMES = ("cb_success", "cb_complete", "cb_death")


def run_all(sq: SyncQueue, *, fail: set[str] = frozenset(), deadline: float = 20.0) -> list[Job]:  # type: ignore[assignment]
    """Claim and finish every waiting job (children and callbacks) until none is
    left; a child whose data names it in ``fail`` fails for good. Returns the
    callback jobs claimed."""
    callbacks: list[Job] = []
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        jobs = sq.claim(100)
        if not jobs:
            if not sq.jobs("delayed", count=1):
                return callbacks
            time.sleep(0.05)
            continue
        for job in jobs:
            if job.name in CALLBACK_NAMES:
                callbacks.append(job)
                sq.complete(job)
            elif isinstance(job.data, dict) and job.data.get("i") in fail:
                sq.fail(job, "boom", retry=False)
            else:
                sq.complete(job)
    raise AssertionError("jobs left after the deadline")


def fired(sq: SyncQueue, batch_id: str) -> dict[str, str | None]:
    return sq.batch_status(batch_id).callbacks


def test_batch_children_counts_and_success(sq: SyncQueue) -> None:
    b = sq.batch(**CALLBACKS)
    assert b.id.startswith("bat_")
    first = b.add("child", {"i": "0"})
    more = b.add_many([{"name": "child", "data": {"i": str(i)}} for i in range(1, 5)])
    third = sq.add("child", {"i": "5"}, batch=b.id)
    assert sq.get(first).batch == b.id  # type: ignore[union-attr]
    status = sq.batch_status(b.id)
    assert (status.total, status.waiting, status.state, status.closed) == (6, 6, "open", False)
    claimed = sq.claim(2)
    status = sq.batch_status(b.id)
    assert (status.active, status.waiting) == (2, 4)
    assert all(job.batch == b.id for job in claimed)
    for job in claimed:
        sq.complete(job)
    # nothing fires before close, even when every child finished
    callbacks = run_all(sq)
    assert callbacks == []
    status = sq.batch_status(b.id)
    assert (status.completed, status.state) == (6, "open")
    assert status.callbacks == dict.fromkeys(CALLBACKS)
    # the close makes them due: on_success and on_complete, added in that step
    assert b.close() == "succeeded"
    callbacks = run_all(sq)
    assert sorted(job.name for job in callbacks) == ["cb_complete", "cb_success"]
    assert all(job.batch == b.id for job in callbacks)
    assert {job.data["k"] for job in callbacks} == {"s", "c"}
    status = sq.batch_status(b.id)
    assert status.state == "succeeded" and status.callbacks["on_death"] is None
    assert status.callbacks["on_success"] in {job.id for job in callbacks}
    # closing again changes nothing, and adds are refused
    assert b.close() == "succeeded"
    assert run_all(sq) == []
    with pytest.raises(InvalidState, match="closed"):
        sq.add("child", batch=b.id)
    assert sq.batch_status(b.id).total == 6
    assert more and third


def test_last_completion_fires_and_death_fires_once(sq: SyncQueue) -> None:
    with sq.batch(**CALLBACKS) as b:
        for i in range(4):
            b.add("child", {"i": str(i)}, max_attempts=1)
    callbacks = run_all(sq, fail={"1", "2"})
    names = sorted(job.name for job in callbacks)
    assert names == ["cb_complete", "cb_death"]  # on_death once for two deaths; no success
    status = sq.batch_status(b.id)
    assert (status.completed, status.dead, status.state) == (2, 2, "failed")


def test_retry_dead_after_on_death_does_not_fire_again(sq: SyncQueue) -> None:
    with sq.batch(**CALLBACKS) as b:
        for i in range(3):
            b.add("child", {"i": str(i)}, max_attempts=1)
    callbacks = run_all(sq, fail={"0"})
    assert sorted(job.name for job in callbacks) == ["cb_complete", "cb_death"]
    assert sq.batch_status(b.id).state == "failed"
    # the dead child comes back and completes: the batch is succeeded now; on_success
    # fires (every child has completed), on_complete and on_death do not fire again
    assert len(sq.retry_dead()) == 1
    status = sq.batch_status(b.id)
    assert (status.dead, status.state) == (0, "running")
    callbacks = run_all(sq)
    assert [job.name for job in callbacks] == ["cb_success"]
    status = sq.batch_status(b.id)
    assert (status.completed, status.dead, status.state) == (3, 0, "succeeded")
    assert all(status.callbacks.values())


def test_retry_stall_and_release_are_not_finishes(make_sync: Callable[..., SyncQueue]) -> None:
    sq = make_sync(max_stalls=1)
    with sq.batch(**CALLBACKS) as b:
        b.add("child", {"i": "retry"}, max_attempts=3)
        b.add("child", {"i": "release"})
        b.add("child", {"i": "stall"})
    jobs = {job.data["i"]: job for job in sq.claim(3, lease=0.3)}
    sq.fail(jobs["retry"], "again", retry_delay=0)
    sq.release(jobs["release"])
    status = sq.batch_status(b.id)
    assert (status.active, status.waiting, status.completed) == (1, 2, 0)
    # the stalled lease expires: the child is waiting again, not finished
    time.sleep(0.5)
    sq.maintain()
    status = sq.batch_status(b.id)
    assert (status.active, status.waiting, status.dead, status.state) == (0, 3, 0, "running")
    assert fired(sq, b.id) == dict.fromkeys(CALLBACKS)
    callbacks = run_all(sq)
    assert sorted(job.name for job in callbacks) == ["cb_complete", "cb_success"]


def test_stalled_to_death_fires_on_death(make_sync: Callable[..., SyncQueue]) -> None:
    sq = make_sync(max_stalls=0)
    with sq.batch(**CALLBACKS) as b:
        b.add("child", {"i": "stall"})
    assert len(sq.claim(1, lease=0.3)) == 1
    time.sleep(0.5)
    sq.maintain()
    callbacks = run_all(sq)
    assert sorted(job.name for job in callbacks) == ["cb_complete", "cb_death"]
    assert sq.batch_status(b.id).dead == 1


def test_child_removed_by_hand_leaves_the_batch(sq: SyncQueue) -> None:
    with sq.batch(**CALLBACKS) as b:
        keep = b.add("child", {"i": "0"})
        gone = b.add("child", {"i": "1"})
    job = sq.claim(1)[0]
    assert job.id == keep
    sq.complete(job)
    assert sq.batch_status(b.id).state == "running"
    # removing the unfinished child: the batch holds one child, which completed
    assert sq.remove(gone)
    status = sq.batch_status(b.id)
    assert (status.total, status.completed, status.state) == (1, 1, "succeeded")
    callbacks = run_all(sq)
    assert sorted(job.name for job in callbacks) == ["cb_complete", "cb_success"]
    # removing a finished child changes no count
    assert sq.remove(keep)
    assert sq.batch_status(b.id).total == 1


def test_empty_batch_fires_at_close(sq: SyncQueue) -> None:
    b = sq.batch(on_success={"name": "cb_success"})
    assert b.close() == "succeeded"
    assert [job.name for job in run_all(sq)] == ["cb_success"]


def test_cancel_batch(sq: SyncQueue) -> None:
    b = sq.batch(**CALLBACKS)
    ids = b.add_many([{"name": "child", "data": {"i": str(i)}} for i in range(5)])
    b.add("child", {"i": "late"}, delay=60)
    running = sq.claim(1)[0]
    assert sq.cancel_batch(b.id) is True
    status = sq.batch_status(b.id)
    assert (status.state, status.cancelled, status.dead, status.active) == ("cancelled", 5, 1, 0)
    assert sq.get(ids[1]).state is State.CANCELLED  # type: ignore[union-attr]
    assert {job.id for job in sq.jobs("cancelled")} == set(ids[1:]) | {
        j.id for j in sq.jobs("cancelled") if j.data == {"i": "late"}
    }
    assert sq.stats().counts["cancelled"] == 5
    # the running one was taken from its worker (cancel semantics)
    with pytest.raises(EchoMQError):
        sq.complete(running)
    # no callback after a cancel, not even at close; no more children
    b.close()
    assert run_all(sq) == []
    with pytest.raises(InvalidState, match="cancelled"):
        sq.add("child", batch=b.id)


def test_a_cancelled_childs_key_is_finished_as_dedupe_finishes_a_dead_jobs(
    sq: SyncQueue, redis_client: Any
) -> None:
    b = sq.batch()
    plain = b.add("child", key="plain-key")
    dropped = b.add("child", dedupe=Dedupe("drop-key", "drop", window=60.0))
    assert sq.cancel_batch(b.id) is True
    assert {sq.get(i).state for i in (plain, dropped)} == {State.CANCELLED}  # type: ignore[union-attr]
    # a plain key: kept for the retention of dead jobs, then it goes
    assert redis_client.pttl(sq.engine.keys.idem("plain-key")) > 60_000
    # drop with a window: held for the window after the cancel (its finish), by
    # its record with the finish time (includes/dedupe.lua), not by the retention
    record = sq.engine.keys.idem("drop-key")
    assert 0 < redis_client.pttl(record) <= 60_000
    assert redis_client.get(record).startswith(dropped + " drop 60000 ")
    assert len(redis_client.get(record).split()) == 6  # ... <first> <finished>
    assert sq.add("child", dedupe=Dedupe("drop-key", "drop", window=60.0)) == dropped


async def test_async_batch_and_as_completed(aq: Queue) -> None:
    async with aq.batch(on_complete={"name": "cb_complete"}) as b:
        ids = [await b.add("child", {"i": i}) for i in range(5)]
    seen: list[str] = []

    async def consume() -> None:
        async for job in aq.as_completed(b.id):
            seen.append(job.id)

    task = asyncio.create_task(consume())
    for _ in range(5):
        job = (await aq.claim(1))[0]
        await aq.complete(job, result={"ok": job.data["i"]})
        await asyncio.sleep(0.01)
    async with asyncio.timeout(10):
        await task
    assert sorted(seen) == sorted(ids)
    # resumable: after the first two, the other three in the same order
    rest = [job.id async for job in aq.as_completed(b.id, after=2)]
    assert rest == seen[2:]


def test_depends_on_batch(sq: SyncQueue) -> None:
    with sq.batch() as b:
        b.add("child", {"i": "0"})
        b.add("child", {"i": "1"})
    fan_in = sq.add("fan_in", {}, depends_on=[b.id])
    assert sq.get(fan_in).state is State.BLOCKED  # type: ignore[union-attr]
    run_all(sq)
    deadline = time.monotonic() + 10
    while sq.get(fan_in).state is not State.COMPLETED:  # type: ignore[union-attr]
        assert time.monotonic() < deadline
        sq.maintain()
        run_all(sq)
    # a failed batch counts as a dead dependency
    with sq.batch() as bad:
        bad.add("child", {"i": "x"}, max_attempts=1)
    blocked = sq.add("fan_in", {}, depends_on=[bad.id])
    run_all(sq, fail={"x"})
    deadline = time.monotonic() + 10
    while sq.get(blocked).state is not State.DEAD:  # type: ignore[union-attr]
        assert time.monotonic() < deadline
        sq.maintain()
    assert bad.id in (sq.get(blocked).error or "")  # type: ignore[union-attr]
    with pytest.raises(EchoMQError, match="failed"):
        sq.add("fan_in", {}, depends_on=[bad.id])


def test_bad_input_writes_nothing(make_sync: Callable[..., SyncQueue], redis_client: Any) -> None:
    sq = make_sync()
    for bad in ({"data": 1}, "send", 42, {"name": "x", "key": "k"}, {"name": "x", "nope": 1}):
        with pytest.raises(InvalidOption):
            sq.batch(on_success=bad)
    with pytest.raises(InvalidPriority):
        sq.batch(on_success={"name": "x", "priority": -1})
    assert not sq.exists()
    with pytest.raises(BatchNotFound):
        sq.add("child", batch=new_batch_id())
    with pytest.raises(InvalidOption):
        sq.add("child", batch="job_nope")
    with pytest.raises(BatchNotFound):
        sq.batch_status(new_batch_id())
    other = make_sync(sq.name + "-other")
    b = other.batch()
    with pytest.raises(BatchNotFound):  # a batch of another queue
        sq.add("child", batch=b.id)
    with pytest.raises(BatchNotFound):
        sq.cancel_batch(b.id)
    assert sq.stats().totals["added"] == 0
    # more than MAX_CHILDREN: refused, nothing written
    redis_client.hset(other.engine.keys.batch(b.id), "t", MAX_CHILDREN - 1)
    with pytest.raises(InvalidOption, match="100,000"):
        other.add_many([{"name": "child", "batch": b.id}] * 2)
    with pytest.raises(InvalidOption, match="100,000"):
        b.add_many([{"name": "child"}, {"name": "child"}])
    assert other.batch_status(b.id).total == MAX_CHILDREN - 1
    b.add("child")
    assert other.batch_status(b.id).total == MAX_CHILDREN


@pytest.mark.slow
def test_a_batch_of_100_000_children(sq: SyncQueue, request: pytest.FixtureRequest) -> None:
    """The most children a batch holds: added in chunks, closed, run, cancelled
    work bounded per call; the callbacks fire once, at the last completion."""
    if request.node.callspec.params.get("backend") != "valkey":
        pytest.skip("one backend is enough for the size")
    started = time.monotonic()
    b = sq.batch(on_success={"name": "cb_success"}, on_complete={"name": "cb_complete"})
    for _ in range(0, MAX_CHILDREN, 5_000):
        b.add_many([{"name": "child"}] * 5_000)
    added = time.monotonic()
    with pytest.raises(InvalidOption, match="100,000"):
        b.add("child")
    b.close()
    status_started = time.perf_counter()
    status = sq.batch_status(b.id)
    status_seconds = time.perf_counter() - status_started
    assert (status.total, status.waiting, status.state) == (MAX_CHILDREN, MAX_CHILDREN, "running")
    callbacks: list[Job] = []
    while jobs := sq.claim(5_000):
        children = [job for job in jobs if job.name == "child"]
        callbacks += [job for job in jobs if job.name != "child"]
        assert sq.batch_status(b.id).active == len(children)
        if children:
            sq.complete_many([(job, None) for job in children])
        for job in jobs:
            if job.name != "child":
                sq.complete(job)
    callbacks += sq.claim(10)
    ran = time.monotonic()
    assert sorted(job.name for job in callbacks) == ["cb_complete", "cb_success"]
    status = sq.batch_status(b.id)
    assert (status.completed, status.state) == (MAX_CHILDREN, "succeeded")
    print(
        f"\n100,000 children: added in {added - started:.1f} s (20 x add_many of 5,000), "
        f"run in {ran - added:.1f} s (claim 5,000 + complete_many); "
        f"batch_status {status_seconds * 1000:.2f} ms"
    )
    assert ran - started < 60


def test_tasks_join_batches_and_make_callbacks(sq: SyncQueue) -> None:
    @sq.task(name="resize")
    def resize(image: int) -> int:
        return image

    @sq.task(name="report")
    def report(run: int) -> int:
        return run

    with sq.batch(on_complete=report.prepare(7)) as b:
        child = resize.enqueue_with(batch=b.id).enqueue(1)
    assert sq.get(child).batch == b.id  # type: ignore[union-attr]
    [job] = sq.claim(1)
    sq.complete(job, 1)
    [callback] = sq.claim(1)
    assert (callback.name, callback.data, callback.batch) == ("report", {"args": [7]}, b.id)
    assert report.run_job(callback) == 7
    with pytest.raises(InvalidOption, match="not a job spec"):
        sq.batch(on_success=report)


def test_sync_as_completed_ends_when_every_child_finished(sq: SyncQueue) -> None:
    with sq.batch() as b:
        ids = b.add_many([{"name": "child", "max_attempts": 1}] * 3)
    for job in sq.claim(3):
        if job.id == ids[1]:
            sq.fail(job, "no", retry=False)
        else:
            sq.complete(job)
    finished = list(sq.as_completed(b.id))
    assert sorted(job.id for job in finished) == sorted(ids)
    assert {job.state for job in finished} == {State.COMPLETED, State.DEAD}


def test_cancel_in_steps_and_a_claim_between_them_runs_nothing(sq: SyncQueue) -> None:
    from echomq.engine.batches import CANCEL_PAGE
    from echomq.steps import Next

    b = sq.batch(on_complete={"name": "cb_complete"})
    everyone = 2 * CANCEL_PAGE + CANCEL_PAGE // 2  # three pages, the last one short
    b.add_many([{"name": "child"}] * everyone)
    b.close()
    first = sq.sender.send(sq.engine.cancel_batch(b.id))
    assert isinstance(first, Next)  # one page done, more to go
    assert sq.batch_status(b.id).cancelled == CANCEL_PAGE
    # a claim before the next step meets children of the cancelled batch: it
    # cancels them instead of leasing them (they never run)
    # (it goes on past the 20 asked while it finds none to lease, up to its budget
    # of jobs it may drop: EXPIRED_BUDGET, includes/time.lua)
    assert sq.claim(20) == []
    assert CANCEL_PAGE + 20 <= sq.batch_status(b.id).cancelled <= CANCEL_PAGE + 70
    step: Any = first
    calls = 1
    while isinstance(step, Next):
        step = sq.sender.send(step.call)
        calls += 1
    assert step is True and calls == 3
    status = sq.batch_status(b.id)
    assert (status.cancelled, status.waiting, status.state) == (everyone, 0, "cancelled")
    assert sq.stats().counts["cancelled"] == everyone
    assert sq.claim(10) == [] and sq.jobs("delayed") == []  # and no callback


def test_a_child_past_its_expiry_dies_and_fires_on_death(sq: SyncQueue) -> None:
    with sq.batch(**CALLBACKS) as b:
        b.add("child", {"i": "late"}, expires=0.2)
    time.sleep(0.4)  # past its expiry: the next claim buries it (never run)
    callbacks = run_all(sq)
    assert sorted(job.name for job in callbacks) == ["cb_complete", "cb_death"]
    assert (sq.batch_status(b.id).dead, sq.batch_status(b.id).state) == (1, "failed")


def test_depends_on_a_batch_and_a_job(sq: SyncQueue) -> None:
    with sq.batch() as b:
        b.add("child", {"i": "0"})
    job = sq.add("solo", {})
    fan_in = sq.add("fan_in", {}, depends_on=[b.id, job])
    for claimed in sq.claim(2):
        sq.complete(claimed, 1)
    deadline = time.monotonic() + 10
    while sq.get(fan_in).state is not State.WAITING:  # type: ignore[union-attr]
        assert time.monotonic() < deadline
        sq.maintain()  # releases the batch's dependents (bounded steps)
    assert sq.dependency_results(fan_in) == {b.id: None, job: 1}


def test_maintenance_ages_out_cancelled_children_once_cancels_stop(
    make_sync: Callable[..., SyncQueue],
) -> None:
    """The cancelled set is kept as the dead set is (keep_dead_age): its cancel
    steps prune it, and so does maintenance, so it shrinks with no cancel after."""
    q = make_sync(keep_dead_age=1.0)
    b = q.batch()
    ids = b.add_many([{"name": "child"} for _ in range(3)])
    assert q.cancel_batch(b.id) is True
    assert q.stats().counts["cancelled"] == 3
    q.maintain()  # not a second old yet: kept
    assert q.stats().counts["cancelled"] == 3
    deadline = time.monotonic() + 10
    while q.stats().counts["cancelled"]:
        assert time.monotonic() < deadline, "maintenance never pruned the cancelled children"
        time.sleep(0.25)
        q.maintain()
    assert all(q.get(i) is None for i in ids)
