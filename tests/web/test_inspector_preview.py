"""The inspector reads a long field's first bytes only; the rest is a download.

A job of several megabytes (payload, result, error, traceback) costs the
dashboard and the server a bounded amount per look: the server cuts each long
field (peekJob.lua), so only its first 64 KiB crosses the wire.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import redis
from redis.cluster import RedisCluster
from starlette.applications import Starlette

from echomq import SyncQueue
from echomq.engine import PREVIEW_BYTES
from echomq.web.api import MAX_DOWNLOADS
from web.conftest import Dashboard, StartDashboard
from web.webtools import wait_for

#: a job detail with two fields cut is two previews and the rest of the fields.
DETAIL_BOUND = 2 * PREVIEW_BYTES + 32 * 1024


@pytest.fixture
def big_q(backend_url: str, queue_name: str) -> Iterator[SyncQueue]:
    q = SyncQueue(queue_name, backend_url, max_payload=16 * 1024 * 1024)
    yield q
    q.close()


def sent_by_server(client: redis.Redis | RedisCluster) -> int:
    """Bytes the server (every node of a cluster) has sent to clients so far."""
    if isinstance(client, RedisCluster):
        per_node = client.info("stats", target_nodes=RedisCluster.ALL_NODES)
        return sum(int(info["total_net_output_bytes"]) for info in per_node.values())
    return int(client.info("stats")["total_net_output_bytes"])


def detail(d: Dashboard, q: SyncQueue, job_id: str) -> dict[str, Any]:
    response = d.http.get(f"/api/queues/{q.name}/jobs/{job_id}")
    assert response.status_code == 200, response.text
    assert len(response.content) < DETAIL_BOUND, len(response.content)
    body: dict[str, Any] = response.json()
    return body


def test_a_multi_megabyte_job_is_previewed_and_downloaded_whole(
    start_dashboard: StartDashboard,
    backend_url: str,
    big_q: SyncQueue,
    redis_client: redis.Redis | RedisCluster,
) -> None:
    data = {"blob": "é" * 2_500_000, "n": 1}  # 5 MB; a 2-byte character at every cut
    result = ["r" * 3_000_000]
    done_id = big_q.add("big", data)
    [job] = big_q.claim(1)
    big_q.complete(job, result)
    dead_id = big_q.add("bad", {"x": 1}, max_attempts=1)
    [job] = big_q.claim(1)
    error, traceback = "E" * 1_000_000, "Traceback (most recent call last):\n" + "T" * 900_000
    big_q.fail(job, error, traceback)
    small_id = big_q.add("small", {"fits": True})
    d = start_dashboard(backend_url, queues=[big_q.name])

    before = sent_by_server(redis_client)
    shown = detail(d, big_q, done_id)
    sent = sent_by_server(redis_client) - before
    # 8 MB are stored; the server sent the two previews and the dashboard's own reads
    assert sent < 1_000_000, sent
    assert shown["data"] is None and shown["result"] is None and shown["name"] == "big"
    cut = shown["truncated"]
    assert set(cut) == {"data", "result"}
    for name, value in (("data", data), ("result", result)):
        stored = orjson.dumps(value)
        assert cut[name]["size"] == len(stored)
        assert PREVIEW_BYTES - 4 < cut[name]["shown"] <= PREVIEW_BYTES
        assert stored.startswith(cut[name]["preview"].encode())
        download = d.http.get(cut[name]["download"])
        assert download.status_code == 200
        assert download.content == stored
        assert download.headers["content-type"] == "application/json"
        assert download.headers["content-disposition"] == (
            f'attachment; filename="{done_id}-{name}.json"'
        )

    shown = detail(d, big_q, dead_id)
    assert shown["state"] == "dead" and shown["data"] == {"x": 1}
    assert shown["error"] is None and shown["traceback"] is None
    for name, text in (("error", error), ("traceback", traceback)):
        assert shown["truncated"][name]["size"] == len(text)
        assert text.startswith(shown["truncated"][name]["preview"])
        download = d.http.get(shown["truncated"][name]["download"])
        assert download.text == text
        assert download.headers["content-type"].startswith("text/plain")

    shown = detail(d, big_q, small_id)
    assert shown["data"] == {"fits": True} and shown["truncated"] == {}

    base = f"/api/queues/{big_q.name}/jobs"
    unknown_field = d.http.get(f"{base}/{done_id}/fields/secrets")
    assert unknown_field.status_code == 400 and "secrets" in unknown_field.json()["error"]
    absent = d.http.get(f"{base}/{small_id}/fields/result")
    assert absent.status_code == 404
    no_job = d.http.get(f"{base}/job_01jzzzzzzzzzzzzzzzzzzzzzzz/fields/data")
    assert no_job.status_code == 404


def test_whole_field_downloads_are_bounded_at_once(
    start_dashboard: StartDashboard, backend_url: str, big_q: SyncQueue
) -> None:
    job_id = big_q.add("big", {"blob": "x" * 200_000})
    d = start_dashboard(backend_url, queues=[big_q.name])
    app = d.server.config.app
    assert isinstance(app, Starlette)
    slots = app.state.dashboard.downloads
    url = f"/api/queues/{big_q.name}/jobs/{job_id}/fields/data"
    slots.running = MAX_DOWNLOADS  # as if that many were being sent
    busy = d.http.get(url)
    assert busy.status_code == 503 and f"at most {MAX_DOWNLOADS}" in busy.json()["error"]
    slots.running = 0
    for _ in range(MAX_DOWNLOADS + 2):  # each frees its slot once sent
        assert len(d.http.get(url).content) == 200_000 + len('{"blob":""}')
    missing = d.http.get(f"/api/queues/{big_q.name}/jobs/{job_id}/fields/result")
    assert missing.status_code == 404
    wait_for(lambda: slots.running == 0, what="every download slot freed")
