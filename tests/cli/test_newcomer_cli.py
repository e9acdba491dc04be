"""The newcomer's path through the real CLI (issue 19), and escaping of server text (issue 14).

``queues``; a queue that never held a job; ``inspect``/``remove`` finding a
job's queue from its id; ``pause``/``resume``; ``dead list`` never cutting
ids; every string from the server escaped (markup, control characters);
``stats --watch`` rates; the README's shell completion line.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cli.clitools import CLI, RunCli, cli_env, one_line_error, queue_args, wait_for
from echomq import State, SyncQueue
from echomq.embedded import EmbeddedServer

README = Path(__file__).resolve().parents[2] / "README.md"
ID = re.compile(r"\bjob_[0-9a-z]{26}\b")


def run(cli: RunCli, url: str, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    """A command with --url but no --queue (the queue comes from args or the default)."""
    return cli(*args, "--url", url, queue=False, **kw)


# -- echomq queues ------------------------------------------------------------------


def test_queues_lists_counts_lanes_paused_and_last_activity(
    cli: RunCli, sq: SyncQueue, backend_url: str, queue_name: str
) -> None:
    before = json.loads(run(cli, backend_url, "queues", "--json").stdout)
    assert queue_name not in {row["queue"] for row in before["queues"]}  # never held a job
    sq.add_many([{"name": "a", "group": "acme"}, {"name": "b", "group": "globex"}])
    sq.add("later", delay=60)
    sq.claim(1)
    sq.pause()
    proc = run(cli, backend_url, "queues", "--json")
    assert proc.returncode == 0, proc.stderr
    row = next(r for r in json.loads(proc.stdout)["queues"] if r["queue"] == queue_name)
    assert row["counts"] == {
        "waiting": 1,
        "delayed": 1,
        "failed": 0,
        "active": 1,
        "completed": 0,
        "dead": 0,
        "blocked": 0,
        "cancelled": 0,
    }
    assert row["lanes"] == 1 and row["paused"] is True
    assert row["last_activity"] is not None  # the adds
    text = run(cli, backend_url, "queues").stdout
    line = next(line for line in text.splitlines() if line.split()[:1] == [queue_name])
    assert line.split()[1:9] == ["1", "1", "0", "1", "0", "0", "1", "paused"], line
    assert "(running)" in line  # a job is active


# -- a queue that has never held a job ------------------------------------------------


def test_a_queue_that_never_held_a_job_says_so(
    cli: RunCli, sq: SyncQueue, backend_url: str, queue_name: str
) -> None:
    sq.add("x")
    never = queue_name + "-never"
    for args in (("stats",), ("lanes",), ("dead", "list")):
        proc = run(cli, backend_url, *args, "-q", never)
        assert proc.returncode == 0, proc.stderr
        assert f"note: queue '{never}' has never held a job" in proc.stderr, (args, proc.stderr)
    used = run(cli, backend_url, "stats", "-q", queue_name)
    assert used.returncode == 0 and "never held" not in used.stderr
    line = one_line_error(run(cli, backend_url, "inspect", sq.add("y"), "-q", never))
    assert f"queue '{never}' has never held a job" in line


# -- finding a job's queue from its id ------------------------------------------------


def test_inspect_and_remove_find_the_queue_from_the_id(
    cli: RunCli, sq: SyncQueue, backend_url: str, queue_name: str
) -> None:
    job_id = sq.add("send", {"to": 1})
    proc = run(cli, backend_url, "inspect", job_id)  # no -q: the default queue is empty
    assert proc.returncode == 0, proc.stderr
    assert re.search(rf"^queue\s+{re.escape(queue_name)}\s*$", proc.stdout, re.M), proc.stdout
    data = json.loads(run(cli, backend_url, "inspect", job_id, "--json").stdout)
    assert data["queue"] == queue_name and data["id"] == job_id
    # a queue named by ECHOMQ_QUEUE is the only one looked at
    named = run(cli, backend_url, "inspect", job_id, env={"ECHOMQ_QUEUE": queue_name + "-x"})
    assert f"no job {job_id} in queue '{queue_name}-x'" in one_line_error(named)
    removed = run(cli, backend_url, "remove", job_id)
    assert removed.returncode == 0, removed.stderr
    assert f"removed job {job_id} (send, waiting) from queue {queue_name}" in removed.stdout
    assert sq.get(job_id) is None
    gone = one_line_error(run(cli, backend_url, "inspect", job_id))
    assert f"no job {job_id} in any of the" in gone and "queues on this server" in gone


def test_remove_in_a_named_queue(cli: RunCli, sq: SyncQueue) -> None:
    job_id = sq.add("send", delay=60)
    assert cli("remove", job_id).returncode == 0
    assert sq.get(job_id) is None and sq.stats().counts["delayed"] == 0
    assert f"no job {job_id} in queue" in one_line_error(cli("remove", job_id))
    one_line_error(cli("remove", "not-an-id"))


# -- pause and resume ------------------------------------------------------------------


def test_pause_and_resume_the_whole_queue(cli: RunCli, sq: SyncQueue) -> None:
    job_id = sq.add("x")
    proc = cli("pause")
    assert proc.returncode == 0 and "paused queue" in proc.stdout, proc.stderr
    assert sq.stats().paused and sq.claim(1) == []
    assert "· paused ·" in cli("stats").stdout
    proc = cli("resume")
    assert proc.returncode == 0 and "resumed queue" in proc.stdout, proc.stderr
    assert [job.id for job in sq.claim(1)] == [job_id]


# -- dead list: ids whole, other columns give way ----------------------------------------


def bury(sq: SyncQueue, name: str, error: str) -> str:
    job_id = sq.add(name, max_attempts=1, group="a-rather-long-group-name")
    (job,) = sq.claim(1)
    assert sq.fail(job, error) is State.DEAD
    return job_id


def test_dead_list_never_cuts_ids(cli: RunCli, sq: SyncQueue) -> None:
    ids = {bury(sq, "n" * 60 + str(i), "E" * 300) for i in range(3)}
    for columns in ("40", "80", "120", None):  # None: piped, COLUMNS unset
        proc = cli("dead", "list", env={"COLUMNS": columns} if columns else None)
        assert proc.returncode == 0, proc.stderr
        assert set(ID.findall(proc.stdout)) == ids, (columns, proc.stdout)
        if columns == "80":
            table = proc.stdout.splitlines()[1:]  # under the title line
            assert max(len(line) for line in table) <= 80, proc.stdout
            assert "EEE" in proc.stdout  # the error still shows, shortened


# -- escaping every string from the server (issue 14, row 5) ---------------------------

MARKUP_ERROR = "OSError: [/srv/in.csv] No such file or directory"
LINK_NAME = "[link=https://evil.example]click me[/link]"
ESC_ERROR = "boom \x1b[31mRED\x1b[0m \x1b]8;;https://evil.example\x07x"


def test_server_text_is_printed_as_written(cli: RunCli, sq: SyncQueue) -> None:
    markup_id = bury(sq, "send", MARKUP_ERROR)
    link_id = bury(sq, LINK_NAME, "plain")
    esc_id = bury(sq, "esc", ESC_ERROR)
    listed = cli("dead", "list")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    out = listed.stdout
    assert "OSError: [/srv/in.csv]" in out  # not read as a markup tag (it crashed)
    assert "[link=https://evil.ex" in out  # the name, not a hyperlink
    assert "\x1b" not in out and "\\x1b[31mRED" in out  # ESC made visible
    for job_id, shown in (
        (markup_id, MARKUP_ERROR),
        (link_id, LINK_NAME),
        (esc_id, "boom \\x1b[31mRED\\x1b[0m \\x1b]8;;https://evil.example\\x07x"),
    ):
        proc = cli("inspect", job_id)
        assert proc.returncode == 0, proc.stderr
        assert shown in proc.stdout and "\x1b" not in proc.stdout, proc.stdout


def test_escape_text_leaves_plain_text_alone() -> None:
    from echomq.cli.common import escape_text

    assert escape_text("send [1] to ü") == "send [1] to ü"
    assert escape_text("a\tb\nc") == "a\tb\nc"
    assert escape_text("\x9b2J\u202e") == "\\x9b2J\\u202e"
    assert escape_text("[b]x", markup=False) == "[b]x"


# -- stats --watch shows rates -------------------------------------------------------------


def test_stats_watch_shows_rates(backend_url: str, queue_name: str, sq: SyncQueue) -> None:
    sq.add("first")
    argv = [
        *CLI,
        *queue_args(["stats", "--watch", "--json", "--interval", "0.3"], backend_url, queue_name),
    ]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=cli_env()) as proc:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline())["rates"] is None  # nothing to compare yet
        sq.add_many([{"name": "x"}] * 50)
        deadline = time.monotonic() + 10
        rates: dict[str, float] = {}
        while not rates.get("added") and time.monotonic() < deadline:
            rates = json.loads(proc.stdout.readline())["rates"]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=5) == 0
    assert rates["added"] > 0 and rates["completed"] == 0, rates


def test_stats_watch_text_prints_a_rates_line(
    backend_url: str, queue_name: str, sq: SyncQueue
) -> None:
    sq.add("first")
    argv = [*CLI, *queue_args(["stats", "--watch", "--interval", "0.3"], backend_url, queue_name)]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=cli_env()) as proc:
        assert proc.stdout is not None
        seen: list[str] = []
        while not any(line.startswith("rates: ") and "added/s" in line for line in seen):
            seen.append(proc.stdout.readline())
            assert len(seen) < 200, seen
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=5) == 0


# -- shell completion, as the README documents it ---------------------------------------------


def test_readme_shell_completion_line_defines_the_completion() -> None:
    text = README.read_text(encoding="utf-8")
    block = re.search(r"<!-- shell-completion -->\n```bash\n(.*?)\n```", text, re.S)
    assert block is not None
    bin_dir = str(Path(sys.executable).parent)
    env = cli_env({"PATH": bin_dir + ":" + cli_env()["PATH"]})
    proc = subprocess.run(
        ["bash", "-c", block.group(1) + "\ncomplete -p echomq"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "echomq" in proc.stdout and "complete" in proc.stdout


def test_help_lists_the_newcomer_commands(cli: RunCli) -> None:
    out = cli("--help", queue=False).stdout
    for command in ("queues", "remove", "pause", "resume", "inspect", "dead"):
        assert re.search(rf"^\s+{command}\s", out, re.M), command
    words = " ".join(out.split())
    assert "ECHOMQ_QUEUE" in words and "echomq server stop" in words


# -- a worker on the embedded server starts it again -------------------------------------------


def test_a_worker_starts_the_stopped_embedded_server_again(tmp_path: Path) -> None:
    (tmp_path / "tasks.py").write_text("handlers = {'send': lambda job: job.data}\n")
    log_path = tmp_path / "worker.log"
    with tempfile.TemporaryDirectory(prefix="emq-") as home:
        env = cli_env({"ECHOMQ_HOME": home})
        server = EmbeddedServer(home)
        with log_path.open("w") as log:
            worker = subprocess.Popen(
                [*CLI, "worker", "tasks:handlers", "-q", "restarts"],
                cwd=tmp_path,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_for(lambda: "worker on queue restarts" in log_path.read_text(), timeout=30)
            stop = subprocess.run(
                [*CLI, "server", "stop"], env=env, capture_output=True, text=True, timeout=60
            )
            assert "stopped the embedded Valkey" in stop.stdout, stop.stderr
            wait_for(
                lambda: "started it again" in log_path.read_text(),
                timeout=30,
                what="the worker to start the server again",
            )
            assert server.is_running()
            added = subprocess.run(
                [*CLI, "add", "send", "-q", "restarts", "--data", '{"n": 1}'],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            job_id = added.stdout.strip()
            with SyncQueue("restarts", server.url) as q:
                wait_for(
                    lambda: getattr(q.get(job_id), "state", None) is State.COMPLETED,
                    timeout=30,
                    what="the job to complete on the restarted server",
                )
        finally:
            worker.send_signal(signal.SIGINT)
            try:
                worker.wait(timeout=30)
            finally:
                if worker.poll() is None:
                    worker.kill()
                server.stop()


def test_json_output_keeps_the_data_and_escapes_terminal_controls(
    cli: RunCli, sq: SyncQueue
) -> None:
    error = "csi \x9b2J bidi \u202e esc \x1b[0m"
    job_id = bury(sq, "send", error)
    proc = cli("inspect", job_id, "--json")
    assert proc.returncode == 0, proc.stderr
    assert not set(proc.stdout) & {"\x9b", "\u202e", "\x1b"}, proc.stdout
    assert json.loads(proc.stdout)["error"] == error  # the same data, JSON-escaped


# -- a short command loads no more than it needs -------------------------------------------


def test_stats_imports_neither_rich_nor_the_web_stack_nor_the_worker(
    cli: RunCli, sq: SyncQueue
) -> None:
    sq.add("x")
    proc = cli("stats", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert proc.returncode == 0, proc.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
    assert "echomq.cli.queues" in imported  # the import log is there
    heavy = {m for m in imported if m.split(".")[0] in ("rich", "starlette", "uvicorn")}
    heavy |= {m for m in imported if m.startswith(("echomq.worker", "echomq.web"))}
    assert not heavy, sorted(heavy)
