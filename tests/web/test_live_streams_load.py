"""Many open live streams leave the dashboard answering (issue 27, item 5): the
streams of one queue share the queue's event bell (one blocking read), so 150
open tabs do not take the connections every other endpoint needs."""

from __future__ import annotations

import asyncio
import contextlib
import time

import httpx

from echomq import SyncQueue
from web.conftest import StartDashboard

STREAMS = 150
DEADLINE = 30.0


async def _open_streams(base: str, path: str, sq: SyncQueue) -> None:
    limits = httpx.Limits(max_connections=STREAMS + 10, max_keepalive_connections=STREAMS + 10)
    async with (
        httpx.AsyncClient(base_url=base, limits=limits, timeout=DEADLINE) as http,
        contextlib.AsyncExitStack() as streams,
    ):
        opened = []
        for _ in range(STREAMS):
            response = await streams.enter_async_context(http.stream("GET", path))
            assert response.status_code == 200
            opened.append(response.aiter_lines())
        for lines in opened:  # each sent its first line: it is streaming
            assert (await anext(lines)).startswith("retry:")
        await asyncio.sleep(1.5)  # every stream caught up, waiting on the bell
        started = time.monotonic()
        for endpoint in ("/metrics", "/api/info", f"{path.rsplit('/', 1)[0]}"):
            answer = await http.get(endpoint)
            assert answer.status_code == 200, (endpoint, answer.status_code, answer.text[:200])
        assert time.monotonic() - started < 2.0, "the endpoints waited for a connection"
        job_id = await asyncio.to_thread(sq.add, "job")

        async def hears(lines: object) -> None:
            async for line in lines:  # type: ignore[attr-defined]
                if job_id in line:
                    return

        async with asyncio.timeout(DEADLINE):
            await asyncio.gather(*(hears(lines) for lines in opened))


def test_many_open_streams_leave_every_endpoint_answering(
    start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    sq.add("warm-up")
    d = start_dashboard(backend_url, queues=[sq.name], interval=60.0)
    asyncio.run(_open_streams(d.base, f"/api/queues/{sq.name}/events", sq))
