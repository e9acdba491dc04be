"""The dashboard's lane actions through the API: lifting a throttle (issue 27.4)."""

from __future__ import annotations

from echomq import SyncQueue
from web.conftest import StartDashboard
from web.webtools import TOKEN

JSON = {"Content-Type": "application/json"}
AUTH = {**JSON, "X-EchoMQ-Token": TOKEN}
YEARS = 10 * 365 * 86_400


def throttled(sq: SyncQueue, group: str) -> bool:
    return any(x.group == group and x.throttled_until is not None for x in sq.lanes())


def test_unthrottle_needs_the_token_and_lifts_the_throttle(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    job_id = sq.add("j", group="acme")
    sq.throttle("acme", YEARS)
    d = start_dashboard(backend_url, queues=[sq.name], token=TOKEN)
    url = f"/api/queues/{sq.name}/lanes/unthrottle"
    lane = next(x for x in d.http.get(f"/api/queues/{sq.name}").json()["lanes"])
    assert lane["group"] == "acme" and lane["throttled_until"] is not None
    assert d.http.post(url, json={"group": "acme"}, headers=JSON).status_code == 401
    assert throttled(sq, "acme")
    bad = d.http.post(url, json={"group": 7}, headers=AUTH)
    assert bad.status_code == 400 and "group 7" in bad.json()["error"]
    assert throttled(sq, "acme")
    done = d.http.post(url, json={"group": "acme"}, headers=AUTH)
    assert done.status_code == 200, done.text
    assert done.json() == {"group": "acme", "throttled_until": None}
    assert not throttled(sq, "acme")
    assert [j.id for j in sq.claim(1)] == [job_id]
    audit = d.http.get("/api/audit").json()  # newest first
    outcomes = [e["outcome"].split(":")[0] for e in audit if e["action"] == "unthrottle"]
    assert outcomes == ["ok", "error", "refused (401)"], outcomes
