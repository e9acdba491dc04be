"""``echomq logs JOB`` and ``echomq workers``: escaped, one-line errors."""

from __future__ import annotations

import json

from cli.clitools import RunCli, one_line_error
from echomq import SyncQueue
from echomq.joblogs import JobLog
from echomq.registry import info_text


def _logged_job(sq: SyncQueue, *messages: str) -> str:
    """A job completed with these log lines (as a worker's heartbeat sends them)."""
    sq.add("j")
    [job] = sq.claim(1, worker="w1")
    job._log = JobLog(job.attempts)
    for message in messages:
        job.log(message, level="WARNING")
    sq.complete(job, None)
    return job.id


def test_logs_prints_each_line_escaped(cli: RunCli, sq: SyncQueue) -> None:
    job_id = _logged_job(
        sq, "charging \x1b[31mred\x1b[0m", "Traceback:\n  line \x1b]0;x\x07\n2099 ERROR forged"
    )
    proc = cli("logs", job_id)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "\x1b" not in text and "\x07" not in text
    lines = text.splitlines()
    assert "#1" in lines[0] and "WARNING" in lines[0]
    assert lines[0].endswith("charging \\x1b[31mred\\x1b[0m")
    assert lines[1].endswith("Traceback:")
    # the continuation lines are indented under the first: none reads as a line of its own
    assert lines[2].startswith(" ") and lines[3].startswith(" ")
    assert lines[3].strip() == "2099 ERROR forged"
    got = json.loads(cli("logs", job_id, "--json").stdout)
    assert got["lines"][0]["message"] == "charging \x1b[31mred\x1b[0m"
    quiet = sq.add("quiet")
    assert "logged nothing" in cli("logs", quiet).stdout
    inspected = cli("inspect", job_id).stdout  # the worker of its latest attempt, its run time
    assert "w1" in inspected and "run time" in inspected
    assert json.loads(cli("inspect", job_id, "--json").stdout)["worker"] == "w1"


def test_logs_of_no_such_job_is_one_line(cli: RunCli, sq: SyncQueue) -> None:
    proc = cli("logs", "job_nope")
    assert proc.returncode != 0
    assert "no job" in one_line_error(proc)


def test_workers_lists_them_escaped(cli: RunCli, sq: SyncQueue) -> None:
    assert "no worker runs" in cli("workers").stdout
    sq.worker_beat("w1", 30.0, info_text("host\x1b[2J", 42, [sq.name], 4, ["job_a", "job_b"]))
    proc = cli("workers")
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout
    assert "w1" in proc.stdout and "host\\x1b[2J:42" in proc.stdout and "2/4" in proc.stdout
    [worker] = json.loads(cli("workers", "--json").stdout)
    assert worker["id"] == "w1" and worker["running"] == ["job_a", "job_b"]


def test_metrics_shows_counts_a_sparkline_and_percentiles(cli: RunCli, sq: SyncQueue) -> None:
    assert "metrics are off" in cli("metrics").stdout
    assert cli("config", sq.name, "--set", "metrics=1").returncode == 0
    sq.add_many([{"name": "send\x1b[2J"} for _ in range(3)] + [{"name": "bill"}])
    jobs = sq.claim(4)
    sq.complete_many([(job, None) for job in jobs if job.name != "bill"])
    sq.fail(next(job for job in jobs if job.name == "bill"), "no", retry=False)
    sq.cancel(sq.add("bill"))  # cancelled before it ran: its own column
    proc = cli("metrics")
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout
    [send] = [line for line in proc.stdout.splitlines() if line.startswith("send\\x1b[2J")]
    assert send.split()[1:5] == ["3", "0", "0", "0"] and "█" in send and "≤" in send
    [bill] = [line for line in proc.stdout.splitlines() if line.startswith("bill")]
    assert bill.split()[1:5] == ["0", "0", "1", "1"]
    assert "CANCELLED" in proc.stdout
    points = json.loads(cli("metrics", "--name", "bill", "--json").stdout)
    got = [(p["name"], p["dead"], p["cancelled"], p["run"]["count"]) for p in points]
    assert sum(p[1] for p in got) == 1 and sum(p[2] for p in got) == 1  # (a minute may turn)
    assert sum(p[3] for p in got) == 1
    bad = cli("metrics", "--minutes", "0")  # click's usage error: exit 2, no traceback
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "1<=x<=4320" in bad.stderr
