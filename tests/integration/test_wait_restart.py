"""Open waits ride out a server restart until their own timeout (issue 27, item 6).

A private server that persists on shutdown and loads its data back slowly
(``key-load-delay`` per key over a few thousand filler keys, answering
``LOADING`` meanwhile): the waits are registered, the server restarts, the
jobs are completed once it is back, and every wait returns its job instead of
a BusyLoadingError or a ConnectionError.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

from echomq import Queue, State, SyncQueue, WaitTimeout
from echomq.keys import QueueKeys
from servers import PrivateServer, ServerFactory

#: the server saves on SIGTERM and loads slowly, answering LOADING while it does
SLOW_LOADING = {
    "save": "3600 1",
    "key-load-delay": "500",  # µs per key: ~1.5 s over FILLER keys
    "loading-process-events-interval-bytes": "1024",
}
FILLER = 3000
WAITS = 40
DEADLINE = 30.0


def _slow_loading_server(server_factory: ServerFactory) -> PrivateServer:
    server = server_factory("valkey", SLOW_LOADING)
    with server.client() as client:
        client.mset({f"filler:{i}": "x" * 64 for i in range(FILLER)})
    return server


def _registered(server: PrivateServer, queue: str, count: int) -> Callable[[], bool]:
    def check() -> bool:
        with server.client() as client:
            return int(client.zcard(QueueKeys(queue).waiters)) >= count

    return check


def _until(check: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + DEADLINE
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _complete_all(server: PrivateServer, queue: str, count: int) -> None:
    """Once the server answers again (retrying LOADING), claim and complete every job."""
    end = time.monotonic() + DEADLINE
    done = 0
    with SyncQueue(queue, server.url) as worker:
        while done < count:
            assert time.monotonic() < end, f"completed {done} of {count}"
            try:
                jobs = worker.claim(count)
                worker.complete_many([(job, {"ok": job.data}) for job in jobs])
                done += len(jobs)
            except Exception:  # still loading: try again
                time.sleep(0.05)


async def test_async_waits_ride_out_a_restart(
    server_factory: ServerFactory, queue_name: str
) -> None:
    server = _slow_loading_server(server_factory)
    async with Queue(queue_name, server.url) as q:
        ids = [await q.add("job", i) for i in range(WAITS)]
        waits = [asyncio.create_task(q.wait(job_id, timeout=DEADLINE)) for job_id in ids]
        await asyncio.to_thread(_until, _registered(server, queue_name, WAITS), "the waits")
        await asyncio.to_thread(server.restart)  # returns once it answers PING (loaded)
        await asyncio.to_thread(_complete_all, server, queue_name, WAITS)
        jobs = await asyncio.gather(*waits, return_exceptions=True)
    assert [type(j).__name__ for j in jobs if not hasattr(j, "state")] == []
    assert all(j.state is State.COMPLETED for j in jobs)  # type: ignore[union-attr]
    assert [j.result for j in jobs] == [{"ok": i} for i in range(WAITS)]  # type: ignore[union-attr]


def test_blocking_waits_ride_out_a_restart(server_factory: ServerFactory, queue_name: str) -> None:
    server = _slow_loading_server(server_factory)
    results: dict[int, object] = {}
    with SyncQueue(queue_name, server.url) as q:
        ids = [q.add("job", i) for i in range(WAITS)]

        def wait(i: int) -> None:
            try:
                results[i] = q.wait(ids[i], timeout=DEADLINE)
            except Exception as exc:  # recorded, asserted below
                results[i] = exc

        threads = [threading.Thread(target=wait, args=(i,), daemon=True) for i in range(WAITS)]
        for thread in threads:
            thread.start()
        _until(_registered(server, queue_name, WAITS), "the waits")
        server.restart()
        _complete_all(server, queue_name, WAITS)
        for thread in threads:
            thread.join(DEADLINE)
    failed = {i: repr(r) for i, r in results.items() if not hasattr(r, "state")}
    assert failed == {}
    assert len(results) == WAITS


async def test_a_wait_on_a_server_that_stays_down_ends_with_wait_timeout(
    server_factory: ServerFactory, queue_name: str
) -> None:
    server = server_factory("valkey")
    async with Queue(queue_name, server.url) as q:
        job_id = await q.add("job")
        server.kill()
        started = time.monotonic()
        with pytest.raises(WaitTimeout, match=job_id):
            await q.wait(job_id, timeout=1.0)
        assert time.monotonic() - started < 1.0 + DEADLINE / 10  # its own timeout, not later
