"""Queues on the session's private servers, closed after each test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from echomq import Queue, SyncQueue


@pytest.fixture
def make_sync(backend_url: str, queue_name: str) -> Iterator[Callable[..., SyncQueue]]:
    """SyncQueue factory on the backend; the default name is the test's own queue."""
    made: list[SyncQueue] = []

    def make(name: str | None = None, **options: Any) -> SyncQueue:
        q = SyncQueue(name or queue_name, backend_url, **options)
        made.append(q)
        return q

    yield make
    for q in made:
        q.close()


@pytest.fixture
def sq(make_sync: Callable[..., SyncQueue]) -> SyncQueue:
    return make_sync()


@pytest.fixture
async def aq(backend_url: str, queue_name: str) -> AsyncIterator[Queue]:
    q = Queue(queue_name, backend_url)
    yield q
    await q.close()
