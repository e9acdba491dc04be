"""``echomq lane GROUP``: lifting a throttle (issue 27.4), and the one lane it shows."""

from __future__ import annotations

import json

from cli.clitools import RunCli
from echomq import SyncQueue


def test_unthrottle_lifts_a_throttle_of_years(cli: RunCli, sq: SyncQueue) -> None:
    job_id = sq.add("j", group="acme")
    sq.throttle("acme", 10 * 365 * 86_400)
    assert sq.claim(1) == []
    shown = json.loads(cli("lane", "acme", "--json").stdout)
    assert shown["throttled_until"] is not None and shown["parked"] is True
    assert "throttled until" in cli("lanes").stdout
    done = cli("lane", "acme", "--unthrottle", "--json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["throttled_until"] is None and shown["parked"] is False
    assert [j.id for j in sq.claim(1)] == [job_id]
    lines = [line for line in cli("events").stdout.splitlines() if "unthrottled" in line]
    assert len(lines) == 1 and "acme" in lines[0] and " – " in lines[0]
