"""What an adversarial review of the dashboard found (issue 14, rows 1, 4 and 8).

- Job lists and the sampler read summaries only: bytes the server sends do
  not grow with payloads, errors or tracebacks; ``count`` is capped; lists page.
- Every logged value is escaped (no forged log lines); refused requests never
  push accepted actions out of the audit list.
- ``/api/score`` answers bad input with 400, not 500.

Byte counts come from the server's own INFO counter, so these run on one
plain server (Valkey), not on the cluster.
"""

from __future__ import annotations

import logging
import time
from urllib.parse import quote

import pytest
import redis

from echomq import SyncQueue
from web.conftest import StartDashboard
from web.webtools import TOKEN

pytestmark = pytest.mark.parametrize("backend", ["valkey"], indirect=True)

JSON = {"Content-Type": "application/json"}
AUTH = {**JSON, "X-EchoMQ-Token": TOKEN}
#: 20 dead jobs of 400 KiB payload + 100 KiB error + 100 KiB traceback: 12 MB in all
BIG = 400 * 1024
ERR = 100 * 1024


def output_bytes(client: redis.Redis) -> int:
    return int(client.info("stats")["total_net_output_bytes"])


def make_big_dead(q: SyncQueue, n: int = 20) -> list[str]:
    ids = q.add_many(
        [{"name": "big", "data": {"blob": "x" * BIG}, "max_attempts": 1} for _ in range(n)]
    )
    for job in q.claim(n):
        q.fail(job, "E" * ERR, "T" * ERR, retry=False)
    return ids


def test_a_dead_list_page_does_not_pull_the_payloads(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue, redis_client: redis.Redis
) -> None:
    make_big_dead(sq)
    d = start_dashboard(backend_url, queues=[sq.name], interval=60)  # one sample at start
    page = f"/api/queues/{sq.name}/jobs?state=dead&count=50"
    d.http.get(page)  # the first sampler tick is done once a request has been answered
    before = output_bytes(redis_client)
    reply = d.http.get(page)
    sent = output_bytes(redis_client) - before
    assert reply.status_code == 200 and len(reply.json()["jobs"]) == 20
    assert sent < 100_000, f"the server sent {sent:,} bytes for one page of summaries"
    # the inspector shows one job: its long fields' first bytes, the rest a download
    # (tests/web/test_inspector_preview.py)
    job_id = reply.json()["jobs"][0]["id"]
    detail = d.http.get(f"/api/queues/{sq.name}/jobs/{job_id}").json()
    assert detail["truncated"]["data"]["size"] == len('{"blob":""}') + BIG
    assert detail["truncated"]["traceback"]["size"] == ERR


def test_an_idle_dashboard_reads_little(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue, redis_client: redis.Redis
) -> None:
    make_big_dead(sq)
    start_dashboard(backend_url, queues=[sq.name], interval=0.3)
    before = output_bytes(redis_client)
    time.sleep(1.5)  # a measuring window of about five sampler ticks, no condition to poll
    sent = output_bytes(redis_client) - before
    assert sent < 300_000, f"an idle dashboard pulled {sent:,} bytes in 1.5 s"


def test_count_is_capped_and_lists_page(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    ids = sq.add_many([{"name": "j"} for _ in range(60)])
    d = start_dashboard(backend_url, queues=[sq.name])
    base = f"/api/queues/{sq.name}/jobs?state=waiting"
    too_many = d.http.get(base + "&count=201")
    assert too_many.status_code == 400 and "1 … 200" in too_many.json()["error"]
    first = d.http.get(base).json()  # 50 by default
    second = d.http.get(base + "&offset=50").json()
    assert (len(first["jobs"]), first["more"]) == (50, True)
    assert (len(second["jobs"]), second["more"]) == (10, False)
    assert [j["id"] for j in first["jobs"] + second["jobs"]] == ids
    assert "data" not in first["jobs"][0]


@pytest.mark.parametrize("raw", ["²", "٣", "9" * 5000, "-1", "1e3", " 1"])
def test_bad_scores_answer_400(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue, raw: str
) -> None:
    d = start_dashboard(backend_url, queues=[sq.name])
    reply = d.http.get("/api/score", params={"score": raw})
    assert reply.status_code == 400, reply.text
    assert "whole number of at most 20 digits" in reply.json()["error"]
    assert d.http.get("/api/score", params={"score": "8589934599"}).json()["tier"] == 2


def test_a_forged_log_line_is_escaped(
    start_dashboard: StartDashboard,
    backend_url: str,
    sq: SyncQueue,
    caplog: pytest.LogCaptureFixture,
) -> None:
    d = start_dashboard(backend_url, queues=[sq.name], token=TOKEN)
    forged = "x\n2026-01-01 echomq.web.audit purge_dead queue=prod client=127.0.0.1 {}: ok\x1b[2J"
    with caplog.at_level(logging.INFO, logger="echomq.web.audit"):
        reply = d.http.post(f"/api/queues/{quote(forged, safe='')}/pause", json={})  # no token
        assert reply.status_code == 401
    records = [r for r in caplog.records if r.name == "echomq.web.audit"]
    assert records, "the refused request was not logged"
    for record in records:
        line = record.getMessage()
        assert "\n" not in line and "\x1b" not in line, line
        assert "\\n2026-01-01" in line and "\\x1b[2J" in line
    [entry] = d.http.get("/api/audit").json()
    assert entry["refused"] is True and "\n" not in entry["queue"]


def test_refused_requests_do_not_evict_accepted_actions(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    d = start_dashboard(backend_url, queues=[sq.name], token=TOKEN)
    weights = f"/api/queues/{sq.name}/weights"
    assert d.http.post(weights, json={"group": "acme", "weight": 3}, headers=AUTH).is_success
    for _ in range(250):  # more than the list keeps
        assert d.http.post(weights, json={"group": "acme", "weight": 9}).status_code == 401
    audit = d.http.get("/api/audit").json()
    accepted = [e for e in audit if not e["refused"]]
    assert [(e["action"], e["outcome"]) for e in accepted] == [("set_weight", "ok")]
    assert 0 < len(audit) - len(accepted) <= 50
