"""A server that may evict keys is named loudly, once per client (issue 27 item 10):
``maxmemory-policy`` other than ``noeviction`` loses jobs silently otherwise."""

from __future__ import annotations

import asyncio
import logging

import pytest

from echomq import Queue, SyncQueue, Worker
from servers import PrivateServer, ServerFactory

pytestmark = pytest.mark.timeout(60)

EVICTING = {"maxmemory": "256mb", "maxmemory-policy": "allkeys-lru"}


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "echomq" and r.levelno == logging.WARNING and "maxmemory-policy" in r.message
    ]


@pytest.fixture
def evicting(server_factory: ServerFactory) -> PrivateServer:
    return server_factory("valkey", EVICTING)


def test_a_client_warns_once_at_its_first_connect(
    evicting: PrivateServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="echomq")
    with SyncQueue("evicted", evicting.url) as sq:
        sq.add("a")
        sq.add("b")
        [job] = sq.claim(1)
        sq.complete(job)
        assert sq.sender.eviction_policy == "allkeys-lru"
    [text] = warnings_of(caplog)
    assert "'allkeys-lru'" in text and "noeviction" in text and "delivery.md" in text


async def test_an_async_client_and_a_worker_warn_at_start(
    evicting: PrivateServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="echomq")
    async with Queue("evicted", evicting.url) as q:
        worker = Worker(q, {"x": lambda job: None})
        task = asyncio.create_task(worker.run(install_signals=False))
        try:
            async with asyncio.timeout(10):
                while not worker.running and not task.done():
                    await asyncio.sleep(0.05)
            assert len(warnings_of(caplog)) == 1  # the worker's start connected its queue
            await asyncio.gather(*(q.add("x") for _ in range(5)))
        finally:
            worker.stop(immediate=True)
            await asyncio.wait_for(task, 10)
        assert q.sender.eviction_policy == "allkeys-lru"
    assert len(warnings_of(caplog)) == 1


def test_without_config_the_info_policy_is_read(
    server_factory: ServerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="echomq")
    server = server_factory("valkey", {**EVICTING, "rename-command": 'CONFIG ""'})
    with SyncQueue("evicted", server.url) as sq:
        sq.add("a")
        assert sq.sender.eviction_policy == "allkeys-lru"
    assert len(warnings_of(caplog)) == 1


def test_a_noeviction_server_says_nothing(
    backend_url: str, queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="echomq")
    with SyncQueue(queue_name, backend_url) as sq:
        sq.add("a")
        assert sq.sender.eviction_policy is None
    assert warnings_of(caplog) == []
