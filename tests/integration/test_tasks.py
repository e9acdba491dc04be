"""Tasks and handler control on real servers (docs/tasks.md): typed enqueue, per-task
options, Retry/Unrecoverable, current_job, middleware, expiry, cancel, process
isolation, and a worker serving several queues."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from echomq import (
    Backoff,
    InvalidOption,
    Job,
    PayloadError,
    Queue,
    Retry,
    State,
    SyncQueue,
    Unrecoverable,
    Worker,
    current_job,
)
from echomq.errors import EchoMQError, JobNotFound
from integration.isolated_tasks import add_in_process, fails_in_process, stuck_once
from integration.test_worker import job_in, running, wait_for

pytestmark = pytest.mark.timeout(60)


# -- making and enqueueing tasks --------------------------------------------------------


async def test_a_task_is_callable_and_enqueues_its_arguments_as_json(aq: Queue) -> None:
    @aq.task
    async def send(to: int, subject: str = "hi") -> str:
        return f"{to}:{subject}"

    assert (
        send.name
        == f"{__name__}.test_a_task_is_callable_and_enqueues_its_arguments_as_json.<locals>.send"
    )
    assert await send(1) == "1:hi"  # still a plain call
    job_id = await send.enqueue(3, subject="yo")
    job = await aq.get(job_id)
    assert job is not None and job.name == send.name
    assert job.data == {"args": [3], "kwargs": {"subject": "yo"}}
    async with running(Worker(aq, [send])):
        done = await job_in(aq, job_id, State.COMPLETED)
    assert done.result == "3:yo"


async def test_wrong_or_non_json_arguments_are_refused_before_anything_is_written(
    aq: Queue,
) -> None:
    @aq.task(name="send")
    def send(to: int) -> None: ...

    with pytest.raises(TypeError, match="send: missing a required argument: 'to'"):
        await send.enqueue()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'too'"):
        await send.enqueue(1, too=1)  # type: ignore[call-arg]
    with pytest.raises(PayloadError, match="not JSON-serialisable"):
        await send.enqueue(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await send.enqueue_many([(1, 2)])
    assert not await aq.exists()


async def test_priority_and_group_may_come_from_the_call_and_enqueue_with_wins(
    aq: Queue,
) -> None:
    @aq.task(
        priority=lambda tenant, n, extra: n + extra,
        group=lambda tenant, *_, **__: tenant,
        max_attempts=7,
    )
    def work(tenant: str, n: int, extra: int = 0) -> None: ...

    job = await aq.get(await work.enqueue("acme", 4))
    assert job is not None and (job.group, job.priority, job.max_attempts) == ("acme", 4, 7)
    job = await aq.get(await work.enqueue(n=4, extra=1, tenant="zed"))
    assert job is not None and (job.group, job.priority) == ("zed", 5)
    job_id = await work.enqueue_with(priority=1, group=None, key="k1", delay=60).enqueue("x", 9)
    job = await aq.get(job_id)
    assert job is not None and (job.group, job.priority, job.key) == (None, 1, "k1")
    assert job.state == State.DELAYED
    ids = await work.enqueue_many([work.prepare("a", 1), ("b", 2), {"tenant": "c", "n": 3}])
    jobs = [await aq.get(i) for i in ids]
    assert [(j.group, j.priority) for j in jobs if j] == [("a", 1), ("b", 2), ("c", 3)]


def test_a_sync_queue_task_enqueues_by_blocking(sq: SyncQueue) -> None:
    @sq.task(name="mail")
    def mail(to: str) -> str:
        return to

    job_id = mail.enqueue("x@y")
    job = sq.get(job_id)
    assert job is not None and job.name == "mail" and job.data == {"args": ["x@y"]}
    assert mail.enqueue_with(priority=3).enqueue(to="z")
    assert len(mail.enqueue_many([("a",), ("b",)])) == 2


def test_task_options_are_checked(sq: SyncQueue) -> None:
    with pytest.raises(InvalidOption, match="max_attempts 0"):
        sq.task(max_attempts=0)(print)
    with pytest.raises(InvalidOption, match="timeout -1"):
        sq.task(timeout=-1)(print)
    with pytest.raises(InvalidOption, match="isolation 'fork'"):
        sq.task(isolation="fork")(print)  # type: ignore[call-overload]

    def local() -> None: ...

    with pytest.raises(InvalidOption, match="top level"):
        sq.task(isolation="process")(local)
    with pytest.raises(InvalidOption, match="expires 0"):
        sq.add("j", expires=0)
    with pytest.raises(InvalidOption, match="headers"):
        sq.add("j", headers={"a": 1})  # type: ignore[dict-item]


SNIPPET = """
from echomq import Queue

q = Queue("typed")

@q.task
async def send(to: int) -> None: ...

@q.task(name="mail", max_attempts=2)
def mail(to: int) -> None: ...

async def main() -> None:
    await send.enqueue(to=1)
    await send.enqueue(to="x")
    await send.enqueue_with(delay=1).enqueue(to="y")
    await mail.enqueue(to="z")
    mail(to=2)
"""


def test_mypy_checks_enqueue_against_the_function_parameters(tmp_path: Path) -> None:
    snippet = tmp_path / "snippet.py"
    snippet.write_text(textwrap.dedent(SNIPPET))
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(snippet)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 3, result.stdout
    assert all('"to" to "enqueue"' in line and '"str"' in line for line in errors), errors
    assert [line.split(":")[1] for line in errors] == ["14", "15", "16"]


# -- what a handler can say ------------------------------------------------------------


async def test_retry_sets_the_delay_and_counts_an_attempt(aq: Queue) -> None:
    @aq.task(name="flaky", max_attempts=2)
    def flaky() -> None:
        raise Retry(delay=120)

    job_id = await flaky.enqueue()
    async with running(Worker(aq, [flaky])):
        failed = await job_in(aq, job_id, State.FAILED)
    assert failed.attempts == 1 and failed.error is not None and "Retry" in failed.error
    assert failed.run_at is not None and failed.finished_at is None
    assert failed.claimed_at is not None
    assert 119 <= (failed.run_at - failed.claimed_at).total_seconds() <= 121


async def test_unrecoverable_is_dead_at_once(aq: Queue) -> None:
    @aq.task(name="doomed", max_attempts=5)
    async def doomed() -> None:
        raise Unrecoverable("no such user")

    job_id = await doomed.enqueue()
    async with running(Worker(aq, [doomed])):
        dead = await job_in(aq, job_id, State.DEAD)
    assert dead.attempts == 1 and dead.error == "Unrecoverable: no such user"


async def test_a_task_backoff_overrides_the_queue_and_its_attempts_bound(aq: Queue) -> None:
    calls: list[int] = []

    @aq.task(name="twice", max_attempts=2, backoff=Backoff(base=0, jitter=0))
    def twice() -> None:
        calls.append(current_job().attempts)
        raise ValueError("nope")

    job_id = await twice.enqueue()
    async with running(Worker(aq, [twice])):  # the queue's backoff is 1 s and more
        dead = await job_in(aq, job_id, State.DEAD)
    assert calls == [1, 2] and dead.error == "ValueError: nope"


async def test_current_job_inside_async_and_sync_tasks(aq: Queue) -> None:
    @aq.task(name="a")
    async def a() -> str:
        await current_job().set_progress(5)
        return current_job().id

    @aq.task(name="s")
    def s() -> str:
        return current_job().id

    with pytest.raises(EchoMQError, match="only inside a handler"):
        current_job()
    ids = [await a.enqueue(), await s.enqueue()]
    async with running(Worker(aq, [a, s])):
        done = [await job_in(aq, i, State.COMPLETED) for i in ids]
    assert [j.result for j in done] == ids
    assert done[0].progress == 5


async def test_middleware_wraps_each_call_first_listed_outermost(aq: Queue) -> None:
    seen: list[tuple[str, str, Any]] = []

    def tracer(label: str) -> Callable[[Job, Callable[[], Awaitable[Any]]], Awaitable[Any]]:
        async def middleware(job: Job, call_next: Callable[[], Awaitable[Any]]) -> Any:
            seen.append((label, "before", job.name))
            try:
                result = await call_next()
            except Exception as exc:
                seen.append((label, "raised", type(exc).__name__))
                raise
            seen.append((label, "after", result))
            return result

        return middleware

    @aq.task(name="ok")
    def ok() -> int:
        seen.append(("handler", "ran", current_job().name))
        return 7

    @aq.task(name="bad", max_attempts=1)
    async def bad() -> None:
        raise KeyError("k")

    first = await ok.enqueue()
    worker = Worker(aq, [ok, bad], middleware=[tracer("outer"), tracer("inner")], concurrency=1)
    async with running(worker):
        await job_in(aq, first, State.COMPLETED)
        await job_in(aq, await bad.enqueue(), State.DEAD)
    assert seen == [
        ("outer", "before", "ok"),
        ("inner", "before", "ok"),
        ("handler", "ran", "ok"),
        ("inner", "after", 7),
        ("outer", "after", 7),
        ("outer", "before", "bad"),
        ("inner", "before", "bad"),
        ("inner", "raised", "KeyError"),
        ("outer", "raised", "KeyError"),
    ]


async def test_an_async_task_past_its_own_timeout_is_cancelled(aq: Queue) -> None:
    stopped = asyncio.Event()

    @aq.task(name="slow", timeout=0.3, max_attempts=1)
    async def slow() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            stopped.set()

    job_id = await slow.enqueue()
    async with running(Worker(aq, [slow], timeout=30)):  # the task's own timeout wins
        dead = await job_in(aq, job_id, State.DEAD)
    assert stopped.is_set()
    assert dead.error is not None and "timeout of 0.3 s" in dead.error


# -- expiry and cancel -----------------------------------------------------------------


async def test_a_job_not_started_by_its_expiry_is_dead_and_never_runs(aq: Queue) -> None:
    ran: list[str] = []

    @aq.task(name="late", expires=0.3)
    def late(n: int) -> None:
        ran.append(current_job().id)

    expired = await late.enqueue_with(delay=1.0).enqueue(1)  # cannot start before its expiry
    in_time = await late.enqueue_with(expires=60).enqueue(2)
    async with running(Worker(aq, [late])):
        dead = await job_in(aq, expired, State.DEAD)
        await job_in(aq, in_time, State.COMPLETED)
    assert ran == [in_time]
    assert dead.attempts == 0 and dead.error is not None and dead.error.startswith("Expired")
    assert dead.expires_at is not None and dead.created_at is not None


async def test_cancel_removes_a_waiting_job_and_reports_finished_ones(aq: Queue) -> None:
    waiting = await aq.add("j")
    assert await aq.cancel(waiting) is True
    assert await aq.get(waiting) is None
    assert (await aq.stats()).counts[State.WAITING] == 0
    done = await aq.add("j")
    [job] = await aq.claim()
    await aq.complete(job, 1)
    assert await aq.cancel(done) is False
    with pytest.raises(JobNotFound):
        await aq.cancel(waiting)


@pytest.mark.parametrize("retry", [False, True])
async def test_cancel_stops_a_running_handler(aq: Queue, retry: bool) -> None:
    started, stopped = asyncio.Event(), asyncio.Event()
    runs: list[int] = []

    @aq.task(name="long", max_attempts=3)
    async def long() -> str:
        runs.append(current_job().attempts)
        if len(runs) > 1:
            return "second run"
        started.set()
        try:
            await asyncio.sleep(60)
        finally:
            stopped.set()
        return "never"

    stalled: list[str] = []
    job_id = await long.enqueue()
    worker = Worker(aq, [long], lease=1.5, heartbeat=0.3, on_stalled=lambda j: stalled.append(j.id))
    async with running(worker):
        await asyncio.wait_for(started.wait(), 10)
        assert await aq.cancel(job_id, retry=retry) is True
        await asyncio.wait_for(stopped.wait(), 10)  # the heartbeat heard it
        if retry:
            done = await job_in(aq, job_id, State.COMPLETED)
            assert done.result == "second run" and runs == [1, 2]
        else:
            dead = await job_in(aq, job_id, State.DEAD)
            assert dead.error is not None and dead.error.startswith("Cancelled")
            assert runs == [1]
    assert stalled == []  # told apart from a lost lease (JobCancelled)


# -- process isolation ------------------------------------------------------------------


async def test_a_process_task_returns_its_result_and_its_error(aq: Queue) -> None:
    ok = await aq.add_many([add_in_process.prepare(2, 3).item])
    bad = await aq.add(fails_in_process.name, max_attempts=1)
    async with running(Worker(aq, [add_in_process, fails_in_process])):
        done = await job_in(aq, ok[0], State.COMPLETED)
        dead = await job_in(aq, bad, State.DEAD)
    assert done.result["sum"] == 5 and done.result["pid"] != os.getpid()
    assert dead.error == "ValueError: bad input in the child"
    assert dead.traceback is not None and "fails_in_process" in dead.traceback


@pytest.mark.only_backends("valkey", reason="process behaviour, the same on every server")
async def test_a_process_task_past_its_timeout_is_killed_before_its_retry(
    aq: Queue, tmp_path: Path
) -> None:
    """The retry starts only once the first attempt's process is gone (process records)."""
    record = tmp_path / "records.txt"
    [job_id] = await aq.add_many([stuck_once.prepare(str(record)).item])
    async with running(Worker(aq, [stuck_once])):
        done = await job_in(aq, job_id, State.COMPLETED, timeout=45)
    lines = record.read_text().splitlines()
    starts = [line.split() for line in lines if line.startswith("start")]
    assert [s[1] for s in starts] == ["1", "2"]
    assert starts[0][2] != starts[1][2] != str(os.getpid())
    assert "end 1" not in lines  # the first attempt never got to its end
    assert "first-alive False" in lines
    assert done.result == "second" and done.attempts == 2


# -- several queues ---------------------------------------------------------------------


class Gate:
    """Blocking handlers per queue, let through one at a time; counts what runs."""

    def __init__(self, *queues: Queue) -> None:
        self.running = {q.name: 0 for q in queues}
        self.permits = {q.name: threading.Semaphore(0) for q in queues}
        self.lock = threading.Lock()

    def handler(self, job: Job) -> None:
        queue = job.data
        with self.lock:
            self.running[queue] += 1
        self.permits[queue].acquire(timeout=20)
        with self.lock:
            self.running[queue] -= 1

    def let_through(self, queue: Queue, n: int = 1) -> None:
        self.permits[queue.name].release(n)

    def now(self, first: Queue, second: Queue) -> tuple[int, int]:
        with self.lock:
            return self.running[first.name], self.running[second.name]


@pytest.fixture
async def other(aq: Queue, backend_url: str) -> AsyncIterator[Queue]:
    q = Queue(aq.name + "-b", backend_url)
    yield q
    await q.drop()
    await q.close()


async def test_several_queues_under_load_run_their_weighted_shares(aq: Queue, other: Queue) -> None:
    gate = Gate(aq, other)
    for q in (aq, other):
        await q.add_many([{"name": "block", "data": q.name}] * 12)
    worker = Worker([aq, other], {"block": gate.handler}, concurrency=4, weights=[3, 1])
    assert worker.shares == [3, 1]
    try:
        async with running(worker):
            await wait_for(lambda: gate.now(aq, other) == (3, 1))
            gate.let_through(aq, 2)  # the freed slots stay with the first queue's share
            await wait_for(lambda: aq_done(aq, 2))
            await wait_for(lambda: gate.now(aq, other) == (3, 1))
            gate.let_through(aq, 100)
            gate.let_through(other, 100)
            for q in (aq, other):
                await wait_for(lambda q=q: aq_done(q, 12), timeout=20)  # type: ignore[misc]
    finally:
        gate.let_through(aq, 100)
        gate.let_through(other, 100)


async def test_a_queue_without_work_lends_its_slots_and_gets_them_back(
    aq: Queue, other: Queue
) -> None:
    gate = Gate(aq, other)
    await aq.add_many([{"name": "block", "data": aq.name}] * 12)
    worker = Worker([aq, other], {"block": gate.handler}, concurrency=4, weights=[1, 1])
    try:
        async with running(worker):
            # the idle queue keeps one slot for its wake-up claim and lends the other
            await wait_for(lambda: gate.now(aq, other) == (3, 0))
            await other.add_many([{"name": "block", "data": other.name}] * 4)
            await wait_for(lambda: gate.now(aq, other) == (3, 1))
            gate.let_through(aq)  # the borrowed slot goes back to its owner
            await wait_for(lambda: gate.now(aq, other) == (2, 2))
            gate.let_through(aq)  # and the first queue keeps its own share
            await wait_for(lambda: aq_done(aq, 2))
            await wait_for(lambda: gate.now(aq, other) == (2, 2))
    finally:
        gate.let_through(aq, 100)
        gate.let_through(other, 100)


async def aq_done(q: Queue, n: int) -> bool:
    return (await q.stats()).counts[State.COMPLETED] == n


def test_queue_lists_and_weights_are_checked(aq: Queue) -> None:
    with pytest.raises(InvalidOption, match="weights: 1 given for 2"):
        Worker([aq, Queue(aq.name + "x")], {"j": print}, weights=[1])
    with pytest.raises(InvalidOption, match="repeat a name"):
        Worker([aq, aq], {"j": print})
    with pytest.raises(InvalidOption, match="non-empty list"):
        Worker([], {"j": print})
    with pytest.raises(InvalidOption, match="two tasks are named"):
        Worker(aq, [aq.task(name="x")(print), aq.task(name="x")(print)])
