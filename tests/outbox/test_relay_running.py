"""The relay as it runs: woken by LISTEN/NOTIFY on PostgreSQL, inside a Worker,
as ``echomq relay``, through an unreachable database; add_async on asyncio."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa

from echomq import Queue, SyncQueue, Worker
from echomq.outbox import Outbox, Relay
from postgres import PASSWORD

DEADLINE = 10.0
CLI = [sys.executable, "-m", "echomq.cli"]


def wait_for(condition: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.01)


def cli(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ECHOMQ_URL", "ECHOMQ_DB")}
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env, check=False
    )


def test_listen_wakes_the_relay_long_before_its_poll(
    pg_url: str, valkey_url: str, queue_name: str
) -> None:
    ob = Outbox(pg_url)
    ob.create_table()
    relay = Relay(ob, valkey_url, poll=60.0)  # only NOTIFY can wake it within the deadline
    stop = threading.Event()
    thread = threading.Thread(target=relay.run, args=(stop,), daemon=True)
    q = SyncQueue(queue_name, valkey_url)
    try:
        thread.start()
        wait_for(lambda: relay._engine is not None, "the relay to start")
        time.sleep(0.3)  # let it go idle on LISTEN
        for i in range(3):
            with ob.engine.begin() as conn:
                ob.add(conn, queue_name, "wake", i)
            wait_for(lambda n=i + 1: relay.relayed == n, f"row {i} to be relayed")  # type: ignore[misc]
        assert [job.data for job in q.claim(10)] == [0, 1, 2]
    finally:
        stop.set()
        thread.join(DEADLINE)
        relay.close()
        q.close()
        ob.engine.dispose()
    assert not thread.is_alive()


async def test_add_async_in_an_async_transaction(
    pg_url: str, valkey_url: str, queue_name: str
) -> None:
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(pg_url)
    ob = Outbox(engine)
    await asyncio.to_thread(ob.create_table)
    q = Queue(queue_name, valkey_url)
    try:
        async with engine.begin() as conn:
            await ob.add_async(conn, queue_name, "a", {"n": 1}, priority=1)
        with pytest.raises(RuntimeError):
            async with engine.begin() as conn:
                await ob.add_async(conn, queue_name, "a", {"n": 2})
                raise RuntimeError("rolled back")
        relay = Relay(ob, valkey_url)
        assert await asyncio.to_thread(relay.relay_once) == 1
        relay.close()
        assert [job.data for job in await q.claim(10)] == [{"n": 1}]
    finally:
        await q.close()
        await engine.dispose()
        ob.engine.dispose()


async def test_worker_runs_the_relay(tmp_path: Path, valkey_url: str, queue_name: str) -> None:
    ob = Outbox(f"sqlite:///{tmp_path / 'app.db'}")
    ob.create_table()
    q = Queue(queue_name, valkey_url)
    done: list[object] = []
    worker = Worker(q, {"receipt": lambda job: done.append(job.data)}, relay=ob)
    run = asyncio.ensure_future(worker.run(install_signals=False))
    try:
        with ob.engine.begin() as conn:
            ob.add(conn, queue_name, "receipt", {"order": 9})
        deadline = time.monotonic() + DEADLINE
        while not done and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert done == [{"order": 9}]
    finally:
        worker.stop()
        await asyncio.wait_for(run, DEADLINE)
        await q.close()
        ob.engine.dispose()


def test_worker_refuses_a_relay_that_is_not_one(valkey_url: str, queue_name: str) -> None:
    from echomq.errors import InvalidOption

    with pytest.raises(InvalidOption, match="relay"):
        Worker(Queue(queue_name, valkey_url), {"x": lambda job: None}, relay="sqlite://")


def test_an_unreachable_database_is_waited_out_and_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ob = Outbox(f"postgresql+psycopg://app:{PASSWORD}@127.0.0.1:1/app?connect_timeout=2")
    relay = Relay(ob, "redis://127.0.0.1:1/0")
    stop = threading.Event()
    attempts: list[float] = []
    check = ob.check_table

    def counted() -> None:
        attempts.append(time.monotonic())
        check()

    ob.check_table = counted  # type: ignore[method-assign]
    thread = threading.Thread(target=relay.run, args=(stop,), daemon=True)
    with caplog.at_level(logging.DEBUG, logger="echomq.outbox"):
        thread.start()
        time.sleep(1.5)
        stop.set()
        thread.join(DEADLINE)
    assert not thread.is_alive()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "retrying" in warnings[0].getMessage()
    assert 2 <= len(attempts) <= 8  # backing off: 0.05, 0.1, 0.2, 0.4, 0.8 s …
    assert PASSWORD not in caplog.text


def test_cli_relay_once_and_its_errors(
    pg_url: str, valkey_url: str, queue_name: str, tmp_path: Path
) -> None:
    ob = Outbox(pg_url)
    ob.create_table()
    try:
        with ob.engine.begin() as conn:
            for i in range(3):
                ob.add(conn, queue_name, "job", i)
        done = cli("relay", "--db", pg_url, "--url", valkey_url, "--once")
        assert done.returncode == 0, done.stderr
        assert "relayed 3 row(s), 0 dead" in done.stdout
        missing = cli("relay", "--db", pg_url, "--url", valkey_url, "--table", "nope", "--once")
        unreachable = cli(
            "relay", "--db", pg_url.replace(f":{sa.make_url(pg_url).port}/", ":1/"), "--once"
        )
        for proc, says in ((missing, "does not exist"), (unreachable, "database error")):
            assert proc.returncode == 1, (proc.stdout, proc.stderr)
            lines = proc.stderr.strip().splitlines()
            assert len(lines) == 1 and says in lines[0] and "Traceback" not in proc.stderr
            assert PASSWORD not in proc.stderr + proc.stdout
    finally:
        ob.engine.dispose()
    with SyncQueue(queue_name, valkey_url) as q:
        assert [job.data for job in q.claim(10)] == [0, 1, 2]


def test_cli_relay_runs_until_sigterm_and_hides_the_password(
    pg_url: str, valkey_url: str, queue_name: str
) -> None:
    ob = Outbox(pg_url)
    ob.create_table()
    env = {k: v for k, v in os.environ.items() if k != "ECHOMQ_URL"}
    proc = subprocess.Popen(
        [*CLI, "relay", "--db", pg_url, "--url", valkey_url, "-q", queue_name],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    q = SyncQueue(queue_name, valkey_url)
    try:
        with ob.engine.begin() as conn:
            ob.add(conn, queue_name, "job", "x")
            ob.add(conn, f"{queue_name}-other", "job", "not mine")
        wait_for(lambda: bool(q.jobs("waiting")), "the job")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        q.close()
        ob.engine.dispose()
    assert proc.returncode == 0, err
    assert PASSWORD not in out + err
    assert "***" in err and "relay stopped: 1 row(s) relayed" in err


def test_the_relay_rides_out_its_database_connections_being_killed(
    pg_url: str, valkey_url: str, queue_name: str
) -> None:
    """Every backend of the relay terminated (as a PostgreSQL restart would): it
    listens again and relays the next commit without waiting for its poll."""
    ob = Outbox(pg_url)
    ob.create_table()
    relay = Relay(ob, valkey_url, poll=60.0)
    stop = threading.Event()
    thread = threading.Thread(target=relay.run, args=(stop,), daemon=True)
    terminate = sa.text(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE pid <> pg_backend_pid() AND datname = current_database()"
    )
    try:
        thread.start()
        with ob.engine.begin() as conn:
            ob.add(conn, queue_name, "before", 1)
        wait_for(lambda: relay.relayed == 1, "the first row")
        time.sleep(0.3)  # idle on LISTEN
        killer = sa.create_engine(pg_url, poolclass=sa.pool.NullPool)
        with killer.connect() as conn:
            assert conn.execute(terminate).scalar_one() >= 1
        killer.dispose()
        ob.engine.dispose()  # the test's own pooled connections were terminated too
        with ob.engine.begin() as conn:
            ob.add(conn, queue_name, "after", 2)
        wait_for(lambda: relay.relayed == 2, "the row committed after the kill")
        assert thread.is_alive()
    finally:
        stop.set()
        thread.join(DEADLINE)
        relay.close()
        ob.engine.dispose()
    with SyncQueue(queue_name, valkey_url) as q:
        assert [job.data for job in q.claim(10)] == [1, 2]
