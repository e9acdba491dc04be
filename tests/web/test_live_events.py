"""The dashboard's live updates: the event stream as server-sent events, and the
page following it in Chromium (a new job appears without a reload, long before
the page's timer would have fired)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from echomq import SyncQueue
from web.conftest import StartDashboard
from web.test_browser import browser, open_dashboard, page  # noqa: F401  (fixtures)

#: the dashboards here sample every 60 s: only the event stream can update the page in time.
SLOW = 60.0


def read_messages(response: httpx.Response, want: int) -> list[dict[str, Any]]:
    """The first ``want`` ``events`` messages of an SSE response, as (id, data)."""
    got: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for line in response.iter_lines():
        if line.startswith("id: "):
            current["id"] = line[4:]
        elif line.startswith("event: "):
            current["event"] = line[7:]
        elif line.startswith("data: "):
            current["data"] = json.loads(line[6:])
        elif line == "" and current:
            got.append(current)
            current = {}
            if len(got) >= want:
                return got
    raise AssertionError(f"the stream ended after {len(got)} messages")


def test_the_sse_endpoint_streams_events_and_resumes_after_last_event_id(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    first = sq.add("a", group="acme")
    d = start_dashboard(backend_url, queues=[sq.name], interval=SLOW)
    path = f"/api/queues/{sq.name}/events"
    with d.http.stream("GET", path, params={"after": "0"}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert "default-src 'self'" in response.headers["content-security-policy"]
        [message] = read_messages(response, 1)
    assert message["event"] == "events" and message["data"]["count"] == 1
    [event] = message["data"]["events"]
    assert (event["kind"], event["job_id"], event["group"]) == ("added", first, "acme")
    assert event["name"] == "a" and event["at"] > 0  # the live list's name and time columns
    second = sq.add("b")
    with d.http.stream("GET", path, headers={"Last-Event-ID": message["id"]}) as response:
        [resumed] = read_messages(response, 1)
    assert [e["job_id"] for e in resumed["data"]["events"]] == [second]


def test_the_sse_endpoint_refuses_bad_input_like_the_rest_of_the_api(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    sq.add("a")
    d = start_dashboard(backend_url, queues=[sq.name], interval=SLOW)
    bad = d.http.get(f"/api/queues/{sq.name}/events", headers={"Last-Event-ID": "<script>"})
    assert bad.status_code == 400 and "event id" in bad.json()["error"]
    assert d.http.get("/api/queues/not-shown/events").status_code == 404


@pytest.mark.parametrize("backend", ["valkey"], indirect=True)
def test_a_new_job_appears_without_a_reload(
    page: Any,  # noqa: F811
    start_dashboard: StartDashboard,
    backend_url: str,
    sq: SyncQueue,
) -> None:
    sq.add("old")
    d = start_dashboard(backend_url, queues=[sq.name], interval=SLOW)
    open_dashboard(page, d, sq.name, lanes=False)
    page.wait_for_selector("#jobs tbody tr")
    assert page.text_content('.card[data-state="waiting"] .value') == "1"
    page.wait_for_function("() => document.querySelector('#live').title.startsWith('live')")
    fresh = sq.add("fresh", data={"label": "<img src=x onerror=alert(1)>"})
    page.wait_for_selector(f'#jobs tbody tr:has-text("{fresh}")')
    row = page.wait_for_selector(f'#events tbody tr:has-text("{fresh}")')
    assert "fresh" in row.text_content().replace(fresh, "")  # the name column
    assert page.text_content('.card[data-state="waiting"] .value') == "2"
    assert page.evaluate("() => performance.getEntriesByType('navigation').length") == 1
