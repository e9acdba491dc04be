"""The worker's log lines (docs/worker.md, "Log lines"): one INFO line per
completed job unless ``log_jobs=False``, and every job-derived value escaped."""

from __future__ import annotations

import logging

import pytest

from echomq import InvalidOption, Job, Queue, State, Worker
from integration.test_worker import job_in, running

pytestmark = pytest.mark.timeout(60)

NASTY = "\x1b]0;pwned\x07\x1b[2J\n2099-01-01 WARNING forged\u202e"


def ok(job: Job) -> str:
    return "fine"


def boom(job: Job) -> None:
    raise RuntimeError(NASTY)


@pytest.mark.parametrize("log_jobs", [True, False])
async def test_one_line_per_completed_job_unless_log_jobs_is_off_and_text_is_escaped(
    aq: Queue, caplog: pytest.LogCaptureFixture, log_jobs: bool
) -> None:
    done = await aq.add("ok", key="k\x1b[31m\nforged key")
    dead = await aq.add("boom", max_attempts=1)
    with caplog.at_level(logging.INFO, logger="echomq.worker"):
        async with running(Worker(aq, {"ok": ok, "boom": boom}, log_jobs=log_jobs)):
            await job_in(aq, done, State.COMPLETED)
            await job_in(aq, dead, State.DEAD)
    lines = [r.getMessage() for r in caplog.records if r.name == "echomq.worker"]
    completed = [line for line in lines if line.startswith(f"job {done} ")]
    if log_jobs:
        assert completed == [
            f"job {done} (ok, key k\\x1b[31m\\nforged key) completed in "
            + completed[0].rsplit(" in ", 1)[1]
        ]
        assert completed[0].endswith(" s")
    else:
        assert completed == []
    [dead_line] = [line for line in lines if line.startswith(f"job {dead} ")]
    assert "\\x1b]0;pwned\\x07\\x1b[2J\\n2099-01-01 WARNING forged\\u202e" in dead_line
    for line in lines:
        assert "\n" not in line and "\x1b" not in line and "\u202e" not in line


def test_log_jobs_must_be_a_bool() -> None:
    with pytest.raises(InvalidOption, match="log_jobs 'no'"):
        Worker(Queue("never-connected"), {"ok": ok}, log_jobs="no")  # type: ignore[arg-type]
