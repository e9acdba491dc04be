"""``echomq events``: the queue's events, retained or followed, text or JSON lines."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import threading

import pytest

from cli.clitools import CLI, RunCli, cli_env, one_line_error, queue_args, wait_for
from echomq import SyncQueue


def test_events_print_the_retained_events_as_json_lines(cli: RunCli, sq: SyncQueue) -> None:
    job_id = sq.add("a", group="acme")
    [job] = sq.claim(1)
    sq.fail(job, "bad \x1b[31mred\x1b[0m [b]x[/b]", retry_delay=3600)
    rows = [json.loads(line) for line in cli("events", "--json").stdout.splitlines()]
    assert [(r["kind"], r["job_id"], r["group"]) for r in rows] == [
        ("added", job_id, "acme"),
        ("claimed", job_id, "acme"),
        ("retrying", job_id, "acme"),
    ]
    assert rows[1]["attempt"] == 1 and rows[2]["error"].startswith("bad ")
    after = cli("events", "--json", "--after", rows[0]["id"]).stdout.splitlines()
    assert [json.loads(line)["kind"] for line in after] == ["claimed", "retrying"]
    text = cli("events").stdout
    assert "retrying" in text and "acme" in text and "attempt=1" in text
    assert "\x1b" not in text and "\\x1b[31m" in text  # escaped, never sent to the terminal


def _ignore_sigint() -> None:
    """In the child before exec: start it as ``nohup`` or ``cmd &`` would, SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize(
    ("stop", "sigint_ignored"),
    [(signal.SIGINT, False), (signal.SIGINT, True), (signal.SIGTERM, True)],
    ids=["sigint", "sigint-when-started-ignored", "sigterm"],
)
def test_events_follow_prints_new_events_until_interrupted(
    backend_url: str, queue_name: str, sq: SyncQueue, stop: signal.Signals, sigint_ignored: bool
) -> None:
    before = sq.add("before")  # not printed: --follow alone starts from now
    argv = [*CLI, *queue_args(["events", "--follow", "--json"], backend_url, queue_name)]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        text=True,
        env=cli_env(),
        preexec_fn=_ignore_sigint if sigint_ignored else None,
    )
    try:
        assert proc.stdout is not None
        lines: queue.Queue[str] = queue.Queue()
        out = proc.stdout

        def pump() -> None:
            for text in out:
                lines.put(text)

        threading.Thread(target=pump, daemon=True).start()
        added: list[str] = []

        def printed() -> bool:
            # the follower starts in its own time: add until it prints one
            added.append(sq.add("new"))
            return not lines.empty()

        wait_for(printed, what="the follower to print an event")
        first = json.loads(lines.get())
        assert first["kind"] == "added" and first["job_id"] in added
        assert first["job_id"] != before
        proc.send_signal(stop)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:  # never leave it running (nor the suite hanging)
            proc.kill()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_bad_event_id_is_a_one_line_error(cli: RunCli) -> None:
    line = one_line_error(cli("events", "--after", "job_x"))
    assert "event id" in line and "job_x" in line


def test_a_deduplicated_event_names_its_outcome(cli: RunCli, sq: SyncQueue) -> None:
    first = sq.add("a", key="k")
    assert sq.add("a", key="k") == first
    rows = [json.loads(line) for line in cli("events", "--json").stdout.splitlines()]
    assert [(r["kind"], r["job_id"], r.get("outcome")) for r in rows] == [
        ("added", first, None),
        ("deduplicated", first, "dropped"),
    ]
    assert "outcome=dropped" in cli("events").stdout
