"""``echomq add TASK --args … --kwargs …``: a task's call from the command line."""

from __future__ import annotations

import pytest

from cli.clitools import RunCli, one_line_error
from echomq import State, SyncQueue
from echomq.testing import drain_sync


def test_args_and_kwargs_make_the_call_a_task_runs_with(cli: RunCli, sq: SyncQueue) -> None:
    @sq.task(name="send_email")
    def send_email(to: str, subject: str, *, urgent: bool = False) -> str:
        return f"{to}|{subject}|{urgent}"

    added = cli("add", "send_email", "--args", '["ann@example.com", "hi"]', "--kwargs", "-",
                stdin='{"urgent": true}')  # fmt: skip
    assert added.returncode == 0, added.stderr
    job_id = added.stdout.strip()
    only_args = cli("add", "send_email", "--args", '["bob@example.com", "yo"]').stdout.strip()
    job = sq.get(job_id)
    assert job is not None
    assert job.data == {"args": ["ann@example.com", "hi"], "kwargs": {"urgent": True}}
    drain_sync(sq, [send_email])
    done = {i: sq.get(i) for i in (job_id, only_args)}
    assert [(j.state, j.result) for j in done.values() if j is not None] == [
        (State.COMPLETED, "ann@example.com|hi|True"),
        (State.COMPLETED, "bob@example.com|yo|False"),
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--data", "{}", "--args", "[1]"], "give --data, or --args/--kwargs"),
        (["--args", '{"to": 1}'], "--args must be a JSON array"),
        (["--kwargs", "[1]"], "--kwargs must be a JSON object"),
        (["--args", "[1"], "--args is not valid JSON"),
        (["--args", "-", "--kwargs", "-"], "only one of --args and --kwargs can read stdin"),
    ],
    ids=["with-data", "args-object", "kwargs-array", "bad-json", "two-stdins"],
)
def test_a_bad_task_call_is_one_line_and_adds_nothing(
    cli: RunCli, sq: SyncQueue, argv: list[str], message: str
) -> None:
    assert message in one_line_error(cli("add", "send_email", *argv, stdin="[]"))
    assert sq.stats().totals.get("added", 0) == 0
