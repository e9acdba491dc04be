"""``echomq position JOB`` and ``echomq score aged``: where a waiting job stands,
and what an aged lane key says."""

from __future__ import annotations

import json

from cli.clitools import RunCli, one_line_error
from echomq import SyncQueue


def test_position_shows_the_lane_and_queue_ahead(cli: RunCli, sq: SyncQueue) -> None:
    sq.set_weight("a", 2)
    ids = sq.add_many([{"name": "j", "group": g} for g in ("a", "a", "a", "b", "b")])
    proc = cli("position", ids[4], "--json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    # a a b a b: the second b job waits for 4 claims, 1 of them in its lane
    assert (got["lane_ahead"], got["queue_ahead"], got["eta"]) == (1, 4, None)
    text = cli("position", ids[2]).stdout
    assert "ahead in its lane   2" in text and "claims before it    3" in text
    assert "estimated wait      unknown" in text


def test_position_of_a_job_not_waiting_is_one_line(cli: RunCli, sq: SyncQueue) -> None:
    job_id = sq.add("j", delay=3600)
    proc = cli("position", job_id)
    assert proc.returncode == 1
    assert "is delayed" in one_line_error(proc)
    unknown = cli("position", "job_01m92h6jfkeqmtyamfh3phtpnm")
    assert unknown.returncode == 1
    assert "no job" in one_line_error(unknown)


def test_score_aged_explains_a_key(cli: RunCli) -> None:
    proc = cli("score", "aged", "1796455222747", "2", "--age-step", "0.5", queue=False)
    assert proc.returncode == 0, proc.stderr
    assert "due       1796455221747   = 2026-12-05T07:20:21.747+00:00" in proc.stdout
    assert "became due after 2026-12-05T07:20:22.747+00:00" in proc.stdout
    as_json = cli("score", "aged", "1796455222747", "2", "--json", queue=False)
    assert json.loads(as_json.stdout)["due_ms"] == 1796455222747 - 2 * 60_000
    bad = cli("score", "aged", "1796455222747", "2", "--age-step", "nan", queue=False)
    assert bad.returncode == 1
    assert "age_step nan is out of range" in one_line_error(bad)


def test_inspect_explains_an_aged_key(cli: RunCli, backend_url: str, queue_name: str) -> None:
    with SyncQueue(queue_name, ordering="aged", url=backend_url) as q:
        try:
            q.configure(age_step=0.5)
            job_id = q.add("j", priority=2)
            job = q.get(job_id)
            assert job is not None and job.created_at is not None
            due = round(job.created_at.timestamp() * 1000)
            shown = cli("inspect", job_id)
            assert shown.returncode == 0, shown.stderr
            assert f"due       {due}" in shown.stdout
            assert "tier      2 × age_step 0.5 s = 1000 ms" in shown.stdout
            doc = json.loads(cli("inspect", job_id, "--json").stdout)
            assert doc["aged_key"] == {"key": due + 1000, "tier": 2, "age_step_ms": 500,
                                       "due_ms": due}  # fmt: skip
        finally:
            q.drop()
