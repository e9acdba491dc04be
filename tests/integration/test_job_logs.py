"""Job logs (DESIGN §10): job.log and a handler's logging records reach its job's
log, sent with heartbeats and outcomes, capped, gone with the job; the records of
jobs running side by side (threads, asyncio tasks, processes) never mix."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis

from echomq import EchoMQError, InvalidOption, Job, JobNotFound, Queue, State, Worker
from echomq.errors import InvalidId
from echomq.joblogs import MAX_BYTES, MAX_LINES
from integration.isolated_tasks import logs_in_process
from integration.test_worker import job_in, running, wait_for

pytestmark = pytest.mark.timeout(90)

app = logging.getLogger("tests.app")


async def test_job_log_and_the_handlers_records_reach_its_log(aq: Queue) -> None:
    async def handler(job: Job) -> str:
        job.log("started \x1b[31m")
        app.info("charging %s", "card 42")
        app.debug("below the worker's level: not kept")
        logging.getLogger("echomq.worker").info("the worker's own record: not the job's")
        try:
            raise ValueError("declined")
        except ValueError:
            app.exception("charge failed")
        job.log("custom level", level="ERROR")
        return "ok"

    job_id = await aq.add("h", 1)
    before = datetime.now(UTC)
    async with running(Worker(aq, {"h": handler})):
        done = await job_in(aq, job_id, State.COMPLETED)
    lines = await aq.logs(job_id)
    assert [(line.level, line.message.splitlines()[0]) for line in lines] == [
        ("INFO", "started \x1b[31m"),
        ("INFO", "charging card 42"),
        ("ERROR", "charge failed"),
        ("ERROR", "custom level"),
    ]
    assert "ValueError: declined" in lines[2].message  # the record's traceback
    assert {line.attempt for line in lines} == {1}
    for line in lines:
        assert before - timedelta(seconds=2) <= line.at <= datetime.now(UTC) + timedelta(seconds=2)
    assert [line.at for line in lines] == sorted(line.at for line in lines)
    assert done.worker is not None and done.duration is not None and done.duration >= 0


async def test_lines_travel_with_heartbeats_before_the_outcome(aq: Queue) -> None:
    release = asyncio.Event()

    async def slow(job: Job) -> None:
        app.warning("halfway")
        await release.wait()
        job.log("done")

    job_id = await aq.add("slow")
    async with running(Worker(aq, {"slow": slow}, lease=1.5, heartbeat=0.2)):
        await job_in(aq, job_id, State.ACTIVE)

        async def sent() -> bool:
            return [line.message for line in await aq.logs(job_id)] == ["halfway"]

        await wait_for(sent, timeout=10)
        release.set()
        await job_in(aq, job_id, State.COMPLETED)
    assert [line.message for line in await aq.logs(job_id)] == ["halfway", "done"]


async def test_a_failed_attempt_keeps_its_lines_and_the_next_attempt_adds_its_own(
    aq: Queue,
) -> None:
    def flaky(job: Job) -> str:
        app.info("attempt %d begins", job.attempts)
        if job.attempts == 1:
            raise RuntimeError("first fails")
        return "ok"

    job_id = await aq.add("flaky", max_attempts=2)
    async with running(Worker(aq, {"flaky": flaky})):
        await job_in(aq, job_id, State.COMPLETED, timeout=20)
    lines = await aq.logs(job_id)
    assert [(line.attempt, line.message) for line in lines] == [
        (1, "attempt 1 begins"),
        (2, "attempt 2 begins"),
    ]


async def test_the_records_of_sync_handlers_on_threads_never_mix(aq: Queue) -> None:
    barrier = threading.Barrier(3, timeout=20)

    def handler(job: Job) -> None:
        who = job.data
        barrier.wait()  # all three run at once, on three threads
        for i in range(30):
            app.info("%s line %d", who, i)
            job.log(f"{who} job.log {i}")
            time.sleep(0.001)

    ids = {who: await aq.add("t", who) for who in ("a", "b", "c")}
    async with running(Worker(aq, {"t": handler}, concurrency=3)):
        for job_id in ids.values():
            await job_in(aq, job_id, State.COMPLETED, timeout=30)
    for who, job_id in ids.items():
        messages = [line.message for line in await aq.logs(job_id)]
        assert len(messages) == 60
        assert all(m.startswith(f"{who} ") for m in messages), messages


async def test_the_records_of_async_handlers_in_tasks_never_mix(aq: Queue) -> None:
    started = 0
    all_in = asyncio.Event()

    async def handler(job: Job) -> None:
        nonlocal started
        started += 1
        if started == 3:
            all_in.set()
        await asyncio.wait_for(all_in.wait(), 20)

        async def helper(i: int) -> None:  # a task the handler starts: still its job
            app.info("%s helper %d", job.data, i)

        for i in range(30):
            app.info("%s line %d", job.data, i)
            await asyncio.create_task(helper(i))
            await asyncio.sleep(0)

    ids = {who: await aq.add("a", who) for who in ("x", "y", "z")}
    async with running(Worker(aq, {"a": handler}, concurrency=3)):
        for job_id in ids.values():
            await job_in(aq, job_id, State.COMPLETED, timeout=30)
    for who, job_id in ids.items():
        messages = [line.message for line in await aq.logs(job_id)]
        assert len(messages) == 60
        assert all(m.startswith(f"{who} ") for m in messages), messages


async def test_the_records_of_process_isolated_tasks_never_mix(aq: Queue, tmp_path: Path) -> None:
    ids = await aq.add_many(
        [logs_in_process.prepare(who, 20, str(tmp_path)).item for who in ("p", "q")]
    )
    async with running(Worker(aq, [logs_in_process], concurrency=2)):
        for job_id in ids:
            await job_in(aq, job_id, State.COMPLETED, timeout=60)
    for who, job_id in zip(("p", "q"), ids, strict=True):
        lines = await aq.logs(job_id)
        messages = [line.message for line in lines]
        assert messages.count(f"{who} from a thread") == 1
        assert sorted(messages) == sorted(
            [f"{who} says {i}" for i in range(20)]
            + [f"{who} logs {i}" for i in range(20)]
            + [f"{who} from a thread"]
        )
        assert {line.level for line in lines} == {"INFO", "WARNING"}


async def test_a_log_is_capped_oldest_lines_first_with_one_line_saying_how_many(
    aq: Queue,
) -> None:
    gate = asyncio.Event()

    async def chatty(job: Job) -> None:
        for i in range(800):
            job.log(f"line {i}")
        await gate.wait()  # the heartbeat sends these 800 first
        for i in range(800, 1600):
            job.log(f"line {i}")

    job_id = await aq.add("chatty")
    async with running(Worker(aq, {"chatty": chatty}, lease=1.5, heartbeat=0.2)):

        async def first_batch_sent() -> bool:
            return len(await aq.logs(job_id)) == 800

        await wait_for(first_batch_sent, timeout=10)
        gate.set()
        await job_in(aq, job_id, State.COMPLETED)
    lines = await aq.logs(job_id)
    assert len(lines) == MAX_LINES
    assert lines[0].message.startswith("601 older line(s) dropped")
    assert [line.message for line in lines[1:]] == [f"line {i}" for i in range(601, 1600)]


async def test_a_log_is_capped_by_its_bytes(aq: Queue, redis_client: redis.Redis) -> None:
    big = "x" * 4000

    def bulky(job: Job) -> None:
        for i in range(100):
            job.log(f"{i:03d} {big}")

    job_id = await aq.add("bulky")
    async with running(Worker(aq, {"bulky": bulky})):
        await job_in(aq, job_id, State.COMPLETED)
    lines = await aq.logs(job_id)
    kept = [int(line.message[:3]) for line in lines[1:]]
    assert kept == list(range(100 - len(kept), 100)) and 55 <= len(kept) < 100
    assert lines[0].message.startswith(f"{100 - len(kept)} older line(s) dropped")
    stored: list[str] = redis_client.lrange(aq.engine.keys.log(job_id), 0, -1)  # type: ignore[assignment]
    assert sum(len(line.encode()) for line in stored) <= MAX_BYTES


async def test_the_bytes_cap_counts_the_lines_of_earlier_calls(
    aq: Queue, redis_client: redis.Redis
) -> None:
    # the kept bytes live in the job's field lg, read by the next call that
    # appends (a queue's feature word says its jobs may hold one: docs/design.md §9)
    big = "y" * 4000
    gate = asyncio.Event()

    async def bulky(job: Job) -> None:
        for i in range(40):
            job.log(f"{i:03d} {big}")
        await gate.wait()  # the heartbeat sends these 160 kB first
        for i in range(40, 80):
            job.log(f"{i:03d} {big}")

    job_id = await aq.add("bulky")
    async with running(Worker(aq, {"bulky": bulky}, lease=1.5, heartbeat=0.2)):

        async def first_batch_sent() -> bool:
            return len(await aq.logs(job_id)) == 40

        await wait_for(first_batch_sent, timeout=10)
        gate.set()
        await job_in(aq, job_id, State.COMPLETED)
    stored: list[str] = redis_client.lrange(aq.engine.keys.log(job_id), 0, -1)  # type: ignore[assignment]
    assert sum(len(line.encode()) for line in stored) <= MAX_BYTES
    lines = await aq.logs(job_id)
    assert "dropped" in lines[0].message
    assert int(lines[-1].message[:3]) == 79


async def test_the_log_goes_with_its_job(aq: Queue, redis_client: redis.Redis) -> None:
    def logs_then(job: Job) -> None:
        job.log("something")
        if job.data == "die":
            raise RuntimeError("dies")

    q = Queue(aq.name, aq.url, keep_completed=2)
    try:
        removed = await q.add("l", "remove")
        pruned = await q.add("l", "prune")
        dead = await q.add("l", "die", max_attempts=1)
        async with running(Worker(q, {"l": logs_then}, concurrency=1)):
            for job_id in (removed, pruned):
                await job_in(q, job_id, State.COMPLETED)
            await job_in(q, dead, State.DEAD)
            keys = q.engine.keys
            assert all(redis_client.exists(keys.log(j)) for j in (removed, pruned, dead))
            assert await q.remove(removed)
            assert not redis_client.exists(keys.log(removed))
            assert await q.purge_dead([dead]) == [dead]
            assert not redis_client.exists(keys.log(dead))
            for last in (await q.add("l", "last"), await q.add("l", "last")):
                await job_in(q, last, State.COMPLETED)  # the second prunes `pruned` (keep 2)
        assert await q.get(pruned) is None
        assert not redis_client.exists(keys.log(pruned))
        with pytest.raises(JobNotFound):
            await q.logs(pruned)
    finally:
        await q.close()


async def test_a_job_that_logs_nothing_has_no_log(aq: Queue, redis_client: redis.Redis) -> None:
    job_id = await aq.add("quiet")
    async with running(Worker(aq, {"quiet": lambda job: None})):
        await job_in(aq, job_id, State.COMPLETED)
    assert await aq.logs(job_id) == []
    assert not redis_client.exists(aq.engine.keys.log(job_id))
    assert redis_client.hget(aq.engine.keys.job(job_id), "lg") is None


async def test_bad_input_is_refused(aq: Queue) -> None:
    with pytest.raises(InvalidOption, match="log level 'LOUD'"):
        Worker(aq, {"x": lambda job: None}, job_log_level="LOUD")
    with pytest.raises(InvalidOption, match="log level 7"):
        Worker(aq, {"x": lambda job: None}, job_log_level=7)
    with pytest.raises(InvalidId):
        await aq.logs(12)  # type: ignore[arg-type]
    with pytest.raises(JobNotFound):
        await aq.logs("job_does_not_exist")
    job_id = await aq.add("x")
    [job] = await aq.claim(1)
    with pytest.raises(EchoMQError, match="only inside a worker's handler"):
        job.log("outside a handler")
    with pytest.raises(InvalidOption, match="log level 'LOUD'"):
        job.log("x", level="LOUD")
    assert job.id == job_id


class _Seen(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


async def test_the_capture_changes_nothing_the_application_prints(aq: Queue) -> None:
    """An app that logs at WARNING and up: the job's log gets its INFO records
    (the capture lowers the root level while the worker runs), its own handler
    still sees only what it saw before, and the root level comes back after."""
    root = logging.getLogger()
    seen = _Seen()
    old_level = root.level
    root.setLevel(logging.WARNING)
    root.addHandler(seen)
    try:

        def handler(job: Job) -> None:
            app.info("an info line")
            app.warning("a warning")

        job_id = await aq.add("h")
        async with running(Worker(aq, {"h": handler})):
            await job_in(aq, job_id, State.COMPLETED)
            app.info("outside any job, while the worker runs")
        messages = [line.message for line in await aq.logs(job_id)]
        assert messages == ["an info line", "a warning"]
        assert "an info line" not in seen.messages and "a warning" in seen.messages
        assert "outside any job, while the worker runs" not in seen.messages
        assert root.level == logging.WARNING and seen.filters == []
    finally:
        root.removeHandler(seen)
        root.setLevel(old_level)


async def test_cancelling_a_job_waiting_for_its_retry_deletes_its_log(
    aq: Queue, redis_client: redis.Redis
) -> None:
    def fails(job: Job) -> None:
        job.log("tried")
        raise RuntimeError("again later")

    job_id = await aq.add("f", max_attempts=3)
    async with running(Worker(aq, {"f": fails})):
        await job_in(aq, job_id, State.FAILED)
    assert [line.message for line in await aq.logs(job_id)] == ["tried"]
    assert await aq.cancel(job_id) is True
    assert not redis_client.exists(aq.engine.keys.log(job_id))
