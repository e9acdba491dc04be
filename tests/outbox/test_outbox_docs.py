"""docs/outbox.md as written: its DDL is what create_table runs, its Alembic
migration makes (and drops) the tables, its Starlette app writes the order and
its job in one transaction (a refused order leaves neither)."""

from __future__ import annotations

import asyncio
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from echomq.connection import URL_ENV
from echomq.errors import OutboxError
from echomq.outbox import Outbox, OutboxTables, Relay
from servers import ServerFactory

DOC = Path(__file__).resolve().parents[2] / "docs" / "outbox.md"


def block(marker: str, language: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    pattern = rf"<!-- {re.escape(marker)} -->\n```{language}\n(?P<body>.*?)\n```"
    match = re.search(pattern, text, re.S)
    assert match is not None, f"docs/outbox.md lost its {marker!r} block"
    return match["body"]


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("name", "dialect"), [("postgresql", postgresql), ("sqlite", sqlite)])
def test_the_ddl_in_the_docs_is_what_create_table_runs(name: str, dialect: ModuleType) -> None:
    assert block(f"ddl: {name}", "sql") == OutboxTables().ddl(dialect.dialect())


def test_the_alembic_migration_makes_and_drops_the_tables(db_url: str, tmp_path: Path) -> None:
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    path = tmp_path / "outbox_migration.py"
    path.write_text(block("alembic: migration", "python") + "\n", encoding="utf-8")
    engine = sa.create_engine(db_url)
    ob = Outbox(engine)
    try:
        with pytest.raises(OutboxError):
            ob.check_table()
        with engine.begin() as conn, Operations.context(MigrationContext.configure(conn)):
            load(path, "outbox_migration").upgrade()
        ob.check_table()  # both tables, every column
        with engine.begin() as conn:
            ob.add(conn, "q", "job", 1)
        with engine.begin() as conn, Operations.context(MigrationContext.configure(conn)):
            load(path, "outbox_migration").downgrade()
        assert not sa.inspect(engine).has_table("echomq_outbox")
    finally:
        engine.dispose()


def test_the_web_app_writes_order_and_job_in_one_transaction(
    pg_url: str, server_factory: ServerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = server_factory("valkey")
    monkeypatch.setenv(URL_ENV, server.url)
    monkeypatch.setenv("DATABASE_URL", pg_url)
    (tmp_path / "app.py").write_text(block("outbox-web: app.py", "python") + "\n", encoding="utf-8")
    web = load(tmp_path / "app.py", "outbox_web_app")
    setup = sa.create_engine(pg_url)
    web.metadata.create_all(setup)
    Outbox(setup).create_table()
    relay = Relay(Outbox(setup), server.url)

    async def scenario() -> list[httpx.Response]:
        async with web.app.router.lifespan_context(web.app):  # as the ASGI server runs it
            transport = httpx.ASGITransport(app=web.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://web") as http:
                answers = [
                    await http.post("/orders", json={"total": 30}),
                    await http.post("/orders", json={"total": 0}),
                    await http.get("/mail/waiting"),
                ]
                assert await asyncio.to_thread(relay.relay_once) == 1
                return [*answers, await http.get("/mail/waiting")]

    placed, refused, before, after = asyncio.run(scenario())
    relay.close()
    with setup.connect() as conn:
        totals = conn.execute(sa.select(web.orders.c.total)).scalars().all()
    setup.dispose()
    assert placed.status_code == 201 and refused.status_code == 400
    assert totals == [30]  # the refused order rolled back, and its job with it
    assert (before.json(), after.json()) == ({"waiting": 0}, {"waiting": 1})
