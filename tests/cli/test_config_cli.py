"""``echomq config``: a queue's settings on the server."""

from __future__ import annotations

import json

from cli.clitools import RunCli, one_line_error
from echomq import Backoff, State, SyncQueue


def test_config_shows_defaults_then_stores_and_removes(cli: RunCli, sq: SyncQueue) -> None:
    data = json.loads(cli("config", "--json").stdout)
    assert data["stored"] == {}
    assert data["effective"]["keep_completed"] == 1000
    assert data["effective"]["event_stream_length"] == 10_000
    proc = cli(
        "config",
        "--set",
        "keep_completed=3",
        "--set",
        "backoff=5,2,600",
        "--set",
        "rate=100/1",
        "--set",
        "keep_dead_age=60",
    )
    assert proc.returncode == 0, proc.stderr
    assert "stored" in proc.stdout and "not enforced" not in proc.stdout
    assert sq.settings() == {
        "keep_completed": 3,
        "keep_dead_age": 60.0,
        "backoff": Backoff(base=5.0, factor=2.0, cap=600.0),
        "rate": (100, 1.0),
    }
    # what the CLI stored is what every client of the queue obeys
    sq.add_many([{"name": "j"} for _ in range(5)])
    for job in sq.claim(5):
        sq.complete(job)
    assert len(sq.jobs(State.COMPLETED)) == 3
    data = json.loads(cli("config", "--set", "keep_completed=none", "--json").stdout)
    assert "keep_completed" not in data["stored"]
    assert data["effective"]["keep_completed"] == 1000
    assert data["stored"]["rate"] == [100, 1.0]


def test_config_takes_the_queue_as_an_argument(cli: RunCli, sq: SyncQueue) -> None:
    assert sq.url is not None
    proc = cli("config", sq.name, "--set", "max_attempts=4", "--url", sq.url, queue=False)
    assert proc.returncode == 0, proc.stderr
    assert sq.settings() == {"max_attempts": 4}


def test_config_refuses_bad_settings_in_one_line_and_writes_nothing(
    cli: RunCli, sq: SyncQueue
) -> None:
    sq.configure(keep_dead=7)
    for bad, says in (
        ("keep_completed=-1", "keep_completed -1 is out of range"),
        ("keep_completed=many", "expected an integer"),
        ("bogus=1", "NAME one of"),
        ("rate=5", "must look like MAX/WINDOW"),
        ("rate=1/0.000000001", "rate per_seconds 1e-09 is out of range"),
        ("backoff=1,0.5", "backoff factor 0.5 is out of range"),
        ("keep_completed", "NAME=VALUE"),
    ):
        line = one_line_error(cli("config", "--set", "max_stalls=3", "--set", bad))
        assert says in line, line
    assert sq.settings() == {"keep_dead": 7}


def test_config_and_lane_take_one_rate_format(cli: RunCli, sq: SyncQueue) -> None:
    for text, rate in (("5/200ms", (5, 0.2)), ("100/1s", (100, 1.0)), ("3/2.5", (3, 2.5))):
        assert cli("config", "--set", f"rate={text}").returncode == 0
        assert cli("lane", "acme", "--rate", text).returncode == 0
        (lane,) = [x for x in sq.lanes() if x.group == "acme"]
        assert sq.settings()["rate"] == lane.rate == rate
    shown = cli("config").stdout
    assert "3/2.5s" in shown, shown
    for command in (("config", "--set", "rate=0/1s"), ("lane", "acme", "--rate", "0/1s")):
        assert "rate max 0 is out of range; allowed integers 1 … 100000" in one_line_error(
            cli(*command)
        )
