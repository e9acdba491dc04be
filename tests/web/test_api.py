"""The dashboard's JSON API and /metrics, served by uvicorn, on Valkey and Redis."""

from __future__ import annotations

import re
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from echomq import SyncQueue
from echomq.score import encode
from echomq.web.app import redact
from web.conftest import StartDashboard
from web.webtools import TOKEN, make_dead, wait_for

JSON = {"Content-Type": "application/json"}
AUTH = {**JSON, "X-EchoMQ-Token": TOKEN}


def test_queue_list_counts_and_discovery(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    sq.add_many([{"name": "a"}, {"name": "b", "group": "acme"}, {"name": "c", "delay": 60}])
    sq.claim(1)
    d = start_dashboard(backend_url)  # no queue list: found by SCAN
    rows = {row["name"]: row for row in d.http.get("/api/queues").json()}
    assert sq.name in rows
    row = rows[sq.name]
    assert row["counts"] == {
        "waiting": 1,
        "delayed": 1,
        "failed": 0,
        "active": 1,
        "completed": 0,
        "dead": 0,
        "blocked": 0,
        "cancelled": 0,
    }
    assert row["totals"]["added"] == 3
    assert row["ordering"] == "composite"


def test_a_queue_created_later_is_found_and_unknown_ones_are_404(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    d = start_dashboard(backend_url)
    assert d.http.get(f"/api/queues/{sq.name}").status_code == 404
    sq.add("late")
    wait_for(lambda: d.http.get(f"/api/queues/{sq.name}").status_code == 200, what="rescan")
    bad = d.http.get("/api/queues/no{braces}")
    assert bad.status_code == 400
    assert "invalid queue name" in bad.json()["error"]


def test_only_the_named_queues_are_shown(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    sq.add("x")
    other = SyncQueue(sq.name + "-other", backend_url)
    try:
        other.add("y")
        d = start_dashboard(backend_url, queues=[sq.name])
        assert [q["name"] for q in d.http.get("/api/queues").json()] == [sq.name]
        assert d.http.get(f"/api/queues/{other.name}").status_code == 404
    finally:
        other.close()


def test_lanes_weights_and_tiers(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    sq.set_weight("acme", 3)
    sq.set_weight("idle", 7)
    items: list[dict[str, Any]] = [
        {"name": "j", "group": "acme", "priority": p} for p in (0, 0, 2, 2, 2, 9)
    ]
    items += [{"name": "j", "priority": 1} for _ in range(4)]
    sq.add_many(items)
    sq.claim(4)  # acme ×3 (its weight), then one of the default lane
    d = start_dashboard(backend_url, queues=[sq.name])
    body = d.http.get(f"/api/queues/{sq.name}").json()
    lanes = {lane["label"]: lane for lane in body["lanes"]}
    assert lanes["acme"]["weight"] == 3
    assert lanes["acme"]["backlog"] == 3
    assert lanes["(default)"]["backlog"] == 3
    assert lanes["acme"]["weight_share"] == pytest.approx(0.75)
    assert lanes["(default)"]["served_share"] == pytest.approx(0.25)
    assert {w["label"]: w["weight"] for w in body["weights"]} == {"acme": 3, "idle": 7}
    tiers = {t["label"]: t["tiers"] for t in body["tiers"]}
    assert tiers["acme"] == [{"tier": 2, "count": 2}, {"tier": 9, "count": 1}]
    assert tiers["(default)"] == [{"tier": 1, "count": 3}]


def test_schedules_are_listed(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    sq.schedule("nightly", cron="0 3 * * *", tz="Europe/Berlin", name="<b>report</b>")
    sq.schedule("beat", every=30, name="ping", group="acme")
    sq.pause_schedule("beat")
    d = start_dashboard(backend_url, queues=[sq.name])
    rows = {s["id"]: s for s in d.http.get(f"/api/queues/{sq.name}").json()["schedules"]}
    assert rows["nightly"]["cron"] == "0 3 * * *" and rows["nightly"]["name"] == "<b>report</b>"
    assert rows["nightly"]["next_fire"] is not None and not rows["nightly"]["paused"]
    # also in its own zone, labelled: 03:00 Berlin time (CET or CEST), as the CLI shows it
    assert re.fullmatch(r"\d{4}-\d\d-\d\d 03:00:00 CES?T", rows["nightly"]["next_fire_local"])
    assert rows["beat"]["paused"] and rows["beat"]["next_fire"] is None
    assert rows["beat"]["every"] == 30.0 and rows["beat"]["group"] == "acme"


def test_job_lists_and_the_inspector(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    ids = sq.add_many(
        [{"name": "j", "group": "g", "priority": p, "data": {"p": p}} for p in (5, 1, 3)]
    )
    d = start_dashboard(backend_url, queues=[sq.name])
    page = d.http.get(f"/api/queues/{sq.name}/jobs", params={"state": "waiting", "group": "g"})
    assert [j["priority"] for j in page.json()["jobs"]] == [1, 3, 5]  # claim order
    default_lane = d.http.get(f"/api/queues/{sq.name}/jobs", params={"state": "waiting"})
    assert default_lane.json()["jobs"] == []

    job = d.http.get(f"/api/queues/{sq.name}/jobs/{ids[1]}").json()
    assert job["data"] == {"p": 1}
    assert job["lane"] == "g"
    fields = job["score_fields"]
    assert fields["tier"] == 1
    assert fields["score"] == job["score"] == encode(1, fields["counter"])
    assert fields["tier_bits"] == [32, 52] and fields["counter_bits"] == [0, 31]
    assert len(fields["bits"]) == 53 and int(fields["bits"], 2) == job["score"]

    missing = d.http.get(f"/api/queues/{sq.name}/jobs/job_01jzzzzzzzzzzzzzzzzzzzzzzz")
    assert missing.status_code in (400, 404)
    bad_state = d.http.get(f"/api/queues/{sq.name}/jobs", params={"state": "lost"})
    assert bad_state.status_code == 400 and "lost" in bad_state.json()["error"]
    bad_count = d.http.get(f"/api/queues/{sq.name}/jobs", params={"count": "0"})
    assert bad_count.status_code == 400


def test_dead_job_shows_error_and_traceback(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    [dead_id] = make_dead(sq, 1, error="smtp 550")
    d = start_dashboard(backend_url, queues=[sq.name])
    rows = d.http.get(f"/api/queues/{sq.name}/jobs", params={"state": "dead"}).json()["jobs"]
    assert [(r["id"], r["error"]) for r in rows] == [(dead_id, "smtp 550")]
    job = d.http.get(f"/api/queues/{sq.name}/jobs/{dead_id}").json()
    assert job["state"] == "dead"
    assert "ValueError: smtp 550" in job["traceback"]
    assert job["claimed_at"] is not None


def test_throughput_is_sampled(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    d = start_dashboard(backend_url, queues=[sq.name], interval=0.2)
    sq.add("first")  # the queue exists before the first samples

    def added_rate_seen() -> bool:
        sq.add_many([{"name": "more"} for _ in range(20)])
        points = d.http.get(f"/api/queues/{sq.name}").json()["throughput"]
        return any(p["added"] > 0 for p in points)

    wait_for(added_rate_seen, what="a throughput point with added > 0")


def test_actions_are_refused_without_a_token(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    [dead_id] = make_dead(sq, 1)
    d = start_dashboard(backend_url, queues=[sq.name])  # read-only
    assert d.http.get("/api/info").json()["actions"] is False
    base = f"/api/queues/{sq.name}"
    for path, body in [
        ("/weights", {"group": "g", "weight": 5}),
        ("/pause", {}),
        ("/dead/retry", {"ids": [dead_id]}),
        ("/dead/purge", {"all": True}),
    ]:
        response = d.http.post(base + path, json=body, headers=AUTH)
        assert response.status_code == 403, path
        assert "without a token" in response.json()["error"]
    assert sq.weights() == {}
    assert not sq.stats().paused
    assert [j.id for j in sq.dead()] == [dead_id]
    refused = d.http.get("/api/audit").json()
    assert len(refused) == 4 and all(e["outcome"].startswith("refused (403)") for e in refused)


def test_actions_need_the_right_token_from_the_same_site(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    d = start_dashboard(backend_url, queues=[sq.name], token=TOKEN)
    url = f"/api/queues/{sq.name}/weights"
    body = {"group": "acme", "weight": 4}
    assert d.http.post(url, json=body).status_code == 401
    assert d.http.post(url, json=body, headers={"X-EchoMQ-Token": "wrong"}).status_code == 401
    cross = d.http.post(url, json=body, headers={**AUTH, "Origin": "http://evil.example"})
    assert cross.status_code == 403
    fetch_site = d.http.post(url, json=body, headers={**AUTH, "Sec-Fetch-Site": "cross-site"})
    assert fetch_site.status_code == 403
    form = d.http.post(
        url,
        content=b"group=acme&weight=4",
        headers={"X-EchoMQ-Token": TOKEN, "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert form.status_code == 415
    assert sq.weights() == {}

    ok = d.http.post(url, json=body, headers={**AUTH, "Origin": d.base})
    assert ok.status_code == 200
    assert ok.json() == {"group": "acme", "weight": 4, "was": 1}
    assert sq.weights() == {"acme": 4}
    bad = d.http.post(url, json={"group": "acme", "weight": 1001}, headers=AUTH)
    assert bad.status_code == 400 and "1001" in bad.json()["error"]
    assert d.http.post("/api/auth", json={}, headers=AUTH).status_code == 200

    audit = d.http.get("/api/audit").json()
    outcomes = [e["outcome"].split(":")[0] for e in audit if e["action"] == "set_weight"]
    assert outcomes.count("ok") == 1 and len(outcomes) == 7


def test_pause_resume_retry_and_purge_with_the_token(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    dead = make_dead(sq, 3)
    d = start_dashboard(backend_url, queues=[sq.name], token=TOKEN)
    base = f"/api/queues/{sq.name}"
    assert d.http.post(base + "/pause", json={}, headers=AUTH).json() == {"paused": True}
    assert sq.stats().paused
    assert d.http.post(base + "/resume", json={}, headers=AUTH).status_code == 200
    assert not sq.stats().paused

    retried = d.http.post(base + "/dead/retry", json={"ids": [dead[0]]}, headers=AUTH).json()
    assert retried == {"retried": [dead[0]]}
    job = sq.get(dead[0])
    assert job is not None and job.state == "waiting"
    purged = d.http.post(base + "/dead/purge", json={"ids": [dead[1]]}, headers=AUTH).json()
    assert purged == {"purged": [dead[1]]}
    assert sq.get(dead[1]) is None
    rest = d.http.post(base + "/dead/retry", json={"all": True}, headers=AUTH).json()
    assert rest == {"retried": [dead[2]]}
    empty = d.http.post(base + "/dead/purge", json={}, headers=AUTH)
    assert empty.status_code == 400  # neither ids nor all: nothing is guessed
    assert sq.stats().counts["dead"] == 0


def test_metrics_in_prometheus_text_format(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    make_dead(sq, 1)
    sq.add_many([{"name": "m", "group": "acme"} for _ in range(3)] + [{"name": "m"}])
    d = start_dashboard(backend_url, queues=[sq.name], token=TOKEN, interval=0.2)
    [job] = sq.claim(1)
    sq.complete(job)

    def histogram_count() -> float:
        return samples(d.http.get("/metrics").text).get(
            ("echomq_claim_latency_seconds_count", (("queue", sq.name),)), 0.0
        )

    wait_for(lambda: histogram_count() >= 2, what="sampled claim latencies")
    response = d.http.get("/metrics")  # no token needed
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    got = samples(response.text)
    q = ("queue", sq.name)
    assert got[("echomq_jobs", (q, ("state", "waiting")))] == 3
    assert got[("echomq_jobs", (q, ("state", "completed")))] == 1
    assert got[("echomq_jobs", (q, ("state", "dead")))] == 1
    assert got[("echomq_lane_backlog", (("lane", "acme"), q))] == 2
    assert got[("echomq_lane_backlog", (("lane", "(default)"), q))] == 1
    assert got[("echomq_added_total", (q,))] == 5
    assert got[("echomq_completed_total", (q,))] == 1
    assert got[("echomq_failed_total", (q,))] == 1
    assert got[("echomq_claim_latency_seconds_bucket", (("le", "+Inf"), q))] >= 2


def test_metrics_and_api_show_lane_controls(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    sq.set_lane("acme", concurrency=2, rate=(50, 1.0))
    sq.set_lane("idle", paused=True)
    sq.add_many([{"name": "m", "group": "acme"} for _ in range(3)])
    sq.claim(3)
    d = start_dashboard(backend_url, queues=[sq.name], token=TOKEN, interval=0.2)
    got = samples(d.http.get("/metrics").text)
    q = ("queue", sq.name)
    assert got[("echomq_lane_active", (("lane", "acme"), q))] == 2
    assert got[("echomq_lane_concurrency_limit", (("lane", "acme"), q))] == 2
    assert got[("echomq_lane_paused", (("lane", "idle"), q))] == 1
    lanes = {x["label"]: x for x in d.http.get(f"/api/queues/{sq.name}").json()["lanes"]}
    assert (lanes["acme"]["active"], lanes["acme"]["concurrency"]) == (2, 2)
    assert lanes["acme"]["rate"] == {"max": 50, "per_seconds": 1.0}
    assert lanes["idle"]["paused"] and lanes["idle"]["position"] == -1


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, keyed by name and sorted labels."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_score_endpoint_matches_the_codec(
    start_dashboard: StartDashboard, backend_url: str
) -> None:
    d = start_dashboard(backend_url, queues=["unused"])
    encoded = d.http.get("/api/score", params={"tier": 1, "counter": 999}).json()
    assert encoded["score"] == 4_294_968_295 == encode(1, 999)
    decoded = d.http.get("/api/score", params={"score": 8_589_934_593}).json()
    assert (decoded["tier"], decoded["counter"]) == (2, 1)
    too_big = d.http.get("/api/score", params={"tier": 2**21})
    assert too_big.status_code == 400 and "2097152" in too_big.json()["error"]


def test_page_security_headers_and_host_check(
    start_dashboard: StartDashboard, backend_url: str
) -> None:
    d = start_dashboard(backend_url, queues=["unused"], allowed_hosts=["127.0.0.1"])
    page = d.http.get("/")
    assert page.status_code == 200 and "echomq" in page.text
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"
    assert d.http.get("/static/app.js").status_code == 200
    rebound = d.http.get("/api/info", headers={"Host": "evil.example"})
    assert rebound.status_code == 400


def test_the_server_url_is_shown_without_its_password() -> None:
    assert redact("redis://user:s3cret@db:6379/0") == "redis://user:***@db:6379/0"
    assert redact("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"


def test_blocked_jobs_are_listed_with_their_dependencies_and_dependents(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    parent = sq.add("parent")
    child = sq.add("child", depends_on=[parent])
    d = start_dashboard(backend_url, queues=[sq.name])
    assert d.http.get(f"/api/queues/{sq.name}").json()["counts"]["blocked"] == 1
    page = d.http.get(f"/api/queues/{sq.name}/jobs", params={"state": "blocked"}).json()
    assert [(j["id"], j["state"]) for j in page["jobs"]] == [(child, "blocked")]
    job = d.http.get(f"/api/queues/{sq.name}/jobs/{child}").json()
    assert job["dependencies"] == [parent] and job["dependents"]["blocked"] == 0
    up = d.http.get(f"/api/queues/{sq.name}/jobs/{parent}").json()
    assert up["dependencies"] is None
    assert (up["dependents"]["blocked"], up["dependents"]["blocked_ids"]) == (1, [child])


def test_drop_the_queue_with_the_token(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    sq.add_many([{"name": "x"} for _ in range(2)])
    d = start_dashboard(backend_url, queues=[sq.name], token=TOKEN)
    url = f"/api/queues/{sq.name}/drop"
    assert d.http.post(url, json={"confirm": sq.name}).status_code in (401, 403)  # no token
    unnamed = d.http.post(url, json={}, headers=AUTH)
    assert unnamed.status_code == 400 and "confirm" in unnamed.json()["error"]
    assert sq.exists() is True
    done = d.http.post(url, json={"confirm": sq.name}, headers=AUTH)
    assert done.json() == {"dropped": sq.name, "jobs": 2}
    assert sq.exists() is False
    audit = d.http.get("/api/audit").json()
    assert next(e["outcome"].split(":")[0] for e in audit if e["action"] == "drop") == "ok"


def test_info_names_an_evicting_server(
    start_dashboard: StartDashboard, server_factory: Any, backend_url: str
) -> None:
    evicting = server_factory("valkey", {"maxmemory": "256mb", "maxmemory-policy": "volatile-lru"})
    d = start_dashboard(evicting.url)
    assert d.http.get("/api/info").json()["eviction"] == "volatile-lru"
    safe = start_dashboard(backend_url)
    assert safe.http.get("/api/info").json()["eviction"] is None


def test_a_batch_and_its_cancel(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    b = sq.batch(on_complete={"name": "done"})
    b.add_many([{"name": "child"}] * 4)
    b.close()
    sq.complete(sq.claim(1)[0])
    d = start_dashboard(backend_url, queues=[sq.name], token=TOKEN)
    view = d.http.get(f"/api/queues/{sq.name}/batches/{b.id}").json()
    assert (view["total"], view["completed"], view["waiting"], view["state"]) == (
        4,
        1,
        3,
        "running",
    )
    assert view["progress"] == 0.25 and view["callbacks"] == {"on_complete": None}
    unknown = "bat_" + b.id[4:-1] + ("0" if b.id[-1] != "0" else "1")
    assert d.http.get(f"/api/queues/{sq.name}/batches/{unknown}").status_code in (400, 404)
    refused = d.http.post(
        f"/api/queues/{sq.name}/batches/cancel", json={"batch": b.id}, headers=JSON
    )
    assert refused.status_code in (401, 403)
    done = d.http.post(f"/api/queues/{sq.name}/batches/cancel", json={"batch": b.id}, headers=AUTH)
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["cancelled"] is True and body["batch"]["state"] == "cancelled"
    assert body["batch"]["cancelled"] == 3


def test_batches_list_newest_first_by_cursor_and_a_batch_shows_its_callbacks_and_events(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    report = {"name": "report<b>", "data": "x" * 100_000}
    first = sq.batch(on_success=report, on_death={"name": "a"})
    first.add_many([{"name": "child"}] * 3)
    first.close()
    empty = sq.batch()
    last = sq.batch(on_complete={"name": "done"})
    last.add("child")
    d = start_dashboard(backend_url, queues=[sq.name])
    base = f"/api/queues/{sq.name}/batches"
    page = d.http.get(base, params={"count": 2}).json()
    assert [b["id"] for b in page["batches"]] == [last.id, empty.id] and page["more"]
    assert page["batches"][0]["callbacks"] == {"on_complete": None}
    rest = d.http.get(base, params={"count": 2, "cursor": page["cursor"]}).json()
    assert [b["id"] for b in rest["batches"]] == [first.id]
    assert rest["more"] is False and rest["cursor"] is None
    row = rest["batches"][0]
    assert (row["total"], row["finished"], row["progress"], row["state"]) == (3, 0, 0.0, "running")
    assert row["callbacks"] == {"on_success": None, "on_death": None}
    sq.complete_many([(job, None) for job in sq.claim(3)])
    view = d.http.get(f"{base}/{first.id}").json()
    assert (view["completed"], view["finished"], view["progress"], view["state"]) == (
        3,
        3,
        1.0,
        "succeeded",
    )
    fired = view["callbacks"]["on_success"]
    assert fired is not None and view["callbacks"]["on_death"] is None
    assert view["callback_jobs"] == [
        {"callback": "on_success", "id": fired, "name": "report<b>", "state": "delayed"},
        {"callback": "on_death", "id": None, "name": None, "state": None},
    ]
    kinds = [e["kind"] for e in view["events"]]
    assert kinds == ["batch_created", "batch_closed", "batch_succeeded"]
    assert all(e["job_id"] == first.id for e in view["events"])
    # the list reads the same counts
    listed = d.http.get(base).json()["batches"]
    assert [b["state"] for b in listed] == ["open", "open", "succeeded"]


def test_batches_list_refuses_bad_input_and_a_queue_without_batches_lists_none(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    sq.add("plain")
    d = start_dashboard(backend_url, queues=[sq.name])
    base = f"/api/queues/{sq.name}/batches"
    assert d.http.get(base).json() == {"count": 50, "cursor": None, "more": False, "batches": []}
    for count in ("0", "201", "x"):
        bad = d.http.get(base, params={"count": count})
        assert bad.status_code == 400 and "allowed 1 … 200" in bad.json()["error"]
    bad = d.http.get(base, params={"cursor": "nope"})
    assert bad.status_code == 400 and "not a cursor" in bad.json()["error"]
    assert d.http.get(f"{base}/job_nope").status_code == 400  # not a batch id
    assert d.http.get("/api/queues/no-such-queue/batches").status_code == 404


def test_job_lists_page_by_cursor_and_search_finds_by_tags(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    ids = sq.add_many(
        [{"name": "n", "data": i, "tags": {"customer": str(i % 3)}} for i in range(7)]
    )
    d = start_dashboard(backend_url, queues=[sq.name])
    base = f"/api/queues/{sq.name}"
    first = d.http.get(base + "/jobs", params={"state": "waiting", "count": 4, "cursor": ""}).json()
    assert [r["id"] for r in first["jobs"]] == ids[:4] and first["more"]
    rest = d.http.get(
        base + "/jobs", params={"state": "waiting", "count": 4, "cursor": first["cursor"]}
    ).json()
    assert [r["id"] for r in rest["jobs"]] == ids[4:] and rest["cursor"] is None
    found = d.http.get(base + "/find", params={"tags": "customer=0", "count": 2}).json()
    assert [r["id"] for r in found["jobs"]] == [ids[6], ids[3]]  # newest first
    assert found["tags"] == {"customer": "0"} and found["more"]
    for params in (
        {"tags": "customer"},  # not key=value
        {"tags": "Customer=1"},  # a key out of range
        {"tags": "customer=1", "state": "lost"},
        {"tags": "customer=1", "cursor": "forged"},
        {"tags": "customer=1", "count": "0"},
    ):
        refused = d.http.get(base + "/find", params=params)
        assert refused.status_code == 400, params
    refused = d.http.get(base + "/jobs", params={"state": "waiting", "cursor": found["cursor"]})
    assert refused.status_code == 400  # a search's cursor is not a listing's


def test_bulk_actions_act_on_what_a_search_found_one_step_at_a_time(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    from echomq.web.bulk import STEP

    d = start_dashboard(backend_url, queues=[sq.name], token=TOKEN)
    base = f"/api/queues/{sq.name}/found"
    mine = {"tags": "customer=42"}
    kept = sq.add("other", tags={"customer": "7"})
    waiting = sq.add_many([{"name": "n", "tags": {"customer": "42"}} for _ in range(STEP + 20)])
    # no token: refused, nothing removed
    refused = d.http.post(base + "/remove", json={**mine, "cursor": ""}, headers=JSON)
    assert refused.status_code in (401, 403) and sq.get(waiting[0]) is not None
    for bad in ({**mine, "colour": "red"}, {"tags": "nonsense"}, {**mine, "state": 3}):
        assert d.http.post(base + "/remove", json=bad, headers=AUTH).status_code == 400, bad
    assert sq.get(waiting[0]) is not None
    # cancel in steps: the first step acts on one page, the cursor goes on
    first = d.http.post(base + "/cancel", json={**mine, "cursor": ""}, headers=AUTH).json()
    assert (first["looked"], first["done"]) == (STEP, STEP) and first["cursor"]
    rest = d.http.post(base + "/cancel", json={**mine, "cursor": first["cursor"]}, headers=AUTH)
    assert (rest.json()["done"], rest.json()["cursor"]) == (20, None)
    assert all(sq.get(job_id) is None for job_id in waiting)  # not started: removed
    assert sq.get(kept) is not None  # another customer's job is left alone
    # retry acts on the dead jobs found and skips the rest
    dead = [sq.add("d", tags={"customer": "42"}, max_attempts=1) for _ in range(2)]
    for job in sq.claim(10):
        if job.id in dead:
            sq.fail(job, "boom")
        else:
            sq.release(job)  # customer 7's job waits again
    with_tag = sq.add("n", tags={"customer": "42"})
    step = d.http.post(base + "/retry", json={**mine, "cursor": ""}, headers=AUTH).json()
    assert (step["done"], step["skipped"], step["cursor"]) == (2, 1, None)
    assert {sq.get(job_id).state for job_id in dead} == {"waiting"}  # type: ignore[union-attr]
    step = d.http.post(base + "/remove", json={**mine, "cursor": ""}, headers=AUTH).json()
    assert step["done"] == 3 and sq.get(with_tag) is None and sq.get(kept) is not None
    actions = [e["action"] for e in d.http.get("/api/audit").json()]
    assert {"cancel found", "retry found", "remove found"} <= set(actions)


def test_each_bulk_step_says_how_far_along_the_search_it_is(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    """``candidates``: the walked index's entries when the step began;
    ``remaining``: those after its cursor (the page's bar: echomq.web.bulk)."""
    from echomq.web.bulk import STEP

    d = start_dashboard(backend_url, queues=[sq.name], token=TOKEN)
    base = f"/api/queues/{sq.name}/found"
    # one add_many: every job created in the same millisecond (ties on the index)
    sq.add_many([{"name": "n", "tags": {"customer": "42", "plan": "pro"}} for _ in range(250)])
    sq.add_many([{"name": "n", "tags": {"customer": "42"}} for _ in range(3 * STEP)])
    sq.add("n", tags={"customer": "7", "plan": "pro"})
    # the smallest index is walked (plan=pro: 251 entries), one of its jobs is not found
    search = {"tags": "customer=42 plan=pro"}
    seen = []
    cursor = ""
    while True:
        step = d.http.post(base + "/retry", json={**search, "cursor": cursor}, headers=AUTH)
        body = step.json()
        seen.append((body["looked"], body["candidates"], body["remaining"]))
        cursor = body["cursor"]
        if cursor is None:
            break
    assert seen == [(STEP, 251, 150), (STEP, 251, 50), (50, 251, 0)]  # c7's job looked at first
    # a remove takes the cursor's own job out: the figure is read before it acts
    cursor, seen = "", []
    while True:
        body = d.http.post(
            base + "/remove", json={"tags": "customer=42", "cursor": cursor}, headers=AUTH
        ).json()
        seen.append((body["done"], body["candidates"], body["remaining"]))
        cursor = body["cursor"]
        if cursor is None:
            break
    assert seen == [
        (STEP, 550, 450), (STEP, 450, 350), (STEP, 350, 250), (STEP, 250, 150),
        (STEP, 150, 50), (50, 50, 0),
    ]  # fmt: skip
    assert sq.stats().counts["waiting"] == 1


def test_the_inspector_api_gives_a_waiting_jobs_position_and_aged_key(
    start_dashboard: StartDashboard, backend_url: str, queue_name: str
) -> None:
    with SyncQueue(queue_name + "-aged", ordering="aged", url=backend_url) as q:
        try:
            q.configure(age_step=0.5)
            q.set_weight("a", 2)
            ids = q.add_many([{"name": "j", "group": g, "priority": 1} for g in "aaab"])
            d = start_dashboard(backend_url, queues=[q.name])
            job = d.http.get(f"/api/queues/{q.name}/jobs/{ids[3]}").json()
            # a a b: the b job waits for 2 claims, none in its lane
            assert job["position"] == {"lane_ahead": 0, "queue_ahead": 2, "eta": None}
            stored = q.get(ids[3])
            assert stored is not None and stored.created_at is not None
            due = round(stored.created_at.timestamp() * 1000)
            assert job["aged_key"] == {
                "key": due + 500, "tier": 1, "age_step_ms": 500, "due_ms": due,
                "tier_part_ms": 500,
            }  # fmt: skip
            [claimed] = q.claim(1)
            active = d.http.get(f"/api/queues/{q.name}/jobs/{claimed.id}").json()
            assert active["position"] is None
        finally:
            q.drop()


def test_the_inspector_shows_the_log_worker_and_run_time_and_workers_are_listed(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    from echomq.joblogs import JobLog
    from echomq.registry import info_text

    sq.add("j")
    [job] = sq.claim(1, worker="w1")
    job._log = JobLog(job.attempts)
    job.log("<b>not markup</b>", level="WARNING")
    sq.complete(job, None)
    sq.worker_beat("w1", 30.0, info_text("host-1", 7, [sq.name], 2, []))
    d = start_dashboard(backend_url, queues=[sq.name])
    got = d.http.get(f"/api/queues/{sq.name}/jobs/{job.id}").json()
    assert [(line["level"], line["message"]) for line in got["log"]] == [
        ("WARNING", "<b>not markup</b>")
    ]
    assert got["log"][0]["attempt"] == 1
    assert got["worker"] == "w1" and got["duration"] >= 0
    [worker] = d.http.get(f"/api/queues/{sq.name}/workers").json()
    assert (worker["id"], worker["host"], worker["pid"], worker["concurrency"]) == (
        "w1",
        "host-1",
        7,
        2,
    )


def test_metrics_exports_the_run_and_wait_histograms_the_server_keeps(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    sq.configure(metrics=True)
    sq.add_many([{"name": "send"} for _ in range(3)])
    d = start_dashboard(backend_url, queues=[sq.name])
    d.http.get("/metrics")  # a first scrape, before the jobs finish
    sq.complete_many([(job, None) for job in sq.claim(3)])
    for _ in range(2):  # scraped twice: each job still counted once
        got = samples(d.http.get("/metrics").text)
    labels = (("name", "send"), ("queue", sq.name))
    assert got[("echomq_job_run_seconds_count", labels)] == 3
    assert got[("echomq_job_wait_seconds_count", labels)] == 3
    assert got[("echomq_job_run_seconds_bucket", (("le", "+Inf"), *labels))] == 3
    assert got[("echomq_job_run_seconds_sum", labels)] >= 0


def test_metrics_exports_how_long_each_lanes_oldest_job_has_waited(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    sq.add("x", group="acme")
    d = start_dashboard(backend_url, queues=[sq.name])
    got = samples(d.http.get("/metrics").text)
    assert got[("echomq_oldest_waiting_seconds", (("lane", "acme"), ("queue", sq.name)))] >= 0


def test_the_metrics_endpoint_gives_each_names_minutes_and_refuses_bad_windows(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    sq.configure(metrics=True)
    sq.add_many([{"name": "send"} for _ in range(2)])
    sq.complete_many([(job, None) for job in sq.claim(2)])
    sq.cancel(sq.add("send"))  # cancelled before it ran
    d = start_dashboard(backend_url, queues=[sq.name])
    got = d.http.get(f"/api/queues/{sq.name}/metrics", params={"minutes": 5}).json()
    [send] = got["names"]
    assert (send["name"], send["completed"], got["minutes"]) == ("send", 2, 5)
    assert send["cancelled"] == 1 and sum(p["cancelled"] for p in send["points"]) == 1
    assert send["points"][0]["run_p50"] is not None
    bad = d.http.get(f"/api/queues/{sq.name}/metrics", params={"minutes": 4321})
    assert bad.status_code == 400
