"""Worker subprocesses for the fault cases, and a bounded wait.

Why subprocesses: ``kill -9`` and SIGSTOP must hit a real worker process,
exactly as an operator's or the kernel's would, never a thread of the test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

TESTS_DIR = Path(__file__).resolve().parent.parent
T = TypeVar("T")


def wait_for(check: Callable[[], T], timeout: float, what: str, interval: float = 0.05) -> T:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` at timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class Workers:
    """``echomq worker faults.handlers:make_worker`` processes on one queue."""

    def __init__(
        self,
        url: str,
        queue: str,
        log_dir: Path,
        *,
        side_url: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.url = url
        self.queue = queue
        self.log_dir = log_dir
        self.env = {
            **os.environ,
            "FAULT_URL": url,
            "FAULT_SIDE_URL": side_url or url,
            # the tests' helpers, then the code under test (a worktree's src/ given
            # in PYTHONPATH must win over the venv's editable install)
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH", "")) if p
            ),
            **(env or {}),
        }
        self.procs: list[subprocess.Popen[bytes]] = []

    def spawn(self) -> subprocess.Popen[bytes]:
        log = (self.log_dir / f"worker-{len(self.procs)}.log").open("wb")
        with log:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "echomq.cli",
                    "worker",
                    "faults.handlers:make_worker",
                    "--url",
                    self.url,
                    "--queue",
                    self.queue,
                    "--log-level",
                    "warning",
                ],
                cwd=TESTS_DIR,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.procs.append(proc)
        return proc

    def wait_ready(self, count: int, timeout: float = 20.0) -> None:
        """Wait until ``count`` workers got past the CLI's start-up server check."""
        import redis

        from faults.invariants import side_key

        with redis.Redis.from_url(self.env["FAULT_SIDE_URL"]) as side:
            key = side_key(self.queue) + ":ready"
            wait_for(lambda: side.llen(key) >= count, timeout, f"{count} workers ready")

    def alive(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.procs if p.poll() is None]

    def kill9(self, proc: subprocess.Popen[bytes]) -> None:
        proc.kill()
        proc.wait(10)

    def signal(self, proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        os.kill(proc.pid, sig)

    def stop_all(self, timeout: float = 15.0) -> None:
        """SIGCONT + SIGTERM every live worker, SIGKILL what is left after ``timeout``."""
        for proc in self.alive():
            os.kill(proc.pid, signal.SIGCONT)
            proc.terminate()
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)

    def logs(self) -> str:
        """Every worker's output, for a failure message."""
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.log_dir.glob("worker-*.log"))
        )
