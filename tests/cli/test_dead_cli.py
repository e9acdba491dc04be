"""``echomq dead list|retry|purge`` with their filters."""

from __future__ import annotations

import json

from cli.clitools import RunCli, one_line_error
from echomq import State, SyncQueue

KINDS = [("send", "acme"), ("send", None), ("bill", "acme"), ("bill", "globex")]


def bury(sq: SyncQueue) -> dict[tuple[str, str | None], str]:
    """One dead job per (name, group) of KINDS; returns their ids."""
    ids = {}
    for name, group in KINDS:
        ids[(name, group)] = sq.add(name, {"n": name}, group=group, max_attempts=1)
    for job in sq.claim(len(KINDS)):
        assert sq.fail(job, f"boom in {job.name}\nsecond line") is State.DEAD
    return ids


def listed(cli: RunCli, *filters: str) -> set[str]:
    proc = cli("dead", "list", "--json", *filters)
    assert proc.returncode == 0, proc.stderr
    return {job["id"] for job in json.loads(proc.stdout)}


def test_list_filters_by_name_and_group(cli: RunCli, sq: SyncQueue) -> None:
    ids = bury(sq)
    assert listed(cli) == set(ids.values())
    assert listed(cli, "--name", "send") == {ids[("send", "acme")], ids[("send", None)]}
    assert listed(cli, "--group", "acme") == {ids[("send", "acme")], ids[("bill", "acme")]}
    assert listed(cli, "--group", "") == {ids[("send", None)]}
    assert listed(cli, "--name", "bill", "--group", "globex") == {ids[("bill", "globex")]}
    assert len(listed(cli, "--limit", "2")) == 2
    text = cli("dead", "list").stdout
    assert ids[("bill", "globex")] in text and "boom in bill" in text
    assert "second line" not in text  # the table shows the first line of the error


def test_retry_by_filter_moves_only_matching_jobs(cli: RunCli, sq: SyncQueue) -> None:
    ids = bury(sq)
    proc = cli("dead", "retry", "--group", "acme")
    assert proc.returncode == 0, proc.stderr
    assert "retried 2 dead jobs" in proc.stdout
    states = {key: sq.get(job_id).state for key, job_id in ids.items()}  # type: ignore[union-attr]
    assert states == {
        ("send", "acme"): State.WAITING,
        ("send", None): State.DEAD,
        ("bill", "acme"): State.WAITING,
        ("bill", "globex"): State.DEAD,
    }
    assert cli("dead", "retry", ids[("send", None)]).returncode == 0
    assert sq.get(ids[("send", None)]).state is State.WAITING  # type: ignore[union-attr]


def test_purge_deletes_for_good(cli: RunCli, sq: SyncQueue) -> None:
    ids = bury(sq)
    refused = cli("dead", "purge", "--name", "bill", stdin="n\n")  # asks first
    assert refused.returncode == 1 and sq.get(ids[("bill", "acme")]) is not None
    proc = cli("dead", "purge", "--name", "bill", "--yes")
    assert proc.returncode == 0 and "purged 2 dead jobs" in proc.stdout
    assert sq.get(ids[("bill", "acme")]) is None and sq.get(ids[("bill", "globex")]) is None
    assert cli("dead", "purge", ids[("send", "acme")]).returncode == 0
    assert sq.get(ids[("send", "acme")]) is None
    assert cli("dead", "purge", "--all", "--yes").stdout.strip() == "purged 1 dead job"
    assert sq.stats().counts["dead"] == 0


def test_dead_errors(cli: RunCli, sq: SyncQueue) -> None:
    live = sq.add("alive")
    line = one_line_error(cli("dead", "retry", live))
    assert f"not in the dead set: {live}" in line
    assert sq.get(live).state is State.WAITING  # type: ignore[union-attr]
    one_line_error(cli("dead", "purge", "not-an-id"))
    for args in (("dead", "purge"), ("dead", "retry"), ("dead", "retry", live, "--all")):
        proc = cli(*args)
        assert proc.returncode == 2 and "Usage:" in proc.stderr, (args, proc.stderr)


def test_retry_says_which_dependents_stay_dead(cli: RunCli, sq: SyncQueue) -> None:
    extract = sq.add("extract", max_attempts=1)
    merge = sq.add("merge", depends_on=[extract])
    [job] = sq.claim(1)
    sq.fail(job, "outage", retry=False)
    sq.maintain()
    proc = cli("dead", "retry", merge)
    assert proc.returncode == 1
    assert "retried 0 dead jobs" in proc.stdout and "1 stay dead" in proc.stdout
    assert merge in proc.stdout and "not in the dead set" not in proc.stdout + proc.stderr
    proc = cli("dead", "retry", "--all")
    assert proc.returncode == 0, proc.stderr
    assert "retried 2 dead jobs" in proc.stdout
    assert sq.get(merge).state is State.BLOCKED  # type: ignore[union-attr]
