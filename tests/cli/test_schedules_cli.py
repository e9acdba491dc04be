"""``echomq schedules [list|add|remove|pause|resume]``."""

from __future__ import annotations

import json
import re

from cli.clitools import RunCli, one_line_error
from echomq import SyncQueue


def test_add_list_pause_remove(cli: RunCli, sq: SyncQueue) -> None:
    proc = cli("schedules")
    assert proc.returncode == 0 and "no schedules" in proc.stdout
    proc = cli(
        "schedules", "add", "nightly", "--cron", "0 3 * * *", "--tz", "Europe/Berlin",
        "--name", "report", "--data", '{"k": 1}', "--group", "acme",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "schedule nightly saved: next fire" in proc.stdout
    assert cli("schedules", "add", "beat", "--every", "30", "--name", "ping").returncode == 0
    [beat, nightly] = sq.schedules()  # id order
    assert (nightly.cron, nightly.tz, nightly.data, nightly.group) == (
        "0 3 * * *", "Europe/Berlin", {"k": 1}, "acme",
    )  # fmt: skip
    assert beat.every == 30.0
    text = cli("schedules").stdout
    assert "0 3 * * * (Europe/Berlin)" in text and "every 30s" in text and "next fire" in text
    assert cli("schedules", "pause", "beat").returncode == 0
    rows = json.loads(cli("schedules", "list", "--json").stdout)
    assert [(r["id"], r["paused"]) for r in rows] == [("beat", True), ("nightly", False)]
    assert "paused" in cli("schedules").stdout
    assert cli("schedules", "resume", "beat").returncode == 0
    proc = cli("schedules", "remove", "beat")
    assert proc.returncode == 0 and "removed" in proc.stdout
    assert [s.id for s in sq.schedules()] == ["nightly"]


def test_user_errors_are_one_line(cli: RunCli, sq: SyncQueue) -> None:
    assert "no schedule nope" in one_line_error(cli("schedules", "remove", "nope"))
    line = one_line_error(cli("schedules", "add", "x", "--cron", "99 * * * *", "--name", "j"))
    assert "cron" in line
    line = one_line_error(
        cli("schedules", "add", "x", "--cron", "0 3 * * *", "--tz", "Nowhere/X", "--name", "j")
    )
    assert "time zone" in line
    assert "exactly one" in one_line_error(cli("schedules", "add", "x", "--name", "j"))
    assert sq.schedules() == []


def test_server_text_is_escaped(cli: RunCli, sq: SyncQueue) -> None:
    sq.schedule("esc", every=60, name="evil\x1b[31mred")
    out = cli("schedules").stdout
    assert "\x1b" not in out and "evil" in out


def test_fire_times_are_shown_in_the_schedules_own_zone_labelled(
    cli: RunCli, sq: SyncQueue
) -> None:
    """Whatever the local zone of the terminal (here Tokyo): 03:00 Berlin time, said so."""
    tokyo = {"TZ": "Asia/Tokyo"}
    added = cli(
        "schedules", "add", "nightly", "--cron", "0 3 * * *", "--tz", "Europe/Berlin",
        "--name", "report", env=tokyo,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert re.search(r"next fire \d{4}-\d\d-\d\d 03:00:00 CES?T$", added.stdout.strip())
    sq.schedule("beat", every=3600, name="ping")
    lines = cli("schedules", env=tokyo).stdout.splitlines()
    [nightly] = [line for line in lines if line.startswith("nightly")]
    assert re.search(r"0 3 \* \* \* \(Europe/Berlin\).* \d{4}-\d\d-\d\d 03:00:00 CES?T ", nightly)
    [beat] = [line for line in lines if line.startswith("beat")]
    assert re.search(r" \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC ", beat)
