"""The asyncio Queue: the same behaviour through the async shell."""

from __future__ import annotations

import asyncio

import pytest

from clock import await_past
from echomq import LeaseLost, Queue, State


async def test_async_round_trip(aq: Queue) -> None:
    await aq.set_weight("acme", 2)
    ids = await aq.add_many([{"name": "send", "data": i, "group": "acme"} for i in range(3)])
    other = await aq.add("send", {"x": 1}, group="globex", priority=1)
    jobs = await aq.claim(4, lease=10)
    assert [j.id for j in jobs] == [ids[0], ids[1], other, ids[2]]
    assert await aq.extend(jobs[0], 20) is not None
    await aq.complete(jobs[0], {"ok": 1})
    assert await aq.fail(jobs[1], "boom", retry=False) is State.DEAD
    got = await aq.get(ids[0])
    assert got is not None and got.result == {"ok": 1}
    stats = await aq.stats()
    assert stats.counts["completed"] == 1 and stats.counts["dead"] == 1
    assert stats.counts["active"] == 2
    assert await aq.weights() == {"acme": 2}
    assert (await aq.dead())[0].id == ids[1]
    assert await aq.retry_dead() == [ids[1]]


async def test_concurrent_async_claimers_never_share_a_job(aq: Queue, backend_url: str) -> None:
    await aq.add_many([{"name": "j", "data": i} for i in range(300)])
    others = [Queue(aq.name, backend_url) for _ in range(4)]
    try:
        batches = await asyncio.gather(*(q.claim(100) for q in others))
    finally:
        for q in others:
            await q.close()
    seen = [j.id for batch in batches for j in batch]
    assert len(seen) == len(set(seen)) == 300


async def test_async_lease_lost(aq: Queue) -> None:
    await aq.add("j")
    [job] = await aq.claim(1, lease=0.03)
    assert job.lease_deadline is not None
    await await_past(await aq.client(), job.lease_deadline)
    with pytest.raises(LeaseLost):
        await aq.complete(job)
