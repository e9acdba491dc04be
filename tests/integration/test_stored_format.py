"""The stored-format version on a real server: written by the first add, checked once
per queue object, and a newer format refused before anything is written."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from echomq import FormatTooNew, Queue, SyncQueue, storage


def test_the_first_add_stores_the_format(sq: SyncQueue, redis_client: redis.Redis) -> None:
    sq.add("a")
    assert redis_client.hget(sq.engine.keys.meta, "v") == str(storage.FORMAT)


@pytest.fixture
def newer_queue(queue_name: str, redis_client: redis.Redis) -> Iterator[str]:
    """A queue whose meta says it was written in the next format; removed afterwards
    (other tests' dashboards discover every queue on the server)."""
    meta = f"emq:{{{queue_name}}}:meta"
    redis_client.hset(meta, mapping={"o": "composite", "v": str(storage.FORMAT + 1)})
    yield queue_name
    redis_client.delete(meta)


def test_a_newer_format_is_refused_and_nothing_is_written(
    backend_url: str, newer_queue: str, redis_client: redis.Redis
) -> None:
    pattern = f"emq:{{{newer_queue}}}:*"
    before = sorted(redis_client.scan_iter(pattern))
    with (
        SyncQueue(newer_queue, backend_url) as q,
        pytest.raises(FormatTooNew, match=f"format {storage.FORMAT + 1}"),
    ):
        q.add("a")
    assert sorted(redis_client.scan_iter(pattern)) == before


async def test_the_asyncio_queue_refuses_it_too(backend_url: str, newer_queue: str) -> None:
    async with Queue(newer_queue, backend_url) as q:
        with pytest.raises(FormatTooNew):
            await q.claim()
        with pytest.raises(FormatTooNew):  # checked again: never silently accepted
            await q.stats()


def test_a_queue_without_a_stored_format_is_read_as_format_1(
    backend_url: str, queue_name: str, redis_client: redis.Redis
) -> None:
    with SyncQueue(queue_name, backend_url) as q:
        q.add("a")
        redis_client.hdel(q.engine.keys.meta, "v")  # as echomq 0.1.0 left it
    with SyncQueue(queue_name, backend_url) as q:
        assert [j.name for j in q.claim(5)] == ["a"]
