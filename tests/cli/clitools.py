"""Helpers of the CLI tests: run the real command line, wait, check one-line errors."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import pytest

CLI = [sys.executable, "-m", "echomq.cli"]
TIMEOUT = 60.0


class RunCli(Protocol):
    def __call__(
        self,
        *args: str,
        queue: bool = True,
        url: str | None = None,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]: ...


def cli_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test process's environment without ECHOMQ_URL/ECHOMQ_QUEUE, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in ("ECHOMQ_URL", "ECHOMQ_QUEUE")}
    env.pop("COLUMNS", None)
    env.update(extra or {})
    return env


def queue_args(args: Sequence[str], url: str, queue: str) -> list[str]:
    """Put ``--url`` and ``--queue`` before a ``--`` (if any), else at the end."""
    extra = ["--url", url, "--queue", queue]
    if "--" in args:
        i = list(args).index("--")
        return [*args[:i], *extra, *args[i:]]
    return [*args, *extra]


def wait_for(condition: Callable[[], bool], timeout: float = 10.0, what: str = "") -> None:
    """Poll ``condition`` every 20 ms until it holds; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what or condition}")
        time.sleep(0.02)


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    """Assert exit 1 with a single ``Error: …`` line and no traceback; return that line."""
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("Error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]
