"""echomq.testing as a user's suite meets it: the plugin's private server and
per-test queues, and drain() running real handlers until the queue is idle."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from echomq import (
    Backoff,
    InvalidOption,
    Queue,
    Retry,
    State,
    SyncQueue,
    Unrecoverable,
    current_job,
)
from echomq.testing import drain, drain_sync

pytestmark = pytest.mark.timeout(60)


async def test_drain_runs_tasks_until_idle_and_returns_every_outcome(echomq_queue: Queue) -> None:
    q = echomq_queue
    assert q.url is not None and q.url.startswith("unix://")  # the session's private server

    @q.task(name="double")
    async def double(n: int) -> int:
        return 2 * n

    @q.task(name="picky", max_attempts=3, backoff=Backoff(base=0, jitter=0))
    def picky(n: int) -> int:
        if current_job().attempts < 2:
            raise Retry(delay=0)
        if n < 0:
            raise Unrecoverable("negative")
        return n

    await double.enqueue_many([(1,), (2,), (3,)])
    await picky.enqueue(5)
    doomed = await picky.enqueue(-1)
    outcomes = await drain(q, [double, picky])
    assert sorted(o.result for o in outcomes if o.name == "double") == [2, 4, 6]
    picky_runs = [(o.state, o.attempts, o.result) for o in outcomes if o.name == "picky"]
    assert sorted(picky_runs) == sorted(
        [
            (State.FAILED, 1, None),
            (State.FAILED, 1, None),
            (State.COMPLETED, 2, 5),
            (State.DEAD, 2, None),
        ]
    )
    [dead] = [o for o in outcomes if o.job_id == doomed and o.state is State.DEAD]
    assert dead.error == "Unrecoverable: negative"
    stats = await q.stats()
    assert stats.counts[State.WAITING] == stats.counts[State.ACTIVE] == 0


async def test_each_test_gets_a_queue_of_its_own(echomq_queue: Queue) -> None:
    assert not await echomq_queue.exists()  # nothing left over from the test above
    assert "each_test_gets_a_queue" in echomq_queue.name


def test_drain_sync_serves_a_sync_queue(echomq_sync_queue: SyncQueue) -> None:
    sq = echomq_sync_queue

    @sq.task(name="upper")
    def upper(word: str) -> str:
        return word.upper()

    upper.enqueue("abc")
    [outcome] = drain_sync(sq, [upper])
    assert (outcome.state, outcome.result, outcome.data) == (
        State.COMPLETED,
        "ABC",
        {"args": ["abc"]},
    )


# -- a user's fresh project, and a test run that is killed ----------------------------

FRESH_TEST = """
from echomq import Backoff, Queue, State, current_job
from echomq.testing import drain


async def test_send(echomq_queue: Queue) -> None:
    await echomq_queue.configure(backoff=Backoff(base=0, jitter=0))  # retries at once

    @echomq_queue.task(name="flaky")
    def flaky() -> str:
        if current_job().attempts < 2:
            raise RuntimeError("first try fails")
        return "ok"

    await flaky.enqueue()
    outcomes = await drain(echomq_queue, [flaky])
    assert [o.state for o in outcomes] == [State.FAILED, State.COMPLETED]
"""

KILLED_TEST = """
import pathlib, time
import redis


def test_hangs(echomq_url: str) -> None:
    pid = redis.Redis.from_url(echomq_url).info("server")["process_id"]
    pathlib.Path("server.pid").write_text(str(pid))
    time.sleep(120)
"""


def _pytest_in(directory: Path, test: str) -> list[str]:
    (directory / "test_user.py").write_text(test)
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_an_async_test_runs_in_a_fresh_project_without_pytest_config(tmp_path: Path) -> None:
    """No asyncio_mode, no marker, no conftest: the docs' test runs as written."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    done = subprocess.run(
        _pytest_in(tmp_path, FRESH_TEST),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout


def test_the_private_server_dies_with_a_killed_test_run(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    run = subprocess.Popen(
        _pytest_in(tmp_path, KILLED_TEST),
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pid_file = tmp_path / "server.pid"
    server = None
    try:
        deadline = time.monotonic() + 30
        while not pid_file.exists() or not pid_file.read_text():
            assert run.poll() is None and time.monotonic() < deadline, "the inner run never began"
            time.sleep(0.05)
        server = int(pid_file.read_text())
        assert _alive(server)
        run.kill()  # kill -9: no fixture teardown runs
        run.wait(10)
        deadline = time.monotonic() + 15
        while _alive(server):
            assert time.monotonic() < deadline, f"valkey {server} outlived its killed test run"
            time.sleep(0.05)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(10)
        if server is not None and _alive(server):
            os.kill(server, signal.SIGKILL)


async def test_drain_refuses_an_unknown_worker_option(echomq_queue: Queue) -> None:
    with pytest.raises(InvalidOption, match=r"drain: unknown option\(s\) 'concurency'"):
        await drain(echomq_queue, {"x": lambda job: None}, concurency=2)
    with pytest.raises(InvalidOption, match="'on_completed'"):  # drain's own hook
        await drain(echomq_queue, {"x": lambda job: None}, on_completed=print)
