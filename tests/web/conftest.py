"""A real dashboard per test: uvicorn serving create_app() on a loopback port.

The server runs in a thread of the test process on a socket bound before it
starts (no port race) and talks to the session's private Valkey/Redis.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import anyio
import httpx
import pytest
import uvicorn

from echomq import SyncQueue
from echomq.web.app import create_app

START_TIMEOUT = 10.0

# anyio imports its file module on first use (a lazy attribute). Made in the
# server's thread while the test's thread compiles a module, that import went
# through pytest's assertion rewriting (ast.parse) in two threads at once,
# which CPython 3.11 can fail ("AST constructor recursion depth mismatch"):
# the page's FileResponse then broke off mid-response. Imported here, once,
# in the main thread.
_ = anyio.open_file


@dataclass
class Dashboard:
    """One running dashboard: its base url and an HTTP client on it."""

    base: str
    http: httpx.Client
    server: uvicorn.Server
    thread: threading.Thread

    def stop(self) -> None:
        self.http.close()
        self.server.should_exit = True
        self.thread.join(timeout=10)


StartDashboard = Callable[..., Dashboard]


@pytest.fixture
def start_dashboard() -> Iterator[StartDashboard]:
    """``start(url, queues=None, token=None, interval=0.3, allowed_hosts=None)`` → Dashboard."""
    running: list[Dashboard] = []

    def start(
        url: str,
        queues: Sequence[str] | None = None,
        token: str | None = None,
        interval: float = 0.3,
        allowed_hosts: Sequence[str] | None = None,
    ) -> Dashboard:
        app = create_app(url, queues, token, interval=interval, allowed_hosts=allowed_hosts)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the dashboard did not start")
            time.sleep(0.02)
        base = f"http://127.0.0.1:{port}"
        dashboard = Dashboard(base, httpx.Client(base_url=base, timeout=10), server, thread)
        running.append(dashboard)
        return dashboard

    yield start
    for dashboard in running:
        dashboard.stop()


@pytest.fixture
def sq(backend_url: str, queue_name: str) -> Iterator[SyncQueue]:
    q = SyncQueue(queue_name, backend_url)
    yield q
    q.close()
