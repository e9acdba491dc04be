"""Outbox fixtures: a database of each kind (SQLite file, the private PostgreSQL)
with the outbox table, and the session's private Valkey."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "sqlalchemy", reason="missing prerequisite: SQLAlchemy (pip install -e '.[dev]')"
)

from echomq import SyncQueue
from echomq.outbox import Outbox, Relay
from servers import ServerPool, require_server

DATABASES = ("sqlite", "postgresql")


@pytest.fixture(scope="session")
def valkey_url(_server_pool: ServerPool) -> str:
    """The session's private Valkey (the outbox's target in these tests)."""
    require_server("valkey")
    return _server_pool.get("valkey").url


@pytest.fixture(params=DATABASES)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database of each kind: a SQLite file, or one on the private PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'app.db'}"
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
def outbox(db_url: str) -> Iterator[Outbox]:
    """An Outbox with its tables created; its engine disposed after the test."""
    ob = Outbox(db_url)
    ob.create_table()
    try:
        yield ob
    finally:
        ob.engine.dispose()


@pytest.fixture
def make_relay(outbox: Outbox, valkey_url: str) -> Iterator[Callable[..., Relay]]:
    made: list[Relay] = []

    def make(**options: Any) -> Relay:
        relay = Relay(outbox, valkey_url, **options)
        made.append(relay)
        return relay

    yield make
    for relay in made:
        relay.close()


@pytest.fixture
def make_queue(valkey_url: str) -> Iterator[Callable[[str], SyncQueue]]:
    made: list[SyncQueue] = []

    def make(name: str) -> SyncQueue:
        q = SyncQueue(name, valkey_url)
        made.append(q)
        return q

    yield make
    for q in made:
        q.close()
