"""Queue discovery on a server with more keys than one SCAN round walks."""

from __future__ import annotations

import pytest

from echomq import Queue, SyncQueue, connection
from echomq.sending.sender import Node
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
        home = Queue(queue_name, client=client)
        sender = home.sender
        reg = QueueRegistry(home)
        assert await reg.get(names[2])  # one EXISTS, no waiting for the walk
        with pytest.raises(UnknownQueue):
            await reg.get(queue_name + "-never")
        # SCAN returns every key present for a whole walk of a node's cursor, so
        # once every node's cursor has come back to 0 (one full pass) every queue
        # must be listed; how many rounds that takes depends on the keyspace.
        nodes = await sender.nodes()
        finished: set[str] = set()
        calls = 0
        scan_page = sender.scan_page

        async def counted(node: Node, cursor: int, match: str, count: int) -> tuple[int, list[str]]:
            nonlocal calls
            calls += 1
            next_cursor, keys = await scan_page(node, cursor, match, count)
            if next_cursor == 0:
                finished.add(repr(node))
            return next_cursor, keys

        monkeypatch.setattr(sender, "scan_page", counted)
        rounds, hang_guard = 0, 4 * await client.dbsize() + 1000  # not the property
        while len(finished) < len(nodes):
            await reg.refresh()
            rounds += 1
            assert rounds <= hang_guard, "the walk never finished a pass"
        assert set(names) <= set(reg.names()), "a full pass did not find every queue"
        assert rounds > 1  # 120+ keys take more than one round of ~20
        assert calls <= rounds * registry.MAX_SCAN_CALLS  # each round stops at its budget
    finally:
        await client.aclose()


async def test_named_queues_are_the_only_ones(backend_url: str, queue_name: str) -> None:
    q = SyncQueue(queue_name, backend_url)
    q.add("x")
    q.close()
    client = connection.async_client(backend_url)
    try:
        reg = QueueRegistry(Queue(queue_name, client=client), ["only-this"])
        await reg.refresh()
        assert reg.names() == ["only-this"]
        with pytest.raises(UnknownQueue):
            await reg.get(queue_name)
    finally:
        await client.aclose()
