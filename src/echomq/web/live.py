"""Live updates: a queue's event stream as server-sent events (docs/dashboard.md).

``GET /api/queues/{queue}/events`` answers ``text/event-stream``. Each read
of the queue's stream becomes one message of type ``events`` whose ``id`` is
the last event's id and whose data is ``{"count": n, "events": [...]}``
(the last LIVE_EVENTS events of the read, as ``Event.to_dict``, so a burst
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
from collections.abc import AsyncIterator

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from echomq.events import Event, check_event_id
from echomq.web.api import queue_of

#: events of one read sent to the page (the count says how many there were).
LIVE_EVENTS = 50
#: seconds one response streams before the browser is asked to reconnect.
LIFETIME = 30.0
#: milliseconds the browser waits before it reconnects.
RETRY_MS = 500


def _message(events: list[Event]) -> bytes:
    data = orjson.dumps(
        {"count": len(events), "events": [e.to_dict() for e in events[-LIVE_EVENTS:]]}
    )
    return b"id: " + events[-1].id.encode() + b"\nevent: events\ndata: " + data + b"\n\n"


async def _stream(pages: AsyncIterator[list[Event]]) -> AsyncIterator[bytes]:
    yield f"retry: {RETRY_MS}\n\n".encode()
    ends = time.monotonic() + LIFETIME
    try:
        async for events in pages:
            yield _message(events) if events else b": idle\n\n"
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
    return StreamingResponse(_stream(pages), media_type="text/event-stream", headers=headers)
