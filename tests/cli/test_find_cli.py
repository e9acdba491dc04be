"""``echomq find key=value …``: the jobs carrying the tags, newest first."""

from __future__ import annotations

import json

from cli.clitools import RunCli, one_line_error
from echomq import SyncQueue


def test_find_lists_tagged_jobs_newest_first(cli: RunCli, sq: SyncQueue) -> None:
    a = sq.add("send", 1, tags={"customer": "42"})
    b = sq.add("[bold]bill[/bold]", 2, tags={"customer": "42", "region": "eu"})
    sq.add("send", 3, tags={"customer": "7"})
    proc = cli("find", "customer=42", "--json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert [job["id"] for job in got["jobs"]] == [b, a]
    assert got["jobs"][0]["tags"] == {"customer": "42", "region": "eu"}
    assert got["cursor"] is None
    text = cli("find", "customer=42", "region=eu").stdout
    assert b in text and a not in text
    assert "[bold]bill[/bold]" in text  # markup in job data is shown, not rendered
    proc = cli("find", "customer=42", "--count", "1")
    assert a not in proc.stdout and "more: --cursor" in proc.stdout
    cursor = proc.stdout.split("--cursor '")[1].split("'")[0]
    assert a in cli("find", "customer=42", "--cursor", cursor).stdout
    assert "no job carries" in cli("find", "customer=none").stdout


def test_find_refuses_a_bad_tag_in_one_line(cli: RunCli, sq: SyncQueue) -> None:
    for word in ("customer", "Customer=1", "a="):
        proc = cli("find", word)
        assert proc.returncode != 0
        one_line_error(proc)
