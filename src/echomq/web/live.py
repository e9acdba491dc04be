"""Live updates: a queue's event stream as server-sent events (docs/dashboard.md).

``GET /api/queues/{queue}/events`` answers ``text/event-stream``. Each read
of the queue's stream becomes one message of type ``events`` whose ``id`` is
the last event's id and whose data is ``{"count": n, "events": [...]}``
(the last LIVE_EVENTS events of the read, as ``Event.to_dict`` with the
job's ``name`` (JobNames), so a burst
of thousands of events is one small message). A comment line is sent each
second nothing happens, so a closed tab is noticed within a second. A
response ends after LIFETIME seconds (so a stopping dashboard is never held
up by an open tab); the browser's EventSource then reconnects with
``Last-Event-ID`` and goes on exactly after it (a ``missed`` event says when
the stream was trimmed in between). It is a read, like the rest of the API:
no token, the same Host check and security headers. The open streams of a
queue share its event bell (echomq.flows.events: one blocking read between
them), so many open tabs leave the queue's connections to the rest of the API.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import AsyncIterator

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from echomq.events import Event, check_event_id
from echomq.queue import Queue
from echomq.web.api import queue_of

#: events of one read sent to the page (the count says how many there were).
LIVE_EVENTS = 50
#: seconds one response streams before the browser is asked to reconnect.
LIFETIME = 30.0
#: job names one stream keeps (see JobNames).
NAMES_KEPT = 10_000
#: milliseconds the browser waits before it reconnects.
RETRY_MS = 500


class JobNames:
    """The names of the jobs the events name, read once per job (a job's name never
    changes): one read-only call per message for the ids not seen yet, the last
    NAMES_KEPT kept."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue
        self.known: OrderedDict[str, str | None] = OrderedDict()

    async def of(self, events: list[Event]) -> dict[str, str | None]:
        wanted = {e.job_id for e in events if e.job_id}
        missing = [job_id for job_id in wanted if job_id not in self.known]
        if missing:
            self.known.update(await self.queue.names(missing))
            while len(self.known) > NAMES_KEPT:
                self.known.popitem(last=False)
        return {job_id: self.known.get(job_id) for job_id in wanted}


async def _message(events: list[Event], names: JobNames) -> bytes:
    shown = events[-LIVE_EVENTS:]
    named = await names.of(shown)
    rows = [{**e.to_dict(), "name": named.get(e.job_id or "")} for e in shown]
    data = orjson.dumps({"count": len(events), "events": rows})
    return b"id: " + events[-1].id.encode() + b"\nevent: events\ndata: " + data + b"\n\n"


async def _stream(pages: AsyncIterator[list[Event]], names: JobNames) -> AsyncIterator[bytes]:
    yield f"retry: {RETRY_MS}\n\n".encode()
    ends = time.monotonic() + LIFETIME
    try:
        async for events in pages:
            yield await _message(events, names) if events else b": idle\n\n"
            if time.monotonic() >= ends:
                return
    finally:
        await pages.aclose()  # type: ignore[attr-defined]


async def queue_events(request: Request) -> Response:
    queue = await queue_of(request)
    after = request.headers.get("last-event-id") or request.query_params.get("after")
    if after is not None:
        check_event_id(after)
    pages = queue.event_pages(after)
    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    stream = _stream(pages, JobNames(queue))
    return StreamingResponse(stream, media_type="text/event-stream", headers=headers)
