"""The dashboard as a Starlette app: one page, its JSON API, and ``/metrics``.

``create_app(url, queues=None, token=None)`` builds it; ``echomq dashboard``
serves it with uvicorn on 127.0.0.1 by default. Without a token it is
read-only. The page is static (plain JS, no build step): it reads the API and
updates live from the queue's event stream (server-sent events, echomq.web.live).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import redis
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from echomq.errors import (
    BatchNotFound,
    EchoMQError,
    InvalidInput,
    JobNotFound,
    PoolTimeout,
    ServerError,
)
from echomq.keys import check_name
from echomq.queue import Queue
from echomq.urls import redact_url, resolve_url
from echomq.web.api import Dashboard, JSONResponse, routes
from echomq.web.guard import ActionGuard, ActionRefused, AuditLog
from echomq.web.live import queue_events
from echomq.web.metrics import ClaimLatency
from echomq.web.registry import QueueRegistry
from echomq.web.sampler import Sampler, Throughput

STATIC = Path(__file__).parent / "static"
#: the queue whose client the app holds (shared by every queue it shows): the
#: name only picks the queue whose stored format its first use checks.
HOME_QUEUE = "default"

SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        b"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


class SecurityHeaders:
    """Adds the headers that keep the page from being framed or fed foreign scripts."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def redact(url: str) -> str:
    """``url`` without its password, for showing on the page."""
    return redact_url(url)


def _error(status: int, exc: BaseException) -> Response:
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return JSONResponse({"error": message, "kind": type(exc).__name__}, status_code=status)


async def _on_echomq_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, InvalidInput):
        return _error(400, exc)
    if isinstance(exc, JobNotFound | BatchNotFound):
        return _error(404, exc)
    if isinstance(exc, ServerError | PoolTimeout):  # unreachable, or every connection busy
        return _error(503, exc)
    return _error(409, exc)


async def _on_refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ActionRefused)
    return _error(exc.status, exc)


async def _on_redis_error(request: Request, exc: Exception) -> Response:
    return JSONResponse(
        {
            "error": f"cannot reach the server: {redact_url(str(exc))}",
            "kind": "ServerError",
        },
        status_code=503,
    )


async def index(request: Request) -> Response:
    return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})


def create_app(
    url: str | None,
    queues: Sequence[str] | None = None,
    token: str | None = None,
    *,
    interval: float = 2.0,
    history: float = 600.0,
    allowed_hosts: Sequence[str] | None = None,
) -> Starlette:
    """The dashboard app for the server at ``url`` (None: ECHOMQ_URL, else embedded).

    ``queues``: the queues to show (default: every queue found on the server).
    ``token``: enables actions for requests that carry it; None = read-only.
    ``interval``: seconds between throughput samples (and the page's refresh
    while its event stream is down; with it up, events trigger the refresh).
    ``history``: seconds of throughput kept. ``allowed_hosts``: Host header
    names accepted (None: any; the CLI passes the loopback names when bound
    to loopback, against DNS rebinding).
    """
    guard, audit = ActionGuard(token), AuditLog(secrets=[token] if token else [])
    registry_names = [check_name("queue", q) for q in queues] if queues else None

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        resolved = await asyncio.to_thread(resolve_url, url)
        home = Queue(HOME_QUEUE, resolved)  # the one client every shown queue shares
        registry = QueueRegistry(home, registry_names)
        await registry.refresh()  # the page lists the queues from its first request
        throughput, latency = Throughput(history, interval), ClaimLatency()
        app.state.dashboard = Dashboard(
            redact(resolved),
            registry,
            throughput,
            latency,
            guard,
            audit,
            interval,
            home.eviction_policy,  # read at the registry's first scan (its first connect)
        )
        sampler = asyncio.create_task(Sampler(registry, throughput, latency, interval).run())
        try:
            yield
        finally:
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
            await home.close()

    middleware = [Middleware(SecurityHeaders)]
    if allowed_hosts:
        middleware.insert(0, Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts)))
    return Starlette(
        routes=[
            Route("/", index),
            *routes(),
            Route("/api/queues/{queue}/events", queue_events),
            Mount("/static", StaticFiles(directory=STATIC)),
        ],
        middleware=middleware,
        exception_handlers={
            EchoMQError: _on_echomq_error,
            ActionRefused: _on_refused,
            redis.RedisError: _on_redis_error,
        },
        lifespan=lifespan,
    )
