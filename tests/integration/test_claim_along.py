"""The worker's completions carry its next claim (echomq.worker.completions):
one round trip where there were two, and each half keeps its own outcome."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from echomq import Job, Queue, State, Worker
from echomq.call import Call
from echomq.engine import Claimed

pytestmark = pytest.mark.timeout(60)


def count_round_trips(q: Queue) -> dict[str, int]:
    """Count the queue's sends by kind: one call (send), a wait and its claim
    (send_after), or two calls together (send_pair)."""
    counts = {"send": 0, "send_after": 0, "send_pair": 0}
    for kind in counts:
        original = getattr(q.sender, kind)

        def counted(*args: Any, _original: Any = original, _kind: str = kind) -> Any:
            counts[_kind] += 1
            return _original(*args)

        setattr(q.sender, kind, counted)
    return counts


async def test_at_concurrency_one_each_completion_carries_the_next_claim(aq: Queue) -> None:
    n = 40
    served: list[int] = []
    done = asyncio.Event()

    async def work(job: Job) -> None:
        served.append(job.data)
        if len(served) == n:
            done.set()

    ids = await aq.add_many([{"name": "work", "data": i} for i in range(n)])
    counts = count_round_trips(aq)
    worker = Worker(aq, {"work": work}, concurrency=1)
    task = asyncio.create_task(worker.run(install_signals=False))
    try:
        await asyncio.wait_for(done.wait(), 30)
        while (await aq.get(ids[-1])).state is not State.COMPLETED:  # type: ignore[union-attr]
            await asyncio.sleep(0.01)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 10)
    assert served == list(range(n))  # in order, each once
    # a claim and a completion per job would be 2n round trips; carried, about n
    # (plus the first claim, maintenance and a heartbeat or two)
    trips = sum(counts.values())
    assert counts["send_pair"] >= n - 2, counts
    assert trips <= n + 10, counts
    stats = await aq.stats()
    assert stats.counts["active"] == 0 and stats.totals["completed"] == n


async def test_a_pair_gives_each_call_its_own_outcome(aq: Queue) -> None:
    await aq.add("j")
    client = await aq.client()
    not_a_number = aq.engine.keys.prefix + "not-a-number"
    await client.set(not_a_number, "x")
    incr: Call[int] = Call(parse=int, command=("INCR", not_a_number))
    first, claimed = await aq.sender.send_pair(incr, aq.engine.claim(1, 30))
    assert isinstance(first, Exception) and "not an integer" in str(first)
    assert isinstance(claimed, Claimed) and len(claimed) == 1  # ran all the same
    await aq.complete(claimed[0], "ok")
    # and the other way round: a good first call, a refused second one
    ok, refused = await aq.sender.send_pair(aq.engine.stats(), incr)
    assert not isinstance(ok, Exception) and ok.totals["completed"] == 1
    assert isinstance(refused, Exception)
    await client.delete(not_a_number)
