"""The README's "Getting started", run verbatim as a new user would.

The steps are read from README.md (the blocks after the
``<!-- getting-started: … -->`` markers, as ``.ci/run`` reads its set-up
commands), then run in a fresh directory: ``tasks.py`` written out, shell 1
(the worker) and shell 2 (adds and the look at the queue) in two ``bash``
processes, then the closing ``echomq server stop``. ``.venv`` in that
directory links to the test run's own environment, so ``source
.venv/bin/activate`` works as written. Everything runs on a private embedded
Valkey (ECHOMQ_HOME in a temporary directory), which the test stops.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.clitools import cli_env, wait_for
from echomq.embedded import EmbeddedServer

README = Path(__file__).resolve().parents[2] / "README.md"
MARKER = re.compile(r"<!-- getting-started: (?P<name>[^>]+?) -->\n```\w*\n(?P<body>.*?)\n```", re.S)
ID = re.compile(r"\bjob_[0-9a-z]{26}\b")
STEP_TIMEOUT = 60.0


def readme_steps(text: str) -> dict[str, str]:
    """The getting-started blocks of the README by marker name."""
    return {m["name"]: m["body"] + "\n" for m in MARKER.finditer(text)}


@pytest.fixture
def home() -> Iterator[Path]:
    """A private, short ECHOMQ_HOME; its embedded server is stopped after the test."""
    with tempfile.TemporaryDirectory(prefix="emq-gs-") as path:
        try:
            yield Path(path)
        finally:
            EmbeddedServer(path).stop()


def test_readme_has_the_steps() -> None:
    steps = readme_steps(README.read_text(encoding="utf-8"))
    assert set(steps) == {"tasks.py", "shell 1", "shell 2", "done"}
    assert "-q mail" in steps["shell 1"] and "ECHOMQ_QUEUE=mail" in steps["shell 2"]
    assert "redis://127.0.0.1:6379" not in README.read_text(encoding="utf-8")


def test_getting_started_verbatim(tmp_path: Path, home: Path) -> None:
    steps = readme_steps(README.read_text(encoding="utf-8"))
    (tmp_path / "tasks.py").write_text(steps["tasks.py"], encoding="utf-8")
    (tmp_path / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    env = cli_env({"ECHOMQ_HOME": str(home)})
    env.pop("VIRTUAL_ENV", None)
    worker_log = tmp_path / "shell1.log"
    with worker_log.open("w") as log:
        shell1 = subprocess.Popen(
            ["bash", "-e", "-c", steps["shell 1"]],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: the test's Ctrl-C reaches bash and echomq
        )
    try:
        wait_for(
            lambda: "worker on queue mail" in worker_log.read_text(),
            timeout=STEP_TIMEOUT,
            what="the worker of shell 1 to start",
        )
        shell2 = subprocess.run(
            ["bash", "-e", "-c", steps["shell 2"]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=STEP_TIMEOUT,
            check=False,
        )
        assert shell2.returncode == 0, (shell2.stdout, shell2.stderr)
        check_shell2(shell2.stdout)
        check_worker_log(worker_log.read_text())
        os.killpg(shell1.pid, signal.SIGINT)  # Ctrl-C in shell 1
        assert shell1.wait(timeout=STEP_TIMEOUT) in (0, -signal.SIGINT, 130)
    finally:
        if shell1.poll() is None:
            os.killpg(shell1.pid, signal.SIGKILL)
            shell1.wait()
    venv_bin = str(Path(sys.prefix) / "bin")
    done = subprocess.run(
        ["bash", "-e", "-c", steps["done"]],  # in shell 2, whose venv is active
        cwd=tmp_path,
        env={**env, "PATH": venv_bin + os.pathsep + env["PATH"]},
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "stopped the embedded Valkey" in done.stdout
    assert not EmbeddedServer(home).is_running()


def check_shell2(out: str) -> None:
    """What the user sees in shell 2: an id, the queue, its counts, the dead job."""
    first_id = out.splitlines()[0]
    assert ID.fullmatch(first_id), out
    queues_line = next(line for line in out.splitlines() if line.startswith("mail "))
    assert queues_line.split()[1:7] == ["0", "0", "0", "0", "1", "1"], queues_line
    assert re.search(r"^completed\s+1$", out, re.M) and re.search(r"^dead\s+1$", out, re.M)
    dead_rows = [line for line in out.splitlines() if "mailbox [/var/mail/13] not found" in line]
    assert dead_rows, out  # the dead list, error printed as written (not read as markup)
    dead_id = ID.search(dead_rows[0])
    assert dead_id is not None and dead_id.group() != first_id, dead_rows
    inspected = out[out.index("id        " + dead_id.group()) :]
    assert re.search(r"^state\s+dead\s*$", inspected, re.M), inspected
    assert re.search(r"^attempts\s+2 of 2\s*$", inspected, re.M), inspected
    assert "Traceback" in inspected and "OSError: mailbox [/var/mail/13] not found" in inspected


def check_worker_log(log: str) -> None:
    """What the user sees in shell 1: which attempt failed, when the next runs, then dead."""
    assert re.search(
        r"attempt 1 of 2 failed: OSError: mailbox \[/var/mail/13\] not found; "
        r"attempt 2 runs at \d\d:\d\d:\d\d \(in \d+\.\d s\)",
        log,
    ), log
    assert "is dead: attempt 2 of 2 failed: OSError" in log, log
