"""``echomq stats``, ``echomq lanes``, ``echomq weight`` and ``echomq lane``."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest

from cli.clitools import CLI, RunCli, cli_env, one_line_error, queue_args
from echomq import SyncQueue


def test_stats_json_counts_states_and_lanes(cli: RunCli, sq: SyncQueue) -> None:
    sq.add_many([{"name": "a", "group": "acme"}] * 3 + [{"name": "b"}] * 2)
    sq.add("later", delay=60)
    sq.claim(1)
    data = json.loads(cli("stats", "--json").stdout)
    assert data["counts"] == {
        "waiting": 4,
        "delayed": 1,
        "failed": 0,
        "active": 1,
        "completed": 0,
        "dead": 0,
        "blocked": 0,
        "cancelled": 0,
    }
    assert data["lanes"] == {"acme": 2, "": 2}
    assert data["totals"]["added"] == 6
    text = cli("stats").stdout
    assert "waiting" in text and "acme" in text and "(default)" in text


def test_lanes_show_share_against_weight(cli: RunCli, sq: SyncQueue) -> None:
    assert cli("weight", "acme", "3").returncode == 0
    assert cli("weight", "globex", "1").returncode == 0
    assert cli("weight", "idle", "7").returncode == 0
    sq.add_many([{"name": "j", "group": g} for g in ("acme", "globex") for _ in range(10)])
    sq.claim(8)  # two full rotations: acme 6, globex 2
    data = json.loads(cli("lanes", "--json").stdout)
    rows = {row["group"]: row for row in data["lanes"]}
    assert [row["group"] for row in data["lanes"]] == ["acme", "globex"]
    assert (rows["acme"]["served"], rows["globex"]["served"]) == (6, 2)
    assert (rows["acme"]["backlog"], rows["globex"]["backlog"]) == (4, 8)
    assert rows["acme"]["share"] == pytest.approx(0.75)
    assert rows["acme"]["weight_share"] == pytest.approx(0.75)
    assert rows["globex"]["share"] == pytest.approx(0.25)
    assert data["idle_weights"] == {"idle": 7}
    text = cli("lanes").stdout
    assert "75.0%" in text and "25.0%" in text and "idle (weight 7)" in text


def test_weight_sets_shows_and_refuses_bad_values(cli: RunCli, sq: SyncQueue) -> None:
    assert cli("weight", "acme", "5").returncode == 0
    assert sq.weights() == {"acme": 5}
    assert cli("weight", "acme").stdout.strip() == "5"
    assert cli("weight", "", "2").returncode == 0  # "" is the default lane
    assert sq.weights() == {"acme": 5, None: 2}
    for bad in ("1001", "abc"):  # out of range (InvalidWeight), not an integer
        line = one_line_error(cli("weight", "acme", bad))
        assert "1 … 1000" in line, line
    assert sq.weights()["acme"] == 5


def test_stats_watch_refreshes_until_interrupted(
    backend_url: str, queue_name: str, sq: SyncQueue
) -> None:
    sq.add("x")
    argv = [
        *CLI,
        *queue_args(["stats", "--watch", "--json", "--interval", "0.1"], backend_url, queue_name),
    ]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=cli_env()) as proc:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        sq.add("y")
        waiting = [json.loads(proc.stdout.readline())["counts"]["waiting"] for _ in range(3)]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=5) == 0
    assert first["counts"]["waiting"] == 1
    assert waiting[-1] == 2  # a refresh after the add (at most one was already under way)


def test_lane_sets_and_shows_controls(cli: RunCli, sq: SyncQueue) -> None:
    done = cli("lane", "acme", "--concurrency", "5", "--rate", "100/1s", "--max-waiting", "10000")
    assert done.returncode == 0, done.stderr
    assert cli("lane", "acme", "--pause").returncode == 0
    data = json.loads(cli("lane", "acme", "--json").stdout)
    assert (data["concurrency"], data["rate"], data["paused"], data["max_waiting"]) == (
        5,
        {"max": 100, "per_seconds": 1.0},
        True,
        10000,
    )
    assert cli("lane", "acme", "--resume", "--concurrency", "none").returncode == 0
    info = next(x for x in sq.lanes() if x.group == "acme")
    assert (info.paused, info.concurrency, info.rate) == (False, None, (100, 1.0))
    sq.add("j", group="acme")
    text = cli("lanes").stdout
    assert "0/–" in text and "100/1s" in text and "max_waiting 10000" in text
    for bad in (["--concurrency", "0"], ["--rate", "fast"], ["--concurrency", "x"]):
        line = one_line_error(cli("lane", "acme", *bad))
        assert "concurrency" in line or "rate" in line, line
