"""Deduplication and debounce (DESIGN §10): each mode's edges on a frozen server clock.

The frozen server (tests/clock.py) runs Valkey only: Debian's Redis 7 does not
start under libfaketime. The mode semantics that need no clock control run on
every backend (Valkey, Redis 7, Valkey 9, the cluster) in test_dedupe_backends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from commandstats import script_calls
from conftest import FrozenServer
from echomq import Dedupe, Event, Job, Queue, State, SyncQueue

WINDOW_MS = 5_000


@pytest.fixture
def fq(frozen_server: FrozenServer, queue_name: str) -> Iterator[SyncQueue]:
    q = SyncQueue(queue_name, frozen_server.url, max_attempts=3)
    try:
        yield q
    finally:
        q.close()


def got(q: SyncQueue, job_id: str) -> Job:
    job = q.get(job_id)
    assert job is not None, job_id
    return job


def deduplicated(q: SyncQueue) -> list[Event]:
    page = q.read_events("0", 200)
    return [e for e in page.events if e.kind == "deduplicated"]


# -- drop ---------------------------------------------------------------------


def test_drop_holds_while_alive_and_exactly_until_the_window_after_finish(
    fq: SyncQueue, frozen_server: FrozenServer
) -> None:
    clock = frozen_server.clock
    rule = Dedupe("inv", window=WINDOW_MS / 1000)
    first = fq.add("pay", {"n": 1}, dedupe=rule)
    assert fq.add("pay", {"n": 2}, dedupe=rule) == first  # waiting
    [job] = fq.claim(1, lease=600)
    clock.advance(60_000)  # running long: no TTL lapses while it runs
    assert fq.add("pay", {"n": 3}, dedupe=rule) == first
    fq.complete(job)
    clock.advance(WINDOW_MS - 1)
    assert fq.add("pay", dedupe=rule) == first  # one ms before the window ends
    clock.advance(1)
    second = fq.add("pay", {"n": 4}, dedupe=rule)  # exactly at the window: a new job
    assert second != first
    assert got(fq, second).data == {"n": 4}
    assert got(fq, first).data == {"n": 1}
    assert fq.stats().totals["added"] == 2
    outcomes = [(e.outcome, e.job_id) for e in deduplicated(fq)]
    assert outcomes == [("dropped", first)] * 3


def test_drop_window_holds_after_death_and_releases_on_remove(
    fq: SyncQueue, frozen_server: FrozenServer
) -> None:
    clock = frozen_server.clock
    rule = Dedupe("k", window=WINDOW_MS / 1000)
    first = fq.add("j", max_attempts=1, dedupe=rule)
    [job] = fq.claim(1)
    fq.fail(job, "boom")  # dead: the window runs from its death
    assert got(fq, first).state is State.DEAD
    clock.advance(WINDOW_MS - 1)
    assert fq.add("j", dedupe=rule) == first
    clock.advance(1)
    second = fq.add("j", dedupe=rule)
    assert second != first
    # a job removed while it holds the key releases it at once
    assert fq.remove(second)
    third = fq.add("j", dedupe=rule)
    assert third not in (first, second)


def test_drop_window_outlives_a_job_pruned_by_count(
    frozen_server: FrozenServer, queue_name: str
) -> None:
    q = SyncQueue(queue_name, frozen_server.url, keep_completed=0)
    try:
        rule = Dedupe("k", window=WINDOW_MS / 1000)
        first = q.add("j", dedupe=rule)
        q.complete(q.claim(1)[0])
        assert q.get(first) is None  # pruned at once (keep_completed=0)
        assert q.add("j", dedupe=rule) == first  # the window still holds
        frozen_server.clock.advance(WINDOW_MS)
        assert q.add("j", dedupe=rule) != first
    finally:
        q.close()


# -- throttle -----------------------------------------------------------------


def test_throttle_one_job_per_window_from_the_first_add(
    fq: SyncQueue, frozen_server: FrozenServer
) -> None:
    clock = frozen_server.clock
    rule = Dedupe("t", mode="throttle", window=WINDOW_MS / 1000)
    first = fq.add("ping", {"n": 1}, dedupe=rule)
    fq.complete(fq.claim(1)[0])  # finishing does not end the window
    clock.advance(WINDOW_MS - 1)
    assert fq.add("ping", {"n": 2}, dedupe=rule) == first
    clock.advance(1)  # exactly at the window: the next one
    second = fq.add("ping", {"n": 3}, dedupe=rule)
    assert second != first
    clock.advance(WINDOW_MS - 1)
    assert fq.add("ping", dedupe=rule) == second  # counted from its own first add
    assert [e.outcome for e in deduplicated(fq)] == ["throttled", "throttled"]


# -- debounce -----------------------------------------------------------------


def test_debounce_replaces_data_and_moves_the_run_time_up_to_max_wait(
    fq: SyncQueue, frozen_server: FrozenServer
) -> None:
    clock = frozen_server.clock
    start = clock.now_ms
    rule = Dedupe("d", mode="debounce", window=5, max_wait=12)
    first = fq.add("save", {"v": 1}, dedupe=rule)
    job = got(fq, first)
    assert job.state is State.DELAYED
    assert job.run_at is not None and round(job.run_at.timestamp() * 1000) == start + 5_000
    for v in (2, 3, 4):  # one add every 3 s: the quiet 5 s never come
        clock.advance(3_000)
        assert fq.claim(1) == []
        assert fq.add("save", {"v": v}, dedupe=rule) == first
    job = got(fq, first)
    assert job.data == {"v": 4}
    # 12 s after the first add, not 12 + 5: max_wait caps it
    assert job.run_at is not None and round(job.run_at.timestamp() * 1000) == start + 12_000
    clock.set(start + 12_000 - 1)
    assert fq.claim(1) == []
    clock.set(start + 12_000)  # exactly at max_wait: due
    [claimed] = fq.claim(1)
    assert claimed.id == first and claimed.data == {"v": 4}
    # running: the next add is a new job (the running one keeps its data)
    second = fq.add("save", {"v": 5}, dedupe=rule)
    assert second != first
    assert got(fq, first).data == {"v": 4}
    assert got(fq, second).state is State.DELAYED
    assert [e.outcome for e in deduplicated(fq)] == ["replaced"] * 3


def test_debounce_exactly_at_the_window(fq: SyncQueue, frozen_server: FrozenServer) -> None:
    clock = frozen_server.clock
    rule = Dedupe("d", mode="debounce", window=WINDOW_MS / 1000)
    first = fq.add("save", {"v": 1}, dedupe=rule)
    clock.advance(WINDOW_MS - 1)
    assert fq.claim(1) == []
    clock.advance(1)
    [job] = fq.claim(1)
    assert job.id == first
    fq.complete(job)
    second = fq.add("save", {"v": 2}, dedupe=rule)  # finished: a new job
    assert second != first


def test_debounce_of_a_due_job_keeps_its_place(fq: SyncQueue, frozen_server: FrozenServer) -> None:
    """A job that became due is not pushed back: it runs with the latest data."""
    clock = frozen_server.clock
    rule = Dedupe("d", mode="debounce", window=1)
    first = fq.add("save", {"v": 1}, dedupe=rule)
    clock.advance(1_000)
    fq.maintain()  # promoted: waiting
    assert got(fq, first).state is State.WAITING
    assert fq.add("save", {"v": 2}, dedupe=rule) == first
    [job] = fq.claim(1)
    assert (job.id, job.data) == (first, {"v": 2})


def test_debounce_a_removed_job_frees_the_key(fq: SyncQueue) -> None:
    rule = Dedupe("d", mode="debounce", window=5)
    first = fq.add("save", dedupe=rule)
    fq.remove(first)
    assert fq.add("save", dedupe=rule) != first


# -- latest -------------------------------------------------------------------


def test_latest_holds_one_behind_a_running_job_that_fails_and_retries(
    fq: SyncQueue, frozen_server: FrozenServer
) -> None:
    rule = Dedupe("l", mode="latest")
    first = fq.add("sync", {"v": 1}, dedupe=rule)
    assert fq.add("sync", {"v": 2}, dedupe=rule) == first  # not started: replaced
    [running] = fq.claim(1)
    assert running.data == {"v": 2}
    behind = fq.add("sync", {"v": 3}, dedupe=rule)
    assert behind != first
    assert fq.add("sync", {"v": 4}, dedupe=rule) == behind  # the waiting one takes the latest
    assert got(fq, behind).state is State.BLOCKED
    fq.fail(running, "boom", retry_delay=0)  # a retry pending: still not finished
    assert got(fq, first).state is State.FAILED
    [again] = fq.claim(5)  # only the retry: the one behind it never runs beside it
    assert again.id == first
    assert fq.add("sync", {"v": 5}, dedupe=rule) == behind
    assert fq.claim(5) == []
    fq.complete(again)
    [after] = fq.claim(5)
    assert (after.id, after.data) == (behind, {"v": 5})
    outcomes = [e.outcome for e in deduplicated(fq)]
    assert outcomes == ["replaced", "replaced", "replaced"]


def test_latest_behind_a_job_that_dies_or_is_removed_runs(
    fq: SyncQueue, frozen_server: FrozenServer
) -> None:
    rule = Dedupe("l", mode="latest")
    first = fq.add("sync", {"v": 1}, max_attempts=1, dedupe=rule)
    [running] = fq.claim(1)
    behind = fq.add("sync", {"v": 2}, dedupe=rule)
    fq.fail(running, "boom")  # dead: the one behind it is released (maintenance)
    fq.maintain()
    [after] = fq.claim(5)
    assert after.id == behind
    # removed while one waits behind it: that one runs; and once it is removed
    # too, the key is free
    third = fq.add("sync", {"v": 3}, dedupe=rule)
    assert got(fq, third).state is State.BLOCKED
    assert fq.remove(behind)
    fq.maintain()
    assert got(fq, third).state is State.WAITING
    assert fq.remove(third)
    assert fq.add("sync", dedupe=rule) not in (first, behind, third)


def test_latest_removing_the_waiting_one_keeps_the_running_one_holding(fq: SyncQueue) -> None:
    rule = Dedupe("l", mode="latest")
    first = fq.add("sync", dedupe=rule)
    [running] = fq.claim(1)
    behind = fq.add("sync", dedupe=rule)
    assert fq.remove(behind)
    again = fq.add("sync", {"v": 9}, dedupe=rule)
    assert again not in (first, behind)
    assert got(fq, again).state is State.BLOCKED  # still behind the running one
    assert fq.claim(5) == []
    fq.complete(running)
    [after] = fq.claim(5)
    assert after.id == again


# -- batches --------------------------------------------------------------------


def test_add_many_with_two_items_of_one_key(fq: SyncQueue) -> None:
    for mode, window in (("drop", None), ("throttle", 5.0), ("debounce", 5.0), ("latest", None)):
        rule = Dedupe(f"k-{mode}", mode=mode, window=window)  # type: ignore[arg-type]
        a, b = fq.add_many(
            [
                {"name": "j", "data": {"v": 1}, "dedupe": rule},
                {"name": "j", "data": {"v": 2}, "dedupe": rule},
            ]
        )
        assert a == b, mode
        want = {"v": 2} if mode in ("debounce", "latest") else {"v": 1}
        assert got(fq, a).data == want, mode
    assert fq.stats().totals["added"] == 4


def test_coalesced_adds_of_one_key(frozen_server: FrozenServer, queue_name: str) -> None:
    """Concurrent adds on one Queue share add calls (flows/coalescing.py): the first
    goes alone, the others join the next call, which decides them in order."""
    rule = Dedupe("c", mode="latest")

    async def main() -> list[str]:
        q = Queue(queue_name, frozen_server.url)
        try:
            await q.client()
            return list(
                await asyncio.gather(*(q.add("j", {"v": i}, dedupe=rule) for i in range(20)))
            )
        finally:
            await q.close()

    with frozen_server.server.client() as client:
        before = script_calls(client)
        ids = asyncio.run(main())
        calls = script_calls(client) - before
    assert calls < 20  # coalesced
    assert len(set(ids)) == 1
    q = SyncQueue(queue_name, frozen_server.url)
    try:
        assert got(q, ids[0]).data == {"v": 19}
        assert q.stats().totals["added"] == 1
        assert [e.outcome for e in deduplicated(q)] == ["replaced"] * 19
    finally:
        q.close()


def test_latest_removing_the_last_one_leaves_no_record(
    fq: SyncQueue, frozen_server: FrozenServer
) -> None:
    """The key goes back to the job it was held behind only while that one lives:
    else nothing of the key is left (no record without an expiry)."""
    rule = Dedupe("l", mode="latest")
    fq.add("sync", dedupe=rule)
    [running] = fq.claim(1)
    behind = fq.add("sync", dedupe=rule)
    fq.complete(running)
    assert got(fq, behind).state is State.WAITING
    assert fq.remove(behind)
    with frozen_server.server.client() as client:
        assert client.exists(fq.engine.keys.idem("l")) == 0
