"""Queue discovery on a server with more keys than one SCAN round walks."""

from __future__ import annotations

import pytest

from echomq import SyncQueue, connection
from echomq.sending import AsyncSender
from echomq.web import registry
from echomq.web.registry import QueueRegistry, UnknownQueue


async def test_discovery_resumes_across_rounds_and_names_are_checked_at_once(
    backend_url: str, queue_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [f"{queue_name}-{i}" for i in range(3)]
    for name in names:
        q = SyncQueue(name, backend_url)
        q.add_many([{"name": "filler"} for _ in range(40)])  # 40 job keys per queue
        q.close()
    monkeypatch.setattr(registry, "SCAN_COUNT", 10)
    monkeypatch.setattr(registry, "MAX_SCAN_CALLS", 2)  # ~20 keys per round
    client = connection.async_client(backend_url)
    try:
        reg = QueueRegistry(AsyncSender(None, client, None))
        assert await reg.get(names[2])  # one EXISTS, no waiting for the walk
        with pytest.raises(UnknownQueue):
            await reg.get(queue_name + "-never")
        # SCAN's COUNT is a hint and a cluster walks three primaries: allow slack
        rounds, bound = 0, await client.dbsize() // 5 + 20
        while not set(names) <= set(reg.names()):
            await reg.refresh()
            rounds += 1
            assert rounds <= bound, "a full pass did not find every queue"
        assert rounds > 0  # 120+ keys take more than one round of ~20
    finally:
        await client.aclose()


async def test_named_queues_are_the_only_ones(backend_url: str, queue_name: str) -> None:
    q = SyncQueue(queue_name, backend_url)
    q.add("x")
    q.close()
    client = connection.async_client(backend_url)
    try:
        reg = QueueRegistry(AsyncSender(None, client, None), ["only-this"])
        await reg.refresh()
        assert reg.names() == ["only-this"]
        with pytest.raises(UnknownQueue):
            await reg.get(queue_name)
    finally:
        await client.aclose()
