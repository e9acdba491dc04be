"""Helpers of the dashboard tests (fixtures are in conftest.py)."""

from __future__ import annotations

import time
from collections.abc import Callable

from echomq import SyncQueue

#: the action token the tests start dashboards with.
TOKEN = "test-token-5f1c"


def wait_for(condition: Callable[[], object], timeout: float = 10.0, what: str = "") -> None:
    """Poll ``condition`` until it is truthy, failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or condition}")
        time.sleep(0.05)


def make_dead(q: SyncQueue, n: int, error: str = "boom") -> list[str]:
    """Add ``n`` jobs that die on their first failure; returns their ids."""
    ids = q.add_many([{"name": "doomed", "data": {"i": i}, "max_attempts": 1} for i in range(n)])
    claimed = q.claim(n)
    assert sorted(j.id for j in claimed) == sorted(ids)
    for job in claimed:
        q.fail(job, error, "Traceback (most recent call last):\n  ValueError: " + error)
    return ids
