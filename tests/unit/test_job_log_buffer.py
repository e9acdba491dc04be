"""A running job's log lines wait in the worker (echomq.joblogs.JobLog) until a call
carries them: capped like the stored log, oldest dropped and counted; a heartbeat
carries at most HEARTBEAT_LOG_BYTES of them, all its jobs together."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson

from echomq.engine import Engine
from echomq.job import Job, State
from echomq.joblogs import HEARTBEAT_LOG_BYTES, MAX_BYTES, MAX_LINES, JobLog
from echomq.options import QueueOptions


def test_the_buffer_keeps_its_cap_and_says_how_many_it_dropped() -> None:
    log = JobLog(attempt=2)
    for i in range(MAX_LINES + 10):
        log.add("INFO", f"line {i}")
    entry = log.take()
    assert entry is not None
    assert entry[:2] == [2, 11]  # the attempt, and the oldest lines dropped here
    messages = [line[2] for line in entry[2:]]
    assert messages == [f"line {i}" for i in range(11, MAX_LINES + 10)]
    assert log.take() is None  # all taken


def test_a_budget_takes_the_oldest_lines_and_leaves_the_rest() -> None:
    log = JobLog(attempt=1)
    for i in range(10):
        log.add("INFO", f"{i}" * 1000)
    entry = log.take(max_bytes=3500)
    assert entry is not None and [line[2][0] for line in entry[2:]] == ["0", "1", "2"]
    rest = log.take()
    assert rest is not None and [line[2][0] for line in rest[2:]] == [str(i) for i in range(3, 10)]


def _running(i: int) -> Job:
    job = Job(f"job_{i}", "n", None, 0, None, State.ACTIVE, 1, 1, 0, datetime.now(UTC))
    job.lease_token = "1"
    job._log = JobLog(1)
    return job


def test_a_heartbeat_carries_at_most_its_budget_of_lines() -> None:
    engine = Engine("q", QueueOptions())
    jobs = [_running(i) for i in range(8)]
    for job in jobs:
        for _ in range(60):
            job.log("x" * 4000)  # about 240 KiB each, under the job's cap
    call = engine.extend_many(jobs, 30.0)
    assert call.args[7] == "job_0"  # after the option block and the lease: id, token, log
    entries = list(call.args[9::3])
    carried = sum(len(text.encode()) for text in entries)
    assert MAX_BYTES < carried <= HEARTBEAT_LOG_BYTES
    sent = sum(len(orjson.loads(text)) - 2 for text in entries if text)
    left = sum(len(job._log) for job in jobs if job._log is not None)
    assert sent + left == 8 * 60 and left > 0  # the rest waits for the next beat
