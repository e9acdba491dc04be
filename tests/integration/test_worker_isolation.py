"""A process-isolated job dies with its worker (docs/worker.md, timeouts): a worker
killed with SIGKILL runs no cleanup, and its job's process (a child of the
forkserver, reparented to init once that exits) must not run on, past its
timeout and beside its own retry."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from echomq import SyncQueue
from integration.isolated_tasks import heartbeat, starts_a_worker

pytestmark = pytest.mark.timeout(90)

TESTS_DIR = Path(__file__).resolve().parents[1]

WORKER = """
import asyncio, sys
from echomq import Queue, Worker
from integration.isolated_tasks import heartbeat, starts_a_worker

asyncio.run(Worker(Queue(sys.argv[1], sys.argv[2]), [heartbeat], concurrency=1).run())
"""


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name, or None if the process is gone."""
    try:
        return (Path(f"/proc/{pid}/stat").read_text()).rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    """Running (a zombie has stopped running: it only waits to be reaped)."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def descendants(root: int) -> set[int]:
    """Live processes below ``root`` (children, their children, …), from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) and fields[0] != "Z":
            parents[int(entry.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def poll(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.05)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_process_job_and_the_forkserver_die_with_a_killed_worker(
    sq: SyncQueue, backend_url: str, tmp_path: Path, backend: Any
) -> None:
    if backend.kind != "valkey":
        pytest.skip("process behaviour, the same on every server: one kind is enough")
    beat = tmp_path / "beat.txt"
    sq.add_many([heartbeat.prepare(str(beat)).item])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS_DIR), *sys.path])}
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, sq.name, backend_url],
        env=env,
        cwd=TESTS_DIR,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    below: set[int] = set()
    try:
        poll(lambda: beat.exists() and "beat" in beat.read_text(), 30, "the job's heartbeat")
        job_pid = int(beat.read_text().split()[1])
        below = descendants(worker.pid)
        assert job_pid in below  # the job runs in a process of the worker's (forkserver's)
        assert len(below) >= 2  # the forkserver too
        worker.kill()  # SIGKILL: no cleanup runs in the worker
        worker.wait(10)
        poll(lambda: not alive(job_pid), 10, f"the job's process {job_pid} to die")
        poll(lambda: not any(alive(pid) for pid in below), 10, "the forkserver to exit")
        size = beat.stat().st_size
        time.sleep(0.3)  # 6 heartbeats' time: none is written
        assert beat.stat().st_size == size
    finally:
        if worker.poll() is None:
            worker.kill()
        worker.wait(10)
        for pid in below:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        if worker.stderr is not None:
            worker.stderr.close()


TASKS_MODULE = """
import os
from echomq import Queue

q = Queue(os.environ["NG_QUEUE"], os.environ["NG_URL"])


@q.task(isolation="process", max_attempts=1)
def double(n: int) -> int:
    return 2 * n
"""

NO_GUARD_SCRIPT = """
import asyncio
from echomq import Worker
from ngtasks import double, q

asyncio.run(Worker(q, [double]).run())  # no `if __name__ == "__main__":`
"""

GUARD = 'if __name__ == "__main__":'


def test_a_script_without_a_main_guard_refuses_a_worker_in_the_jobs_process(
    sq: SyncQueue, backend_url: str, tmp_path: Path, backend: Any
) -> None:
    if backend.kind != "valkey":
        pytest.skip("process behaviour, the same on every server: one kind is enough")
    (tmp_path / "ngtasks.py").write_text(TASKS_MODULE)
    (tmp_path / "noguard.py").write_text(NO_GUARD_SCRIPT)
    job_id = sq.add("ngtasks.double", {"args": [21]}, max_attempts=1)
    env = {**os.environ, "NG_QUEUE": sq.name, "NG_URL": backend_url, "PYTHONPATH": str(tmp_path)}
    script = subprocess.Popen(
        [sys.executable, "noguard.py"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # without the refusal the job's process runs a worker of its own, forever
        poll(lambda: (job := sq.get(job_id)) is not None and job.state == "dead", 30, "dead")
    finally:
        script.kill()
        _, stderr = script.communicate(timeout=10)
    job = sq.get(job_id)
    assert job is not None and job.error is not None
    assert job.error.startswith("NestedWorker: ") and GUARD in job.error
    refusals = [line for line in stderr.splitlines() if line.startswith("echomq: ")]
    assert len(refusals) == 1 and GUARD in refusals[0], stderr  # one line, from the job
    assert "Traceback" not in stderr


def test_a_worker_started_in_a_jobs_process_is_refused(
    sq: SyncQueue, backend_url: str, backend: Any
) -> None:
    if backend.kind != "valkey":
        pytest.skip("process behaviour, the same on every server: one kind is enough")
    job_id = sq.add_many([starts_a_worker.prepare(backend_url).item])[0]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS_DIR), *sys.path])}
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            WORKER.replace("heartbeat", "starts_a_worker"),
            sq.name,
            backend_url,
        ],
        env=env,
        cwd=TESTS_DIR,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        poll(
            lambda: (
                (job := sq.get(job_id)) is not None and job.attempts >= 1 and job.error is not None
            ),
            40,
            "a failed attempt",
        )
    finally:
        worker.kill()
        worker.wait(10)
    job = sq.get(job_id)
    assert job is not None and job.error is not None
    assert job.error.startswith("NestedWorker: ") and GUARD in job.error
