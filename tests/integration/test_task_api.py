"""The task API without silent traps (issue 28): unknown options refused, async
enqueue from sync code, arguments that cannot bind, a handler's own queue,
depends_on and schedules for tasks. Real servers; docs/tasks.md is the guide."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest

from echomq import (
    InvalidOption,
    Queue,
    State,
    SyncQueue,
    Worker,
    current_job,
    current_queue,
)
from echomq.errors import EchoMQError
from echomq.testing import drain, drain_sync
from integration.test_worker import job_in, running

pytestmark = pytest.mark.timeout(60)


# -- 1: a misspelled option is refused, nothing written -------------------------------


async def test_add_refuses_unknown_options_naming_them_and_writes_nothing(aq: Queue) -> None:
    with pytest.raises(InvalidOption, match=r"add: unknown option\(s\) 'dealy', 'key_'.*delay"):
        await aq.add("x", {}, dealy=3600, key_="k")  # type: ignore[call-arg]
    with pytest.raises(InvalidOption, match="'dealy'"):
        await aq.add_many([{"name": "x", "dealy": 1}])
    assert not await aq.exists()


def test_every_options_method_refuses_unknown_keywords(sq: SyncQueue, backend_url: str) -> None:
    with pytest.raises(InvalidOption, match="'dealy'"):
        sq.add("x", dealy=3600)  # type: ignore[call-arg]
    with pytest.raises(InvalidOption, match=r"Queue: unknown option\(s\) 'max_atempts'"):
        SyncQueue("other", backend_url, max_atempts=2)  # type: ignore[call-arg]
    with pytest.raises(InvalidOption, match=r"task: unknown option\(s\) 'retries'"):
        sq.task(retries=3)(lambda: None)  # type: ignore[call-overload]

    @sq.task(name="t")
    def t(x: int) -> None: ...

    with pytest.raises(InvalidOption, match=r"enqueue_with: unknown option\(s\) 'dealy'"):
        t.enqueue_with(dealy=5)  # type: ignore[call-arg]
    with pytest.raises(InvalidOption, match="'dealy'"):
        sq.configure(dealy=5)  # type: ignore[call-arg]
    assert not sq.exists()


# -- 4: an async task from blocking code ---------------------------------------------------


async def test_async_enqueue_without_a_loop_raises_and_enqueue_sync_adds(aq: Queue) -> None:
    @aq.task(name="send")
    async def send(to: int) -> None: ...

    def django_view() -> tuple[str, str]:
        with pytest.raises(EchoMQError, match=r"send.enqueue\(...\) is a coroutine.*enqueue_sync"):
            _ = send.enqueue(1)
        with pytest.raises(EchoMQError, match="enqueue"):
            _ = send.enqueue_with(delay=1).enqueue(1)
        return send.enqueue_sync(1), send.enqueue_with(delay=60).enqueue_sync(2)

    now, later = await asyncio.to_thread(django_view)
    assert (await aq.get(now)).state == State.WAITING  # type: ignore[union-attr]
    job = await aq.get(later)
    assert job is not None and job.state == State.DELAYED and job.data == {"args": [2]}
    with pytest.raises(EchoMQError, match="an event loop runs in this thread"):
        send.enqueue_sync(3)  # it would block the loop


# -- 5: arguments that cannot bind are dead at once; the task's options apply ------------


async def test_a_task_job_whose_arguments_cannot_bind_is_dead_at_once(aq: Queue) -> None:
    @aq.task(name="send", max_attempts=5)
    def send(to: str, subject: str, body: str) -> None: ...

    missing = await aq.add("send", {"args": ["a@b"]})
    not_args = await aq.add("send", {"to": "a@b"})
    outcomes = {o.job_id: o for o in await drain(aq, [send])}
    assert outcomes[missing].state == State.DEAD and outcomes[missing].attempts == 1
    assert "send(to: str, subject: str, body: str): missing a required argument" in str(
        outcomes[missing].error
    )
    assert outcomes[not_args].state == State.DEAD and outcomes[not_args].attempts == 1
    assert '{"args": [...], "kwargs": {...}}' in str(outcomes[not_args].error)
    job = await aq.get(missing)
    assert job is not None and job.max_attempts == 5  # the task's, though added by hand


# -- 8: a handler's own queue, under a second queue object --------------------------------


@pytest.fixture
async def module_queue(backend_url: str, queue_name: str) -> AsyncIterator[Queue]:
    """The tasks module's queue: another name than the queue the worker serves."""
    q = Queue(f"{queue_name}-module", backend_url)
    yield q
    await q.drop()
    await q.close()


async def test_a_handler_reaches_the_queue_it_runs_on(aq: Queue, module_queue: Queue) -> None:
    seen: dict[str, Any] = {}

    @module_queue.task(name="step")
    async def step(n: int) -> int:
        return n * 10

    @module_queue.task(name="fan_in")
    async def fan_in() -> None:
        seen["queue"] = current_queue()
        seen["results"] = await current_job().dependency_results()
        seen["follow_up"] = await step.enqueue(7)  # to the queue this job runs on

    @module_queue.task(name="fan_in_sync")
    def fan_in_sync() -> None:
        job = current_job()
        seen["sync_thread"] = threading.current_thread() is not threading.main_thread()
        seen["sync_results"] = job.dependency_results()
        seen["sync_follow_up"] = step.enqueue_sync(8)

    a = await aq.add("step", {"args": [1]})
    b = await aq.add("step", {"args": [2]})
    fan = await aq.add("fan_in", depends_on=[a, b])
    fan_sync = await aq.add("fan_in_sync", depends_on=[a])
    outcomes = await drain(aq, [step, fan_in, fan_in_sync])
    assert {o.job_id: o.state for o in outcomes}[fan] == State.COMPLETED
    assert {o.job_id: o.state for o in outcomes}[fan_sync] == State.COMPLETED
    assert seen["queue"] is aq
    assert seen["results"] == {a: 10, b: 20}
    assert seen["sync_thread"] and seen["sync_results"] == {a: 10}
    for follow_up, result in ((seen["follow_up"], 70), (seen["sync_follow_up"], 80)):
        done = await aq.get(follow_up)  # ran in the same drain, on the worker's queue
        assert done is not None and done.state == State.COMPLETED and done.result == result
    assert not await module_queue.exists()  # nothing went to the module's queue


def test_a_sync_task_follow_up_goes_to_the_queue_its_job_runs_on(
    backend_url: str, queue_name: str
) -> None:
    """Tasks made on a SyncQueue (a Django project's module), run by a worker on
    another queue object (drain_sync: the testing kit's way): a follow-up
    ``enqueue`` from a sync handler goes to the queue the job runs on, with the
    task's options and the enqueuer's; the module's queue gets nothing."""
    with (
        SyncQueue(f"{queue_name}-module", backend_url) as module_q,
        SyncQueue(queue_name, backend_url) as test_q,
    ):
        seen: dict[str, Any] = {}

        @module_q.task(name="step", max_attempts=2)
        def step(n: int) -> int:
            return n * 10

        @module_q.task(name="kick")
        def kick() -> None:
            seen["plain"] = step.enqueue(4)
            seen["with"] = step.enqueue_with(priority=3).enqueue(5)

        kicked = test_q.add("kick")
        outcomes = drain_sync(test_q, [step, kick])
        assert {o.job_id: o.state for o in outcomes}[kicked] == State.COMPLETED
        for key, result in (("plain", 40), ("with", 50)):
            done = test_q.get(seen[key])
            assert done is not None, f"the {key} follow-up is not on the job's queue"
            assert done.state == State.COMPLETED and done.result == result
            assert done.max_attempts == 2
        with_job = test_q.get(seen["with"])
        assert with_job is not None and with_job.priority == 3
        assert not module_q.exists()  # nothing went to the module's queue
        test_q.drop()


async def test_job_queue_is_refused_for_a_job_not_claimed_here(aq: Queue) -> None:
    job_id = await aq.add("x")
    job = await aq.get(job_id)
    assert job is not None
    with pytest.raises(EchoMQError, match=r"job\.queue is known only for a job claimed"):
        _ = job.queue
    claimed = await aq.claim()
    assert claimed[0].queue is aq


# -- 9: depends_on through enqueue_with, and task.schedule ---------------------------------


async def test_enqueue_with_depends_on_and_task_schedule_apply_the_task_options(
    aq: Queue,
) -> None:
    @aq.task(name="report", group=lambda tenant: f"tenant-{tenant}", max_attempts=4)
    async def report(tenant: str) -> str:
        return tenant

    first = await report.enqueue("acme")
    after = await report.enqueue_with(depends_on=[first]).enqueue("acme")
    blocked = await aq.get(after)
    assert blocked is not None and blocked.state == State.BLOCKED
    assert blocked.group == "tenant-acme" and blocked.max_attempts == 4
    async with running(Worker(aq, [report])):
        done = await job_in(aq, after, State.COMPLETED)
    assert done.dependencies == [first]

    await report.schedule("nightly", report.prepare("globex"), cron="0 3 * * *")
    (info,) = await aq.schedules()
    assert (info.id, info.name, info.cron) == ("nightly", "report", "0 3 * * *")
    assert info.data == {"args": ["globex"]}
    assert info.group == "tenant-globex" and info.max_attempts == 4
    with pytest.raises(InvalidOption, match="prepared by another task"):
        other = aq.task(name="other")(lambda: None)
        await report.schedule("x", other.prepare(), every=60)


def test_a_sync_task_schedules_too(sq: SyncQueue) -> None:
    @sq.task(name="ping", priority=3)
    def ping() -> None: ...

    sq_next = ping.schedule("p", every=60)
    assert sq_next is not None
    (info,) = sq.schedules()
    assert (info.name, info.priority, info.data) == ("ping", 3, {})
