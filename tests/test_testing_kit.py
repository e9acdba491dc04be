"""echomq.testing as a user's suite meets it: the plugin's private server and
per-test queues, and drain() running real handlers until the queue is idle."""

from __future__ import annotations

import pytest

from echomq import Backoff, Queue, Retry, State, SyncQueue, Unrecoverable, current_job
from echomq.testing import drain, drain_sync

pytestmark = pytest.mark.timeout(60)


async def test_drain_runs_tasks_until_idle_and_returns_every_outcome(echomq_queue: Queue) -> None:
    q = echomq_queue
    assert q.url is not None and q.url.startswith("unix://")  # the session's private server

    @q.task(name="double")
    async def double(n: int) -> int:
        return 2 * n

    @q.task(name="picky", max_attempts=3, backoff=Backoff(base=0, jitter=0))
    def picky(n: int) -> int:
        if current_job().attempts < 2:
            raise Retry(delay=0)
        if n < 0:
            raise Unrecoverable("negative")
        return n

    await double.enqueue_many([(1,), (2,), (3,)])
    await picky.enqueue(5)
    doomed = await picky.enqueue(-1)
    outcomes = await drain(q, [double, picky])
    assert sorted(o.result for o in outcomes if o.name == "double") == [2, 4, 6]
    picky_runs = [(o.state, o.attempts, o.result) for o in outcomes if o.name == "picky"]
    assert sorted(picky_runs) == sorted(
        [
            (State.FAILED, 1, None),
            (State.FAILED, 1, None),
            (State.COMPLETED, 2, 5),
            (State.DEAD, 2, None),
        ]
    )
    [dead] = [o for o in outcomes if o.job_id == doomed and o.state is State.DEAD]
    assert dead.error == "Unrecoverable: negative"
    stats = await q.stats()
    assert stats.counts[State.WAITING] == stats.counts[State.ACTIVE] == 0


async def test_each_test_gets_a_queue_of_its_own(echomq_queue: Queue) -> None:
    assert not await echomq_queue.exists()  # nothing left over from the test above
    assert "each_test_gets_a_queue" in echomq_queue.name


def test_drain_sync_serves_a_sync_queue(echomq_sync_queue: SyncQueue) -> None:
    sq = echomq_sync_queue

    @sq.task(name="upper")
    def upper(word: str) -> str:
        return word.upper()

    upper.enqueue("abc")
    [outcome] = drain_sync(sq, [upper])
    assert (outcome.state, outcome.result, outcome.data) == (
        State.COMPLETED,
        "ABC",
        {"args": ["abc"]},
    )
