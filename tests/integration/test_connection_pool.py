"""Bounded, blocking connection pools (issue 27, item 5).

More calls at once than a queue's ``max_connections`` wait their turn instead
of failing with redis-py's MaxConnectionsError; a call that waits longer than
POOL_TIMEOUT raises PoolTimeout (an EchoMQError); ``events()`` readers share
one blocking read per queue, so they leave the pool to ``add``/``stats``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator

import pytest

from echomq import (
    EchoMQError,
    Event,
    InvalidOption,
    PoolTimeout,
    Queue,
    SyncQueue,
    Worker,
    connection,
)
from echomq.connection import DEFAULT_MAX_CONNECTIONS, is_cluster_url
from servers import ServerFactory

DEADLINE = 30.0


def _connected(server_url: str) -> int:
    """Clients connected to a private server now (INFO clients), minus the asker."""
    import redis

    with redis.Redis.from_url(server_url) as probe:
        return int(probe.info("clients")["connected_clients"]) - 1


async def test_more_concurrent_calls_than_the_pool_holds_wait_their_turn(
    aq: Queue, backend_url: str
) -> None:
    """150 concurrent gets on a default pool of 100 (redis-py 8 failed 50 of them)."""
    job_id = await aq.add("job")
    calls = DEFAULT_MAX_CONNECTIONS + 50
    got = await asyncio.gather(*(aq.get(job_id) for _ in range(calls)), return_exceptions=True)
    assert [type(g).__name__ for g in got if not hasattr(g, "id")] == []
    assert len(got) == calls


async def test_an_asyncio_queue_holds_at_most_max_connections(
    server_factory: ServerFactory, queue_name: str
) -> None:
    server = server_factory("valkey")
    async with Queue(queue_name, server.url, max_connections=5) as q:
        job_id = await q.add("job")
        most = 0

        async def watch() -> None:
            nonlocal most
            while True:
                most = max(most, await asyncio.to_thread(_connected, server.url))
                await asyncio.sleep(0.01)

        watcher = asyncio.create_task(watch())
        try:
            got = await asyncio.gather(*(q.get(job_id) for _ in range(300)))
        finally:
            watcher.cancel()
        assert all(job is not None and job.id == job_id for job in got)
    assert 1 <= most <= 5


def test_threads_sharing_a_sync_queue_wait_their_turn(sq: SyncQueue) -> None:
    """200 threads on one SyncQueue (redis-py 8's pool of 100 failed about half)."""
    job_id = sq.add("job")
    failures: list[BaseException] = []
    start = threading.Barrier(200)

    def call() -> None:
        try:
            start.wait(DEADLINE)
            for _ in range(5):
                assert sq.get(job_id) is not None
        except BaseException as exc:  # recorded, asserted below
            failures.append(exc)

    threads = [threading.Thread(target=call, daemon=True) for _ in range(200)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE)
    assert [repr(f) for f in failures] == []


def test_a_sync_queue_holds_at_most_max_connections(
    server_factory: ServerFactory, queue_name: str
) -> None:
    server = server_factory("valkey")
    with SyncQueue(queue_name, server.url, max_connections=4) as q:
        job_id = q.add("job")
        errors: list[BaseException] = []

        def call() -> None:
            try:
                for _ in range(20):
                    q.get(job_id)
            except BaseException as exc:  # recorded, asserted below
                errors.append(exc)

        threads = [threading.Thread(target=call, daemon=True) for _ in range(50)]
        for thread in threads:
            thread.start()
        most = 0
        while any(t.is_alive() for t in threads):
            most = max(most, _connected(server.url))
        for thread in threads:
            thread.join(DEADLINE)
        assert errors == []
    assert 1 <= most <= 4


async def test_a_call_that_finds_no_free_connection_in_time_raises_pool_timeout(
    backend_url: str, queue_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connection, "POOL_TIMEOUT", 0.5)
    async with Queue(queue_name, backend_url, max_connections=2) as q:
        await q.add("job")
        engine, sender = q.engine, q.sender
        cursor = (await q.read_events(None)).cursor
        # two blocking reads of 3 s hold both connections
        holds = [
            asyncio.create_task(sender.send(engine.wait_for_events(cursor, 3.0, 9.0)))
            for _ in range(2)
        ]
        await asyncio.sleep(0.3)
        started = time.monotonic()
        with pytest.raises(PoolTimeout, match="all 2 connections") as refused:
            await q.stats()
        assert isinstance(refused.value, EchoMQError)
        assert time.monotonic() - started < 2.5  # POOL_TIMEOUT, not the holds' 3 s
        await asyncio.gather(*holds)
        assert (await q.stats()).counts["waiting"] == 1  # free again: served


def test_a_blocking_call_that_finds_no_free_connection_raises_pool_timeout(
    backend_url: str, queue_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if is_cluster_url(backend_url):
        pytest.skip("a cluster client's pools are per node: the holds must name the node")
    monkeypatch.setattr(connection, "POOL_TIMEOUT", 0.5)
    with SyncQueue(queue_name, backend_url, max_connections=2) as q:
        pool = q.client().connection_pool  # type: ignore[union-attr]
        held = [pool.get_connection() for _ in range(2)]
        try:
            with pytest.raises(PoolTimeout, match="all 2 connections"):
                q.stats()
        finally:
            for conn in held:
                pool.release(conn)
        assert q.stats() is not None


@pytest.mark.parametrize("bad", [0, 1, 10_001, "8", 2.5, True, None])
def test_max_connections_outside_its_range_is_refused(bad: object, backend_url: str) -> None:
    with pytest.raises(InvalidOption, match=f"max_connections {bad!r}.*2 … 10000"):
        SyncQueue("pool-bad", backend_url, max_connections=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidOption, match="max_connections"):
        Queue("pool-bad", backend_url, max_connections=bad)  # type: ignore[arg-type]


async def _first(events: AsyncIterator[Event], kind: str) -> Event:
    async for event in events:
        if event.kind == kind:
            return event
    raise AssertionError("the stream ended")


async def test_many_events_readers_share_one_blocking_read(
    backend_url: str, queue_name: str
) -> None:
    """150 events() iterators on a pool of 10: add and stats still answer at once,
    and every reader hears the add."""
    async with Queue(queue_name, backend_url, max_connections=10) as q:
        readers = [q.events() for _ in range(150)]
        heard = [asyncio.create_task(_first(r, "added")) for r in readers]
        await asyncio.sleep(1.5)  # every reader caught up and waiting on the bell
        started = time.monotonic()
        job_id = await q.add("job")
        stats = await q.stats()
        assert time.monotonic() - started < 1.0, "add + stats waited for a connection"
        assert stats.counts["waiting"] == 1
        async with asyncio.timeout(DEADLINE):
            events = await asyncio.gather(*heard)
        assert {e.job_id for e in events} == {job_id}
        for reader in readers:
            await reader.aclose()  # type: ignore[attr-defined]


def test_many_blocking_events_readers_share_one_blocking_read(
    backend_url: str, queue_name: str
) -> None:
    with SyncQueue(queue_name, backend_url, max_connections=10) as q:
        heard: dict[int, str | None] = {}

        def read(i: int) -> None:
            for event in q.events():
                if event.kind == "added":
                    heard[i] = event.job_id
                    return

        threads = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(120)]
        for thread in threads:
            thread.start()
        time.sleep(1.5)  # every reader caught up and waiting on the bell
        started = time.monotonic()
        job_id = q.add("job")
        assert q.stats().counts["waiting"] == 1
        assert time.monotonic() - started < 1.0, "add + stats waited for a connection"
        for thread in threads:
            thread.join(DEADLINE)
        assert heard == dict.fromkeys(range(120), job_id)


async def test_a_worker_sizes_its_queues_pool_from_its_concurrency(
    backend_url: str, queue_name: str
) -> None:
    """Concurrency 300, every handler reports progress while the others run."""
    async with Queue(queue_name, backend_url) as q:
        await q.add_many(
            [{"name": "job", "data": i} for i in range(600)],
        )
        release = asyncio.Event()

        async def handler(job: object) -> int:
            await job.set_progress(1)  # type: ignore[attr-defined]
            await asyncio.wait_for(release.wait(), DEADLINE)
            await job.set_progress(2)  # type: ignore[attr-defined]
            return 1

        worker = Worker(q, {"job": handler}, concurrency=300)
        assert q.max_connections >= 300
        run = asyncio.create_task(worker.run())
        try:
            async with asyncio.timeout(DEADLINE):
                while (await q.stats()).counts.get("active", 0) < 300:
                    await asyncio.sleep(0.05)
            release.set()
            async with asyncio.timeout(DEADLINE):
                while (await q.stats()).counts.get("completed", 0) < 600:
                    await asyncio.sleep(0.05)
            assert (await q.stats()).counts.get("dead", 0) == 0
        finally:
            worker.stop()
            await asyncio.wait_for(run, DEADLINE)
