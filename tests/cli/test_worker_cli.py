"""``echomq worker``: one process, and N processes under the supervisor.

The handlers live in a module written to the test's temporary directory,
which is the worker's current directory (the CLI makes it importable).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cli.clitools import CLI, RunCli, cli_env, one_line_error, queue_args, wait_for
from echomq import SyncQueue

TASKS = """
import os


def echo(job):
    return {"pid": os.getpid(), "n": job.data}


def boom(job):
    raise RuntimeError("boom from the handler")


def chatty(job):
    import logging

    logging.getLogger("cli_tasks").info("info %s", job.data)
    logging.getLogger("cli_tasks").debug("debug %s", job.data)


handlers = {"echo": echo, "boom": boom, "chatty": chatty}


def factory(queue):
    return {"echo": echo}


from echomq import SyncQueue

app = SyncQueue("app")


@app.task(name="double")
def double(n):
    return 2 * n


tasks = [double]
"""


@pytest.fixture
def tasks_dir(tmp_path: Path) -> Path:
    (tmp_path / "cli_tasks.py").write_text(TASKS, encoding="utf-8")
    return tmp_path


@pytest.fixture
def start_worker(
    backend_url: str, queue_name: str, tasks_dir: Path
) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start ``echomq worker ARGS`` in the background; killed after the test if still running."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        argv = [*CLI, "worker", *queue_args(args, backend_url, queue_name)]
        proc = subprocess.Popen(
            argv,
            cwd=tasks_dir,
            env=cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


def completed(sq: SyncQueue) -> int:
    return sq.stats().counts["completed"]


def children(pid: int) -> set[int]:
    """Live child processes of ``pid`` (from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] not in ("Z", "X"):
            found.add(int(entry.name))
    return found


def test_worker_runs_jobs_and_exits_0_on_sigterm(
    start_worker: Callable[..., subprocess.Popen[str]], sq: SyncQueue
) -> None:
    proc = start_worker("cli_tasks:handlers", "--concurrency", "4", "--progress")
    ids = sq.add_many([{"name": "echo", "data": n} for n in range(20)])
    dead_id = sq.add("boom", max_attempts=1)
    wait_for(lambda: completed(sq) == 20 and sq.stats().counts["dead"] == 1, 20, "jobs done")
    results = {job.id: job.result for job in sq.jobs("completed", count=100)}
    assert {results[job_id]["n"] for job_id in ids} == set(range(20))
    assert {results[job_id]["pid"] for job_id in ids} == {proc.pid}
    dead = sq.get(dead_id)
    assert dead is not None and "boom from the handler" in (dead.error or "")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=5) == 0
    _, stderr = proc.communicate()
    assert "completed 20" in stderr  # the --progress status line
    assert "Traceback" not in stderr.split("boom from the handler")[0]


def test_worker_accepts_a_factory(
    start_worker: Callable[..., subprocess.Popen[str]], sq: SyncQueue
) -> None:
    proc = start_worker("cli_tasks:factory")
    sq.add("echo", 5)
    wait_for(lambda: completed(sq) == 1, 20, "the job to complete")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=5) == 0


def test_worker_accepts_a_list_of_tasks(
    start_worker: Callable[..., subprocess.Popen[str]], sq: SyncQueue
) -> None:
    proc = start_worker("cli_tasks:tasks")
    job_id = sq.add("double", {"args": [21]})
    wait_for(lambda: completed(sq) == 1, 20, "the task to complete")
    job = sq.get(job_id)
    assert job is not None and job.result == 42
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=5) == 0


def test_supervisor_restarts_a_dead_process_and_stops_all(
    start_worker: Callable[..., subprocess.Popen[str]], sq: SyncQueue
) -> None:
    proc = start_worker("cli_tasks:handlers", "--processes", "2", "--concurrency", "2")
    wait_for(lambda: len(children(proc.pid)) == 2, 10, "two worker processes")
    first = children(proc.pid)
    victim = min(first)
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: len(children(proc.pid) - {victim}) == 2, 10, "a replacement process")
    now = children(proc.pid)
    assert victim not in now and len(now & first) == 1
    ids = sq.add_many([{"name": "echo", "data": n} for n in range(30)])
    wait_for(lambda: completed(sq) == 30, 20, "30 jobs done by the pool")
    pids = {job.result["pid"] for job in sq.jobs("completed", count=100) if job.id in set(ids)}
    assert pids <= now
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=8) == 0
    assert not children(proc.pid)
    _, stderr = proc.communicate()
    assert "restarting" in stderr


def test_worker_user_errors(cli: RunCli, tasks_dir: Path) -> None:
    line = one_line_error(cli("worker", "no_such_module:handlers", cwd=tasks_dir))
    assert "no_such_module" in line
    line = one_line_error(cli("worker", "cli_tasks:missing", cwd=tasks_dir))
    assert "missing" in line
    line = one_line_error(
        cli("worker", "cli_tasks:handlers", url="redis://127.0.0.1:1/0", cwd=tasks_dir)
    )
    assert "cannot reach the server" in line


# -- tasks bring their queue and its options; one line per job; escaped log lines -------

REPORT_TASKS = """
import os

from echomq import Backoff, Queue

reports = Queue(os.environ["REPORTS_QUEUE"], backoff=Backoff(base=3600, factor=1, jitter=0))


@reports.task(name="render")
def render(n):
    return n + 1


@reports.task(name="flaky")
def flaky():
    raise RuntimeError("try again later")


tasks = [render, flaky]
"""

NASTY = "\\x1b]0;pwned\\x07\\x1b[2J\\n2099-01-01 00:00:00 WARNING [1] echomq.worker: forged"

NASTY_HANDLERS = f"""
def boom(job):
    raise RuntimeError({NASTY!r})


def fine(job):
    return None


handlers = {{"boom": boom, "fine": fine}}
"""


def _popen_worker(
    tasks_dir: Path, module: str, text: str, *args: str, env: dict[str, str]
) -> subprocess.Popen[str]:
    (tasks_dir / f"{module}.py").write_text(text, encoding="utf-8")
    return subprocess.Popen(
        [*CLI, "worker", *args],
        cwd=tasks_dir,
        env=cli_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop(proc: subprocess.Popen[str]) -> str:
    """SIGTERM (SIGKILL if it lingers), and the worker's stderr."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        _, stderr = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate(timeout=10)
    return stderr


def test_a_worker_given_tasks_serves_their_queue_with_their_queues_options(
    tasks_dir: Path, backend_url: str, sq: SyncQueue
) -> None:
    proc = _popen_worker(
        tasks_dir,
        "reportsvc",
        REPORT_TASKS,
        "reportsvc:tasks",  # no --queue: the tasks' Queue("<the test's queue>")
        "--url",
        backend_url,
        env={"REPORTS_QUEUE": sq.name},
    )
    try:
        done = sq.add("render", {"args": [41]})
        flaky = sq.add("flaky", max_attempts=2)
        wait_for(lambda: completed(sq) == 1, 20, "the task's job on the tasks' queue")
        wait_for(lambda: (j := sq.get(flaky)) is not None and j.error is not None, 20, "failure")
        job = sq.get(flaky)
        assert (
            job is not None and job.state == "failed" and job.run_at is not None
        )  # waiting for its retry
        # the tasks' Queue(backoff=3600 s) applies, not the default (about 1 s)
        assert (job.run_at - datetime.now(UTC)).total_seconds() > 3000
        got = sq.get(done)
        assert got is not None and got.result == 42
    finally:
        stderr = _stop(proc)
    assert "the options of the tasks' Queue object in reportsvc:tasks apply" in stderr
    assert "backoff=Backoff(base=3600" in stderr
    # one INFO line per completed job: id, name, duration, outcome
    assert re.search(rf"INFO .*job {done} \(render\) completed in \d+\.\d{{3}} s", stderr), stderr


def test_a_worker_told_another_queue_than_its_tasks_says_so(
    start_worker: Callable[..., subprocess.Popen[str]], sq: SyncQueue
) -> None:
    proc = start_worker("cli_tasks:tasks")  # bound to SyncQueue("app"); --queue the test's
    job_id = sq.add("double", {"args": [1]})
    wait_for(lambda: completed(sq) == 1, 20, "the task to complete on --queue")
    stderr = _stop(proc)
    assert f"queue {sq.name} (--queue): the tasks of cli_tasks:tasks are bound to queue app" in (
        stderr
    )
    assert f"job {job_id} (double) completed in" in stderr


def test_worker_log_lines_escape_job_text_and_quiet_jobs_drops_completed_lines(
    tasks_dir: Path, backend_url: str, sq: SyncQueue
) -> None:
    proc = _popen_worker(
        tasks_dir,
        "nasty",
        NASTY_HANDLERS,
        "nasty:handlers",
        "--quiet-jobs",
        "--url",
        backend_url,
        "--queue",
        sq.name,
        env={},
    )
    try:
        bad = sq.add("boom", max_attempts=1, key="key\x1b[31m\nWARNING forged key")
        unknown = sq.add("no\x1b[2Jsuch\nWARNING forged name")
        fine = sq.add("fine")
        wait_for(lambda: sq.stats().counts["dead"] == 1 and completed(sq) == 1, 20, "jobs done")
        wait_for(lambda: (j := sq.get(unknown)) is not None and j.state == "delayed", 20, "release")
    finally:
        stderr = _stop(proc)
    assert "\x1b" not in stderr and "\x07" not in stderr
    for line in stderr.splitlines():
        assert not line.startswith(("2099-01-01", "WARNING forged")), stderr
    dead_line = next(line for line in stderr.splitlines() if f"job {bad}" in line)
    assert "\\x1b]0;pwned\\x07\\x1b[2J\\n2099-01-01" in dead_line  # visible, on one line
    assert "key\\x1b[31m\\nWARNING forged key" in dead_line
    assert "no\\x1b[2Jsuch\\nWARNING forged name" in stderr
    assert f"job {fine}" not in stderr  # --quiet-jobs: no line for a completed job


def test_worker_help_says_handlers_may_be_a_list_of_tasks(cli: RunCli) -> None:
    out = cli("worker", "--help", queue=False)
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    assert "HANDLERS is a list of tasks" in text and "the queue(s) the tasks are bound to" in text
    assert "--quiet-jobs" in text


@pytest.mark.parametrize(("level", "kept"), [("", ["info 1"]), ("debug", ["info 1", "debug 1"])])
def test_job_log_level_picks_the_records_a_job_keeps(
    start_worker: Callable[..., subprocess.Popen[str]], sq: SyncQueue, level: str, kept: list[str]
) -> None:
    args = ["--job-log-level", level] if level else []
    proc = start_worker("cli_tasks:handlers", *args)
    job_id = sq.add("chatty", 1)
    wait_for(lambda: completed(sq) == 1, 20, "the job to complete")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=5) == 0
    assert [line.message for line in sq.logs(job_id)] == kept
    [worker_id] = {job.worker for job in sq.jobs("completed")}
    assert worker_id is not None and sq.workers() == []  # it left as it stopped
