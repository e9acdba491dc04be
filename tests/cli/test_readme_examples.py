"""The README's Python examples, run as scripts in the order a reader meets them.

Every ```python block of README.md carries a marker: ``getting-started``
and ``web-handler`` blocks have tests of their own
(test_getting_started.py, test_readme_web_handler.py); the ``example``
blocks are saved under their marker's file name and run here one after
the other with ``python NAME`` against one private server, as a reader
would run them in sequence.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from cli.clitools import cli_env
from cli.test_getting_started import README
from echomq import State, SyncQueue
from servers import ServerFactory

pytestmark = pytest.mark.timeout(120)

BLOCK = re.compile(
    r"(?:<!-- (?P<marker>[a-z-]+): (?P<name>[^>]+?) -->\n)?```python\n(?P<body>.*?)\n```", re.S
)
EXAMPLE_TIMEOUT = 30.0


def python_blocks() -> list[re.Match[str]]:
    return list(BLOCK.finditer(README.read_text(encoding="utf-8")))


def test_every_python_block_of_the_readme_is_run_by_a_test() -> None:
    blocks = python_blocks()
    unmarked = [m["body"][:60] for m in blocks if m["marker"] is None]
    assert not unmarked, f"README python blocks no test runs: {unmarked}"
    assert {m["marker"] for m in blocks} == {"getting-started", "web-handler", "example"}


def test_the_examples_run_in_sequence(tmp_path: Path, server_factory: ServerFactory) -> None:
    server = server_factory("valkey")
    env = cli_env({"ECHOMQ_URL": server.url})
    outputs: dict[str, str] = {}
    examples = [block for block in python_blocks() if block["marker"] == "example"]
    for block in examples:
        (tmp_path / block["name"]).write_text(block["body"] + "\n", encoding="utf-8")
    # in the README's order, then the tasks example once more (a reader runs it
    # again): its worker must leave the other examples' jobs alone
    for name in [*(block["name"] for block in examples), "use_tasks.py"]:
        done = subprocess.run(
            [sys.executable, name],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=EXAMPLE_TIMEOUT,
            check=False,
        )
        assert done.returncode == 0, (name, done.stdout, done.stderr)
        outputs[name] = done.stdout
    assert outputs["use_tasks.py"].strip() == "{'sent_to': 42}"
    assert outputs["outbox.py"].strip() == "1 row(s) relayed"  # docs/outbox.md
    with SyncQueue("mail", server.url) as mail:
        waiting = mail.jobs(State.WAITING, group="acme", count=1000)
        # the blocking example's 90 unclaimed jobs: the tasks example's worker
        # (on its own queue) never claimed, nor released, one of them
        assert len([job for job in waiting if job.name == "send"]) == 90
        assert all(job.attempts == 0 and job.stalls == 0 for job in waiting)
    with SyncQueue("welcome", server.url) as welcome:
        assert [job.name for job in welcome.jobs(State.COMPLETED)] == ["welcome"] * 2
