"""The outbox on SQLite and on a real PostgreSQL: a committed row is one job, a
rolled-back row none; options travel and are checked at write; row order per
queue; rows the queue refuses go to the dead-row table; two relays at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from echomq import SyncQueue, ids
from echomq.errors import InvalidOption, InvalidPriority, OutboxError, PayloadError
from echomq.outbox import Outbox, Relay, row_key

DEADLINE = 10.0


def claim_all(q: SyncQueue, n: int = 1000) -> list[object]:
    """The data of every waiting job, in the order they are served."""
    return [job.data for job in q.claim(n)]


def rows_left(ob: Outbox) -> int:
    with ob.engine.connect() as conn:
        return int(
            conn.execute(sa.select(sa.func.count()).select_from(ob.tables.rows)).scalar_one()
        )


def dead_rows(ob: Outbox) -> list[sa.Row[tuple[int, str, str]]]:
    dead = ob.tables.dead
    with ob.engine.connect() as conn:
        return list(
            conn.execute(sa.select(dead.c.id, dead.c.name, dead.c.error).order_by(dead.c.id))
        )


def test_committed_row_is_one_job_with_its_options(
    outbox: Outbox,
    make_relay: Callable[..., Relay],
    make_queue: Callable[[str], SyncQueue],
    queue_name: str,
) -> None:
    q = make_queue(queue_name)
    run_at = datetime.now(UTC) + timedelta(hours=1)
    with outbox.engine.begin() as conn:
        row = outbox.add(
            conn,
            queue_name,
            "receipt",
            {"order": 7},
            priority=3,
            group="acme",
            headers={"trace": "t1"},
            tags={"customer": "42"},
            max_attempts=5,
        )
        later = outbox.add(conn, queue_name, "reminder", None, run_at=run_at)
    assert make_relay().relay_once() == 2
    assert rows_left(outbox) == 0
    [job] = q.claim(10)
    assert (job.name, job.data, job.priority, job.group) == ("receipt", {"order": 7}, 3, "acme")
    assert job.headers == {"trace": "t1"}
    assert job.tags == {"customer": "42"}
    assert job.max_attempts == 5
    assert job.key == row_key(outbox.table, row)
    [delayed] = q.jobs("delayed")
    assert delayed.key == row_key(outbox.table, later)
    assert delayed.run_at is not None and abs((delayed.run_at - run_at).total_seconds()) < 1.0


def test_rolled_back_row_is_never_a_job(
    outbox: Outbox,
    make_relay: Callable[..., Relay],
    make_queue: Callable[[str], SyncQueue],
    queue_name: str,
) -> None:
    q = make_queue(queue_name)
    with pytest.raises(RuntimeError), outbox.engine.begin() as conn:
        outbox.add(conn, queue_name, "receipt", {"order": 1})
        raise RuntimeError("the request failed")
    with outbox.engine.begin() as conn:
        outbox.add(conn, queue_name, "receipt", {"order": 2})
    assert make_relay().relay_once() == 1
    assert claim_all(q) == [{"order": 2}]


def test_session_and_add_many_rows_keep_order_per_queue(
    outbox: Outbox,
    make_relay: Callable[..., Relay],
    make_queue: Callable[[str], SyncQueue],
    queue_name: str,
) -> None:
    from sqlalchemy.orm import Session

    other = f"{queue_name}-b"
    q, q2 = make_queue(queue_name), make_queue(other)
    for start in range(0, 60, 20):
        with Session(outbox.engine) as session, session.begin():
            for i in range(start, start + 20):
                outbox.add(session, queue_name if i % 3 else other, "step", i)
    assert make_relay(batch=7).relay_once() == 60
    assert claim_all(q) == [i for i in range(60) if i % 3]
    assert claim_all(q2) == [i for i in range(60) if not i % 3]


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"priority": -1}, InvalidPriority),
        ({"colour": "red"}, InvalidOption),
        ({"delay": 1, "run_at": datetime.now(UTC)}, InvalidOption),
        ({"durable": "yes"}, InvalidOption),
        ({"tags": {"Bad Key": "x"}}, InvalidOption),
    ],
)
def test_bad_option_fails_the_callers_statement(
    outbox: Outbox, queue_name: str, options: dict[str, object], error: type[Exception]
) -> None:
    with outbox.engine.begin() as conn:
        with pytest.raises(error):
            outbox.add(conn, queue_name, "receipt", {}, **options)  # type: ignore[arg-type]
        with pytest.raises(PayloadError):
            outbox.add(conn, queue_name, "receipt", {"x": float("nan")})
        with pytest.raises(PayloadError, match="limit"):
            Outbox(outbox.engine, max_payload=1024).add(conn, queue_name, "r", "x" * 2000)
    assert rows_left(outbox) == 0


def _raw_row(ob: Outbox, queue: str, name: str, data: str, options: str = "") -> int:
    """A row written around Outbox.add's checks (as a hand-written INSERT would)."""
    rows = ob.tables.rows
    with ob.engine.begin() as conn:
        inserted = conn.execute(
            sa.insert(rows)
            .values(queue=queue, name=name, data=data, options=options)
            .returning(rows.c.id)
        )
        return int(inserted.scalar_one())


def test_rows_refused_for_good_go_to_the_dead_table_and_block_nothing(
    outbox: Outbox,
    make_relay: Callable[..., Relay],
    make_queue: Callable[[str], SyncQueue],
    queue_name: str,
) -> None:
    q = make_queue(queue_name)
    with outbox.engine.begin() as conn:
        outbox.add(conn, queue_name, "ok", 1)
        outbox.add(conn, queue_name, "orphan", 2, depends_on=[ids.new_id()])
    huge = _raw_row(outbox, queue_name, "huge", '"' + "x" * (2 * 1024 * 1024) + '"')
    bad_options = _raw_row(outbox, queue_name, "bad", "3", '{"priority": -5}')
    _raw_row(outbox, queue_name, "ok", "4")
    relay = make_relay()
    assert relay.relay_once() == 5
    assert claim_all(q) == [1, 4]
    dead = dead_rows(outbox)
    assert [row.name for row in dead] == ["orphan", "huge", "bad"]
    assert "depends_on" in dead[0].error
    assert dead[1].id == huge and "limit" in dead[1].error
    assert dead[2].id == bad_options and "priority -5" in dead[2].error
    assert rows_left(outbox) == 0
    assert (relay.relayed, relay.dead) == (2, 3)


def test_a_row_added_before_a_crash_is_not_added_again(
    outbox: Outbox,
    make_relay: Callable[..., Relay],
    make_queue: Callable[[str], SyncQueue],
    queue_name: str,
) -> None:
    """The relay killed between the add and the delete: the rows are still there,
    the next relay adds them again and finds the same jobs (the row's key)."""
    q = make_queue(queue_name)
    with outbox.engine.begin() as conn:
        for i in range(5):
            outbox.add(conn, queue_name, "step", i)
    first = make_relay()
    with outbox.engine.connect() as conn:
        rows = list(conn.execute(sa.select(outbox.tables.rows).order_by(outbox.tables.rows.c.id)))
    assert first._add(queue_name, rows).added == [row.id for row in rows]  # added, never deleted
    assert make_relay().relay_once() == 5
    assert claim_all(q) == [0, 1, 2, 3, 4]


def test_two_relays_at_once_add_each_row_once_in_order(
    outbox: Outbox,
    make_relay: Callable[..., Relay],
    make_queue: Callable[[str], SyncQueue],
    queue_name: str,
) -> None:
    queues = [f"{queue_name}-{n}" for n in range(3)]
    stop = threading.Event()
    relays = [make_relay(batch=5, poll=0.05) for _ in range(2)]
    threads = [threading.Thread(target=r.run, args=(stop,), daemon=True) for r in relays]
    for t in threads:
        t.start()
    try:
        for i in range(300):
            with outbox.engine.begin() as conn:
                outbox.add(conn, queues[i % 3], "step", i)
        deadline = time.monotonic() + DEADLINE * 3
        while rows_left(outbox) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join(DEADLINE)
    assert rows_left(outbox) == 0
    for n, name in enumerate(queues):
        assert claim_all(make_queue(name)) == list(range(n, 300, 3))
    assert sum(r.relayed for r in relays) == 300


def test_missing_table_is_a_clear_error_naming_the_ddl(db_url: str, queue_name: str) -> None:
    ob = Outbox(db_url, table="no_such_outbox")
    try:
        with (
            pytest.raises(OutboxError, match="CREATE TABLE no_such_outbox"),
            ob.engine.begin() as conn,
        ):
            ob.add(conn, queue_name, "receipt", {})
        with pytest.raises(OutboxError, match="does not exist"):
            Relay(ob).run()
    finally:
        ob.engine.dispose()


def test_bad_table_name_and_database(tmp_path: object) -> None:
    with pytest.raises(OutboxError, match="table name"):
        Outbox("sqlite://", table="drop table;")
    with pytest.raises(OutboxError, match="PostgreSQL and SQLite"):
        Outbox("mysql://u@h/db")


def test_a_queue_in_a_newer_stored_format_sends_its_rows_to_the_dead_table(
    outbox: Outbox,
    make_relay: Callable[..., Relay],
    make_queue: Callable[[str], SyncQueue],
    queue_name: str,
    valkey_url: str,
) -> None:
    import redis

    from echomq import storage
    from echomq.keys import QueueKeys

    newer = f"{queue_name}-newer"
    with redis.Redis.from_url(valkey_url) as client:
        client.hset(QueueKeys(newer).meta, storage.FORMAT_FIELD, storage.FORMAT + 1)
    with outbox.engine.begin() as conn:
        outbox.add(conn, newer, "job", 1)
        outbox.add(conn, queue_name, "job", 2)
    assert make_relay().relay_once() == 2
    [dead] = dead_rows(outbox)
    assert f"is stored in format {storage.FORMAT + 1}" in dead.error
    assert claim_all(make_queue(queue_name)) == [2]  # the other queue's row went through


def test_import_echomq_imports_no_database_library() -> None:
    import subprocess
    import sys

    code = (
        "import sys, echomq, echomq.worker, echomq.cli\n"
        "loaded = {'sqlalchemy', 'django', 'psycopg'} & {m.split('.')[0] for m in sys.modules}\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_a_table_of_another_shape_is_a_clear_error(db_url: str, queue_name: str) -> None:
    engine = sa.create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE odd_outbox (id INTEGER PRIMARY KEY, queue TEXT)"))
    ob = Outbox(engine, table="odd_outbox")
    try:
        with pytest.raises(OutboxError, match="has no column"), engine.begin() as conn:
            ob.add(conn, queue_name, "receipt", {})
        with pytest.raises(OutboxError, match="name, data, options, created_at"):
            ob.check_table()
    finally:
        engine.dispose()
