"""``echomq add`` and ``echomq inspect``, and the one-line errors every command shares."""

from __future__ import annotations

import json
from typing import Any

from cli.clitools import RunCli, one_line_error
from echomq import State, SyncQueue
from echomq.ids import is_id
from echomq.job import Job
from echomq.score import encode
from echomq.testing import drain_sync


def test_add_prints_the_id_of_a_job_with_every_option(cli: RunCli, sq: SyncQueue) -> None:
    proc = cli(
        "add",
        "send",
        "--data",
        '{"to": 42}',
        "--priority",
        "3",
        "--group",
        "acme",
        "--max-attempts",
        "5",
    )
    assert proc.returncode == 0, proc.stderr
    job_id = proc.stdout.strip()
    assert is_id(job_id)
    job = sq.get(job_id)
    assert job is not None
    assert (job.name, job.data, job.priority, job.group, job.max_attempts, job.state) == (
        "send",
        {"to": 42},
        3,
        "acme",
        5,
        State.WAITING,
    )


def test_add_delay_key_and_stdin(cli: RunCli, sq: SyncQueue) -> None:
    first = cli(
        "add", "import", "--data", "-", "--key", "k-1", "--delay", "60", stdin='{"rows": [1, 2]}'
    ).stdout.strip()
    again = cli("add", "import", "--data", "[]", "--key", "k-1").stdout.strip()
    assert first == again  # the idempotency key returns the live job's id
    job = sq.get(first)
    assert job is not None and job.state is State.DELAYED and job.data == {"rows": [1, 2]}


def test_inspect_shows_every_field_and_the_decoded_score(cli: RunCli, sq: SyncQueue) -> None:
    sq.add("warmup")  # so the job below gets counter 2
    job_id = sq.add("send", {"to": 7}, priority=2, group="acme", max_attempts=1)
    claimed = {j.id: j for j in sq.claim(2)}[job_id]
    sq.fail(claimed, "boom: mailbox full", "Traceback (most recent call last): ...")
    data = json.loads(cli("inspect", job_id, "--json").stdout)
    assert data["id"] == job_id and data["state"] == "dead"
    assert (data["attempts"], data["max_attempts"], data["group"]) == (1, 1, "acme")
    assert data["error"] == "boom: mailbox full" and data["traceback"].startswith("Traceback")
    assert data["score"] == encode(2, 2)
    assert data["score_decoded"] == {"tier": 2, "counter": 2, "hex": "0x2_00000002"}
    text = cli("inspect", job_id).stdout
    for fragment in (
        job_id,
        "dead",
        "acme",
        "1 of 1",
        "boom: mailbox full",
        "tier 2, counter 2",
        "000000000000000000010 000000000000000000000000000000",
    ):
        assert fragment in text, fragment


def test_inspect_shows_dependencies_and_the_schedule(cli: RunCli, sq: SyncQueue) -> None:
    parent = sq.add("parent")
    child = sq.add("child", depends_on=[parent])
    data = json.loads(cli("inspect", child, "--json").stdout)
    assert data["state"] == "blocked" and data["dependencies"] == [parent]
    assert f"depends on  {parent}" in cli("inspect", child).stdout
    assert data["dependents"] == {"blocked": 0, "blocked_ids": [], "readers": 0, "reader_ids": []}


def test_inspect_shows_dependents(cli: RunCli, sq: SyncQueue) -> None:
    parent = sq.add("parent")
    children = sorted(sq.add_many([{"name": "child", "depends_on": [parent]}] * 25))
    data = json.loads(cli("inspect", parent, "--json").stdout)
    shown = data["dependents"]["blocked_ids"]
    assert data["dependents"]["blocked"] == 25 and len(shown) == 20
    assert set(shown) <= set(children) and shown == sorted(shown)
    text = cli("inspect", parent).stdout
    assert "dependents  25 blocked: " in text and "(and 5 more)" in text
    # completed: they were released; they may still read its result until they finish
    [job] = sq.claim(1)
    sq.complete(job, "r")
    data = json.loads(cli("inspect", parent, "--json").stdout)["dependents"]
    assert (data["blocked"], data["readers"]) == (0, 25)
    text = cli("inspect", parent).stdout
    assert "read by" in text and "25 dependents: " in text and "blocked" not in text


def test_user_errors_are_one_line_with_exit_1(cli: RunCli) -> None:
    assert "--data is not valid JSON" in one_line_error(cli("add", "x", "--data", "{bad"))
    line = one_line_error(cli("inspect", "job_01m8vfye84ec3a377q2197v469"))
    assert "no job job_01m8vfye84ec3a377q2197v469" in line
    assert "job_" in one_line_error(cli("inspect", "nope"))
    assert "2097151" in one_line_error(cli("add", "x", "--priority", "2097152"))
    assert "group" in one_line_error(cli("add", "x", "--group", "a b"))


def test_unreachable_server_is_one_line_with_exit_1(cli: RunCli) -> None:
    for args in (("stats",), ("add", "x")):
        line = one_line_error(cli(*args, url="redis://127.0.0.1:1/0"))
        assert "cannot reach the server" in line and "127.0.0.1:1" in line


def _parse_row(row: Any) -> None:
    raise ValueError(f"row {row!r} has no address")


def _import_rows(job: Job) -> None:  # a sync handler: the worker's thread pool runs it
    _parse_row(job.data)


def test_inspect_shows_the_handlers_frames_first(cli: RunCli, sq: SyncQueue) -> None:
    job_id = sq.add("import", {"id": 3}, max_attempts=1)
    drain_sync(sq, {"import": _import_rows})
    text = cli("inspect", job_id).stdout
    shown = text[text.index("traceback") :]
    frames = [line.strip() for line in shown.splitlines() if line.strip().startswith("File ")]
    assert len(frames) == 2, shown  # the handler, then the function it called
    assert frames[0].endswith("in _import_rows") and frames[1].endswith("in _parse_row")
    assert "frames of the worker running the handler left out" in shown
    assert "echomq/worker" not in shown and "ValueError: row" in shown
    full = cli("inspect", job_id, "--full-traceback").stdout
    full_frames = [ln.strip() for ln in full.splitlines() if ln.strip().startswith("File ")]
    assert len(full_frames) > 2 and "echomq/worker/executor.py" in full_frames[0]
    assert full_frames[-2:] == frames
    stored = json.loads(cli("inspect", job_id, "--json").stdout)["traceback"]
    assert "echomq/worker/executor.py" in stored  # JSON keeps it whole


def test_add_with_a_dedupe_mode(cli: RunCli, sq: SyncQueue) -> None:
    args = ("add", "reindex", "--key", "shop-7", "--dedupe", "debounce", "--window", "60")
    first = cli(*args, "--data", '{"v": 1}').stdout.strip()
    again = cli(*args, "--data", '{"v": 2}', "--max-wait", "120").stdout.strip()
    assert first == again
    job = sq.get(first)
    assert job is not None and job.state is State.DELAYED and job.data == {"v": 2}


def test_add_dedupe_errors_are_one_line(cli: RunCli) -> None:
    proc = cli("add", "j", "--dedupe", "throttle")
    assert proc.returncode == 1 and "need --key" in one_line_error(proc)
    proc = cli("add", "j", "--key", "k", "--dedupe", "debounce", "--window", "5", "--max-wait", "1")
    assert proc.returncode == 1 and "max_wait >= window" in one_line_error(proc)
