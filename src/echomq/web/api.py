"""The JSON API behind the page, and ``/metrics``.

Reads (GET) are open; actions (POST) go through :class:`ActionGuard` and the
audit log. Every queue operation is one of ``Queue``'s own calls, so the
dashboard changes nothing that a program using echomq could not.

    GET  /api/info                          mode, refresh interval, server, eviction
    GET  /api/queues                        every shown queue: counts, totals, rate
    GET  /api/queues/{q}                    one queue: counts, ring, weights, tiers, throughput
    GET  /api/queues/{q}/jobs?state=…       a page of job summaries (waiting: one lane, ?group=;
                                            ?cursor= pages by cursor, "" the first page)
    GET  /api/queues/{q}/find?tags=k=v …    the jobs carrying every tag (&state=, &name=, &cursor=)
    GET  /api/queues/{q}/jobs/{id}          one job, every field, the score's bits, its events
                                            the stream still holds; a long field (data,
                                            result, …) as its first 64 KiB
    GET  /api/queues/{q}/jobs/{id}/fields/{f}  that field whole, as a download
    GET  /api/queues/{q}/batches?cursor=…   a page of the queue's batches, newest first
    GET  /api/queues/{q}/batches/{id}       one batch: counts, state, progress, callbacks
                                            (their jobs' names and states), its events
    GET  /api/score?tier=&counter= | ?score=  the score codec
    GET  /api/audit                         recent actions, newest first
    POST /api/auth                          {} (200 if the token is right)
    POST /api/queues/{q}/weights            {"group": str|null, "weight": int}
    POST /api/queues/{q}/lanes/unthrottle   {"group": str|null}: lift a throttle in force
    POST /api/queues/{q}/pause | /resume    {}
    POST /api/queues/{q}/dead/retry         {"ids": [...]} or {"all": true}
    POST /api/queues/{q}/dead/purge         {"ids": [...]} or {"all": true}
    POST /api/queues/{q}/drop               {"confirm": q}: delete the queue for good
    POST /api/queues/{q}/found/{retry|remove|cancel}  {"tags", "state", "name", "cursor"}: one
                                            step of a bulk action on a search, with how far
                                            along it is (echomq.web.bulk)
    POST /api/queues/{q}/batches/cancel     {"batch": id}: cancel_batch
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from echomq.batches import BATCH_PAGE, MAX_BATCH_PAGE
from echomq.engine import PREVIEW_BYTES
from echomq.errors import InvalidOption, InvalidState, JobNotFound
from echomq.job import LISTED_STATES, State
from echomq.metrics import KEPT_MINUTES
from echomq.queue import Queue
from echomq.score import encode
from echomq.settings import DEFAULT_AGE_STEP
from echomq.tags import JobPage, parse_tag_args
from echomq.web import bulk, metrics, views
from echomq.web.bulk import act_on_found
from echomq.web.guard import ActionGuard, ActionRefused, AuditLog, audit_text
from echomq.web.jobmetrics import JobHistogramCollector, JobHistograms
from echomq.web.metrics import DEFAULT_LANE_LABEL, ClaimLatency
from echomq.web.registry import QueueRegistry, gather_bounded
from echomq.web.sampler import Throughput

#: most lanes and tiers the queue view reads per refresh.
LANE_LIMIT = 200
TIER_LANES = 50
TIER_LIMIT = 16
#: job list pages: rows per page by default and at most (summaries only, never payloads).
PAGE_SIZE = 50
MAX_PAGE = 200
#: the longest ``score`` a request may give (2^53 has 16 digits).
MAX_SCORE_DIGITS = 20
#: most dead jobs one "retry all" / "purge all" touches.
BULK_LIMIT = 10_000
JOB_STATES = LISTED_STATES
#: the inspector shows each long field's first bytes (the rest is a download).
INSPECTOR_PREVIEW = PREVIEW_BYTES
#: most whole-field downloads running at once (each holds its field in memory while
#: it is sent, up to the queue's max_payload: 64 MiB); more answer 503 at once.
MAX_DOWNLOADS = 2
#: a download is sent in pieces of this many characters.
DOWNLOAD_CHUNK = 1 << 20
#: a batch's callback jobs are read for their name and state: their long fields are cut.
CALLBACK_PREVIEW = 64


@dataclass(slots=True)
class DownloadSlots:
    """How many whole-field downloads are running, to bound the memory they hold."""

    running: int = 0


@dataclass(slots=True)
class Dashboard:
    """Everything the handlers share (``app.state.dashboard``)."""

    server: str
    registry: QueueRegistry
    throughput: Throughput
    latency: ClaimLatency
    guard: ActionGuard
    audit: AuditLog
    interval: float
    #: the server's maxmemory-policy if it may evict keys (echomq.sending.eviction)
    eviction_policy: str | None = None
    downloads: DownloadSlots = field(default_factory=DownloadSlots)
    #: the run and wait histograms of /metrics, added up minute by minute
    job_histograms: JobHistograms = field(default_factory=JobHistograms)


class JSONResponse(Response):
    """JSON by orjson (datetimes as ISO 8601), never cached."""

    media_type = "application/json"

    def __init__(self, content: Any, status_code: int = 200) -> None:
        super().__init__(content, status_code, headers={"Cache-Control": "no-store"})

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_NON_STR_KEYS)


def dashboard_of(request: Request) -> Dashboard:
    dashboard: Dashboard = request.app.state.dashboard
    return dashboard


def int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    """A whole-number query parameter in low … high, else InvalidOption naming it."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        message = f"{name} {raw!r} is not a whole number; allowed {low} … {high}"
        raise InvalidOption(message) from None
    if not low <= value <= high:
        raise InvalidOption(f"{name} {value} is out of range; allowed {low} … {high}")
    return value


def group_param(raw: Any) -> str | None:
    """A lane in a request: null, "" or "(default)" mean the default lane."""
    if raw is None or raw in ("", DEFAULT_LANE_LABEL):
        return None
    if not isinstance(raw, str):
        raise InvalidOption(f"group {raw!r} must be a string or null")
    return raw


async def queue_of(request: Request) -> Queue:
    return await dashboard_of(request).registry.get(request.path_params["queue"])


# -- reads --------------------------------------------------------------------
async def info(request: Request) -> Response:
    d = dashboard_of(request)
    return JSONResponse(
        {
            "actions": d.guard.enabled,
            "interval": d.interval,
            "server": d.server,
            "queues": d.registry.names(),
            # the server's maxmemory-policy when it may evict keys (the page's banner)
            "eviction": d.eviction_policy,
        }
    )


async def list_queues(request: Request) -> Response:
    d = dashboard_of(request)
    queues = [await d.registry.get(name) for name in d.registry.names()]
    all_stats = await gather_bounded([partial(q.stats, lane_limit=1) for q in queues])
    return JSONResponse([views.queue_summary(s, d.throughput.rates(s.queue)) for s in all_stats])


async def queue_detail(request: Request) -> Response:
    d = dashboard_of(request)
    queue = await queue_of(request)
    stats, lanes, weights, tiers, schedules = await asyncio.gather(
        queue.stats(lane_limit=1),
        queue.lanes(LANE_LIMIT),
        queue.weights(),
        queue.waiting_tiers(TIER_LANES, TIER_LIMIT),
        queue.schedules(),
    )
    rates = d.throughput.rates(queue.name)
    return JSONResponse(
        {
            **views.queue_summary(stats, rates),
            "lanes": views.lanes_view(lanes),
            "weights": views.weights_view(weights),
            "tiers": views.tiers_view(tiers),
            "schedules": [views.schedule_view(s) for s in schedules],
            "throughput": rates,
            "interval": d.interval,
        }
    )


async def list_jobs(request: Request) -> Response:
    queue = await queue_of(request)
    state = request.query_params.get("state", "waiting")
    if state not in JOB_STATES:
        raise InvalidOption(f"state {state!r} is not one of {', '.join(JOB_STATES)}")
    group = group_param(request.query_params.get("group")) if state == "waiting" else None
    count = int_param(request, "count", PAGE_SIZE, 1, MAX_PAGE)
    cursor = request.query_params.get("cursor")
    if cursor is not None:  # the page's lists: a job that moves is not shown twice in a row
        page = await queue.jobs(state, cursor=cursor, count=count, group=group, summary=True)
        return page_response(page, state=state, count=count)
    offset = int_param(request, "offset", 0, 0, 10**9)
    # one row more than asked tells whether a next page exists
    jobs = await queue.jobs(state, offset=offset, count=count + 1, group=group, summary=True)
    return JSONResponse(
        {
            "state": state,
            "offset": offset,
            "count": count,
            "more": len(jobs) > count,
            "jobs": [views.job_summary(j) for j in jobs[:count]],
        }
    )


async def find_jobs(request: Request) -> Response:
    queue = await queue_of(request)
    params = request.query_params
    tags = parse_tag_args(params.get("tags", "").split())
    count = int_param(request, "count", PAGE_SIZE, 1, MAX_PAGE)
    page = await queue.find(
        tags,
        state=params.get("state") or None,
        name=params.get("name") or None,
        cursor=params.get("cursor") or None,
        count=count,
        summary=True,
    )
    return page_response(page, tags=tags, count=count)


def page_response(page: JobPage, **about: Any) -> Response:
    """A cursor page: its job summaries, the cursor after it (null: the last page)."""
    return JSONResponse(
        {
            **about,
            "cursor": page.cursor,
            "more": page.cursor is not None,
            "jobs": [views.job_summary(j) for j in page.jobs],
        }
    )


async def job_detail(request: Request) -> Response:
    queue = await queue_of(request)
    job_id = request.path_params["job_id"]
    # a long field's first bytes only: a 64 MiB payload never crosses the wire here
    preview = await queue.peek(job_id, INSPECTOR_PREVIEW)
    if preview is None:
        raise JobNotFound(f"no job {job_id!r} in queue {queue.name!r} (never added, or pruned)")
    try:
        dependents: dict[str, Any] | None = (await queue.dependents(job_id)).to_dict()
    except JobNotFound:  # removed since: its fields are shown as read
        dependents = None
    try:
        log = [views.log_line(line) for line in await queue.logs(job_id)]
    except JobNotFound:  # removed since: its fields are shown as read
        log = []
    download = f"/api/queues/{queue.name}/jobs/{job_id}/fields/"
    timeline = [event.to_dict() for event in await queue.job_events(job_id)]
    detail = {
        **views.job_detail(preview, download),
        "dependents": dependents,
        "events": timeline,
        "position": None,
        "log": log,
    }
    if preview.job.state is State.WAITING:
        # where it stands (docs/ordering.md "Where a job stands"); a job claimed
        # or removed since it was read has none
        with contextlib.suppress(InvalidState, JobNotFound):
            detail["position"] = (await queue.position(job_id)).to_dict()
    stats = await queue.stats(lane_limit=1)
    if stats.ordering == "aged":
        step = (await queue.settings()).get("age_step", DEFAULT_AGE_STEP)
        detail["aged_key"] = views.aged_view(preview.job, round(step * 1000))
    return JSONResponse(detail)


async def job_metrics(request: Request) -> Response:
    queue = await queue_of(request)
    minutes = int_param(request, "minutes", 60, 1, KEPT_MINUTES)
    points = await queue.metrics(minutes=minutes)
    return JSONResponse(views.metrics_view(points, minutes))


async def list_workers(request: Request) -> Response:
    queue = await queue_of(request)
    return JSONResponse([views.worker_view(w) for w in await queue.workers()])


async def _sent_whole(text: str, slots: DownloadSlots) -> AsyncIterator[bytes]:
    """The field in pieces (never a second whole copy); its slot is free once sent
    (or the client has gone)."""
    try:
        for start in range(0, len(text), DOWNLOAD_CHUNK):
            yield text[start : start + DOWNLOAD_CHUNK].encode()
    finally:
        slots.running -= 1


async def job_field(request: Request) -> Response:
    """One long field of a job whole (what the inspector cut), as a file: JSON for
    data, result, progress, headers, dependencies; text for error and traceback.
    At most MAX_DOWNLOADS run at once (503 beyond); each reads its field once (a hash
    field cannot be read in ranges) and sends it in pieces."""
    d = dashboard_of(request)
    queue = await queue_of(request)
    job_id, name = request.path_params["job_id"], request.path_params["field"]
    slots = d.downloads
    if slots.running >= MAX_DOWNLOADS:
        return JSONResponse(
            {
                "error": f"{slots.running} downloads are running (at most {MAX_DOWNLOADS} "
                "at once); try again when one has finished",
                "kind": "Busy",
            },
            status_code=503,
        )
    slots.running += 1  # held until the field is sent (_sent_whole)
    try:
        text = await queue.read_field(job_id, name)
    except BaseException:
        slots.running -= 1
        raise
    if text is None:
        slots.running -= 1
        raise JobNotFound(
            f"no field {audit_text(name, 40)} in job {audit_text(job_id, 40)} of queue "
            f"{queue.name!r} (no such job, or the field is empty)"
        )
    plain = name in ("error", "traceback")
    return StreamingResponse(
        _sent_whole(text, slots),
        media_type="text/plain; charset=utf-8" if plain else "application/json",
        headers={
            "Cache-Control": "no-store",
            # only a well-formed job id finds a job: the file name is safe as written
            "Content-Disposition": (
                f'attachment; filename="{job_id}-{name}.{"txt" if plain else "json"}"'
            ),
        },
    )


async def score(request: Request) -> Response:
    if "score" in request.query_params:
        raw = request.query_params["score"]
        # isdigit() alone accepts "²" and other digits int() refuses
        if not (raw.isascii() and raw.isdigit()) or len(raw) > MAX_SCORE_DIGITS:
            raise InvalidOption(
                f"score {audit_text(raw, 40)} is not a whole number of at most "
                f"{MAX_SCORE_DIGITS} digits; allowed 0 … {2**53 - 1}"
            )
        return JSONResponse(views.score_view(int(raw)))
    tier = int_param(request, "tier", 0, 0, 2**31)
    counter = int_param(request, "counter", 0, 0, 2**40)
    return JSONResponse(views.score_view(encode(tier, counter)))


async def audit(request: Request) -> Response:
    return JSONResponse(dashboard_of(request).audit.entries())


async def prometheus(request: Request) -> Response:
    d = dashboard_of(request)
    queues = [await d.registry.get(name) for name in d.registry.names()]
    snapshot = await gather_bounded([partial(q.stats, lane_limit=LANE_LIMIT) for q in queues])
    lanes = await gather_bounded([partial(q.lanes, LANE_LIMIT) for q in queues])
    histograms = d.job_histograms
    reads = [partial(q.metrics, minutes=histograms.minutes_to_read(q.name)) for q in queues]
    for q, points in zip(queues, await gather_bounded(reads), strict=True):
        histograms.update(q.name, points)
    waits = [
        partial(q.oldest_waiting, list(s.lanes)[:LANE_LIMIT])
        for q, s in zip(queues, snapshot, strict=True)
    ]
    oldest = {
        q.name: {metrics.lane_label(group): seconds for group, seconds in found.items()}
        for q, found in zip(queues, await gather_bounded(waits), strict=True)
    }
    jobs = JobHistogramCollector(histograms, oldest)
    body = metrics.render(snapshot, d.latency, lanes, jobs)
    return Response(
        body,
        media_type="text/plain; version=0.0.4; charset=utf-8",
        headers={"Cache-Control": "no-store"},
    )


# -- actions --------------------------------------------------------------------
Perform = Callable[[Queue, dict[str, Any]], Awaitable[dict[str, Any]]]


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = orjson.loads(await request.body() or b"{}")
    except orjson.JSONDecodeError as exc:
        raise InvalidOption(f"the request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise InvalidOption("the request body must be a JSON object")
    return body


def action(name: str, perform: Perform) -> Callable[[Request], Awaitable[Response]]:
    """A POST handler: guard, perform, and log the outcome whatever it is."""

    async def handler(request: Request) -> Response:
        d = dashboard_of(request)
        queue_name = request.path_params["queue"]
        try:
            d.guard.check(request)
        except ActionRefused as exc:
            outcome = f"refused ({exc.status}): {exc.message}"
            d.audit.record(request, queue_name, name, outcome, refused=True)
            raise
        try:
            result = await perform(await queue_of(request), await _body(request))
        except Exception as exc:
            d.audit.record(request, queue_name, name, f"error: {exc}")
            raise
        d.audit.record(request, queue_name, name, "ok", result)
        return JSONResponse(result)

    return handler


async def check_token(request: Request) -> Response:
    """Lets the page tell a wrong token at once, before any action (``POST /api/auth``)."""
    d = dashboard_of(request)
    try:
        d.guard.check(request)
    except ActionRefused as exc:
        outcome = f"refused ({exc.status}): {exc.message}"
        d.audit.record(request, "-", "unlock", outcome, refused=True)
        raise
    return JSONResponse({"ok": True})


async def set_weight(queue: Queue, body: dict[str, Any]) -> dict[str, Any]:
    group = group_param(body.get("group"))
    weight: Any = body.get("weight")  # the engine checks it: an int in 1 … 1000
    before = (await queue.weights()).get(group, 1)
    await queue.set_weight(group, weight)
    return {"group": group, "weight": weight, "was": before}


async def unthrottle(queue: Queue, body: dict[str, Any]) -> dict[str, Any]:
    group = group_param(body.get("group"))
    await queue.set_lane(group, throttle=None)
    return {"group": group, "throttled_until": None}


async def pause(queue: Queue, body: dict[str, Any]) -> dict[str, Any]:
    await queue.pause()
    return {"paused": True}


async def resume(queue: Queue, body: dict[str, Any]) -> dict[str, Any]:
    await queue.resume()
    return {"paused": False}


def _dead_ids(body: dict[str, Any]) -> list[str] | None:
    """The ids of a retry/purge body, or None for "all" (up to BULK_LIMIT)."""
    if body.get("all") is True:
        return None
    ids = body.get("ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise InvalidOption('give "ids": a non-empty list of job ids, or "all": true')
    return ids


async def retry_dead(queue: Queue, body: dict[str, Any]) -> dict[str, Any]:
    retried = await queue.retry_dead(_dead_ids(body), limit=BULK_LIMIT)
    return {"retried": retried}


async def purge_dead(queue: Queue, body: dict[str, Any]) -> dict[str, Any]:
    purged = await queue.purge_dead(_dead_ids(body), limit=BULK_LIMIT)
    return {"purged": purged}


async def drop(queue: Queue, body: dict[str, Any]) -> dict[str, Any]:
    """Delete the queue for good (Queue.drop: adds are refused while it runs); the
    body must name the queue again, so a stray request drops nothing."""
    if body.get("confirm") != queue.name:
        raise InvalidOption('give "confirm": the name of the queue to drop')
    jobs = sum((await queue.stats()).counts.values())
    await queue.drop()
    return {"dropped": queue.name, "jobs": jobs}


async def list_batches(request: Request) -> Response:
    """A page of the queue's batches, newest first (``Queue.batches``: bounded work
    per call, so a page may be short and still carry a cursor)."""
    queue = await queue_of(request)
    count = int_param(request, "count", BATCH_PAGE, 1, MAX_BATCH_PAGE)
    page = await queue.batches(cursor=request.query_params.get("cursor") or None, count=count)
    return JSONResponse(
        {
            "count": count,
            "cursor": page.cursor,
            "more": page.cursor is not None,
            "batches": [views.batch_view(status) for status in page.batches],
        }
    )


async def batch_detail(request: Request) -> Response:
    """A batch's progress: counts by state, state, callbacks fired (``peek_batch``:
    never the callbacks' payloads); the fired callbacks' jobs (name and state,
    their fields cut short on the server) and the batch's events the queue's
    stream still holds."""
    queue = await queue_of(request)
    batch_id = request.path_params["batch_id"]
    status = await queue.peek_batch(batch_id)
    fired = [job_id for job_id in status.callbacks.values() if job_id]
    previews = await asyncio.gather(*(queue.peek(job_id, CALLBACK_PREVIEW) for job_id in fired))
    jobs = {job_id: p.job for job_id, p in zip(fired, previews, strict=True) if p is not None}
    events = await queue.job_events(batch_id)
    return JSONResponse(views.batch_detail(status, jobs, events))


async def cancel_batch(queue: Queue, body: dict[str, Any]) -> dict[str, Any]:
    batch_id = body.get("batch")
    if not isinstance(batch_id, str):
        raise InvalidOption(f"batch {batch_id!r:.80} must be a batch id (a string)")
    cancelled = await queue.cancel_batch(batch_id)
    return {"cancelled": cancelled, "batch": views.batch_view(await queue.peek_batch(batch_id))}


def routes() -> list[Route]:
    q = "/api/queues/{queue}"
    return [
        Route("/api/info", info),
        Route("/api/queues", list_queues),
        Route(q, queue_detail),
        Route(q + "/jobs", list_jobs),
        Route(q + "/find", find_jobs),
        Route(q + "/jobs/{job_id}", job_detail),
        Route(q + "/jobs/{job_id}/fields/{field}", job_field),
        Route(q + "/workers", list_workers),
        Route(q + "/metrics", job_metrics),
        Route(q + "/batches", list_batches),
        Route(q + "/batches/{batch_id}", batch_detail),
        Route("/api/score", score),
        Route("/api/audit", audit),
        Route("/metrics", prometheus),
        Route("/api/auth", check_token, methods=["POST"]),
        Route(q + "/weights", action("set_weight", set_weight), methods=["POST"]),
        Route(q + "/lanes/unthrottle", action("unthrottle", unthrottle), methods=["POST"]),
        Route(q + "/pause", action("pause", pause), methods=["POST"]),
        Route(q + "/resume", action("resume", resume), methods=["POST"]),
        Route(q + "/dead/retry", action("retry_dead", retry_dead), methods=["POST"]),
        Route(q + "/dead/purge", action("purge_dead", purge_dead), methods=["POST"]),
        Route(q + "/drop", action("drop", drop), methods=["POST"]),
        *(
            Route(
                q + f"/found/{kind}",
                action(f"{kind} found", partial(act_on_found, kind)),
                methods=["POST"],
            )
            for kind in bulk.KINDS
        ),
        Route(q + "/batches/cancel", action("cancel_batch", cancel_batch), methods=["POST"]),
    ]
