"""A worker of several queues starts the embedded server again for the queue that
uses it, whatever queue it was given first (each session asks through its own
queue: Queue.restart_embedded)."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time

import pytest

from echomq import Job, Queue, State, Worker
from echomq.embedded import HOME_ENV, EmbeddedServer
from echomq.urls import URL_ENV


async def poll(check: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


async def test_the_embedded_queue_of_a_worker_restarts_its_server(
    backend_url: str, queue_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with tempfile.TemporaryDirectory(prefix="emq-") as home:
        monkeypatch.setenv(HOME_ENV, home)
        monkeypatch.delenv(URL_ENV, raising=False)
        server = EmbeddedServer(home)
        other = Queue(queue_name, backend_url)  # first: another server, no restart for it
        embedded = Queue(queue_name + "-embedded")  # no url: the embedded server
        worker = Worker([other, embedded], {"noop": lambda job: job.data}, concurrency=2)
        run = asyncio.create_task(worker.run(install_signals=False))
        try:
            job_id = await embedded.add("noop", 1)  # starts the embedded server

            async def completed() -> bool:
                job: Job | None = await embedded.get(job_id)
                return job is not None and job.state is State.COMPLETED

            await poll(completed, 30, "the worker to serve the embedded queue")
            assert await asyncio.to_thread(server.stop)
            await poll(
                lambda: asyncio.to_thread(server.is_running),
                30,
                "the worker to start the embedded server again",
            )
        finally:
            worker.stop(immediate=True)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(run, 30)
            run.cancel()
            await other.close()
            await embedded.close()
            await asyncio.to_thread(server.stop)
