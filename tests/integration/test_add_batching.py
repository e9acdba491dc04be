"""Concurrent adds share script calls (echomq.flows.coalescing) with per-call outcomes."""

from __future__ import annotations

import asyncio

import pytest
import redis

from commandstats import script_calls
from echomq import InvalidPriority, LaneFull, NotReplicated, Queue


def add_calls(client: redis.Redis) -> int:
    """Script calls the server has run so far (FCALL, or EVALSHA + EVAL)."""
    return script_calls(client)


@pytest.mark.no_cluster("INFO commandstats counts one server's calls")
async def test_concurrent_adds_share_calls_and_keep_the_order_they_were_issued(
    aq: Queue, redis_client: redis.Redis
) -> None:
    await aq.add("warm-up")  # connect and load the script first
    assert [j.name for j in await aq.claim(1)] == ["warm-up"]
    before = add_calls(redis_client)
    ids = await asyncio.gather(*(aq.add("job", {"i": i}) for i in range(200)))
    calls = add_calls(redis_client) - before
    assert len(set(ids)) == 200
    assert calls <= 20, f"200 concurrent adds took {calls} script calls"
    claimed = await aq.claim(200)
    assert [j.data["i"] for j in claimed] == list(range(200))  # acceptance = issue order
    assert [j.id for j in claimed] == ids


async def test_a_bad_add_never_fails_its_neighbours(aq: Queue) -> None:
    results = await asyncio.gather(
        *(aq.add("job", {"i": i}, priority=-1 if i % 3 == 0 else 0) for i in range(30)),
        return_exceptions=True,
    )
    refused = [i for i, r in enumerate(results) if isinstance(r, InvalidPriority)]
    assert refused == list(range(0, 30, 3))
    accepted = [r for r in results if isinstance(r, str)]
    assert len(accepted) == 20
    stats = await aq.stats()
    assert stats.counts["waiting"] == 20


async def test_idempotency_keys_hold_inside_one_batch(aq: Queue) -> None:
    ids = await asyncio.gather(*(aq.add("job", {"i": i}, key=f"k{i % 5}") for i in range(50)))
    assert len(set(ids)) == 5
    assert ids[:5] == ids[5:10]  # every later add returns the first add's id for its key
    assert (await aq.stats()).counts["waiting"] == 5


async def test_durable_and_ordinary_adds_never_share_a_call(
    backend_url: str, queue_name: str
) -> None:
    async with Queue(queue_name, backend_url, durable_timeout=0.25) as q:
        results = await asyncio.gather(
            *(q.add("job", {"i": i}, durable=i % 2 == 0) for i in range(20)),
            return_exceptions=True,
        )
        for i, result in enumerate(results):
            if i % 2:
                assert isinstance(result, str)
            elif isinstance(result, NotReplicated):  # a lone server has no replica
                assert len(result.ids) == 1  # each caller hears of its own job only
            else:
                assert isinstance(result, str)  # a cluster's replica acknowledged it
        assert (await q.stats()).counts["waiting"] == 20


def test_a_queue_adds_from_one_event_loop_after_another(backend_url: str, queue_name: str) -> None:
    """The batcher keeps its state, and the sender its client, per event loop (a
    loop's client is closed as asyncio.run shuts that loop down)."""
    q = Queue(queue_name, backend_url)

    async def burst(start: int) -> list[str]:
        return list(await asyncio.gather(*(q.add("job", {"i": start + i}) for i in range(10))))

    first = asyncio.run(burst(0))
    second = asyncio.run(burst(10))
    assert len(set(first + second)) == 20

    async def drain() -> list[int]:
        async with q:
            return [j.data["i"] for j in await q.claim(20)]

    assert asyncio.run(drain()) == list(range(20))


async def test_a_batch_is_bounded(aq: Queue, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aq._adds.calls, "max_batch", 7)
    sizes: list[int] = []
    send = aq._add_batch

    async def spy(jobs: object, durable: bool | None) -> list[str]:
        sizes.append(len(jobs))  # type: ignore[arg-type]
        return await send(jobs, durable)  # type: ignore[arg-type]

    monkeypatch.setattr(aq._adds, "_send_adds", spy)
    await asyncio.gather(*(aq.add("job") for i in range(40)))
    assert max(sizes) <= 7 and sum(sizes) == 40


async def test_a_full_lane_refuses_only_its_own_adds(aq: Queue) -> None:
    """Issue 27 item 3: ten adds to lane a batched with one to a full lane b."""
    await aq.set_lane("b", max_waiting=1)
    await aq.set_lane("c", max_waiting=3)
    await aq.add("held", group="b")  # b is at its max_waiting
    first = aq.add("first", group="a")  # goes alone: the rest share the next call(s)
    results = await asyncio.gather(
        first,
        *(aq.add("job", {"i": i}, group="a") for i in range(10)),
        aq.add("over", group="b"),
        *(aq.add("capped", {"i": i}, group="c") for i in range(5)),
        return_exceptions=True,
    )
    to_a, to_b, to_c = results[:11], results[11], results[12:]
    assert all(isinstance(r, str) for r in to_a), to_a
    assert isinstance(to_b, LaneFull) and "'b'" in str(to_b)
    assert [type(r) for r in to_c] == [str, str, str, LaneFull, LaneFull]  # c takes 3, in order
    assert "'c'" in str(to_c[3])
    lanes = {lane.group: lane.backlog for lane in await aq.lanes()}
    assert (lanes["a"], lanes["b"], lanes["c"]) == (11, 1, 3)
    assert {j.id for j in await aq.claim(20)} >= {r for r in to_a if isinstance(r, str)}
