"""The outbox's exactly-once promise under faults, against a real PostgreSQL.

Producers write rows in transactions that commit or roll back at random;
relay processes are killed -9 at random moments (and kill themselves between
an add and the deletion of its rows: faults/outbox_relay.py); the Valkey
server is killed -9 and restarted (``appendfsync always``). Then every
committed row must be exactly one job, no rolled-back row a job, and each
producer's rows of a queue in the order it committed them. The counts are
printed in every run's output.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import sqlalchemy as sa

from echomq import SyncQueue
from echomq.outbox import Outbox
from faults.procs import TESTS_DIR, wait_for
from servers import PrivateServer, ServerFactory

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

PRODUCERS = 4
LOAD_SECONDS = 20.0
RELAYS = 2
#: chance that a relay kills itself between an add and the delete, per batch
CRASH_CHANCE = 0.08
ROLLBACK_CHANCE = 0.3
VALKEY_KILLS = 2
QUEUES = 3


class Ledger:
    """What the producers did: committed and rolled-back rows, by (producer, seq)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.committed: dict[tuple[int, int], str] = {}  # → queue
        self.rolled_back: set[tuple[int, int]] = set()


def produce(
    ob: Outbox, producer: int, queues: list[str], ledger: Ledger, stop: threading.Event
) -> None:
    rng = random.Random(producer)
    seq = 0
    while not stop.is_set():
        rows: list[tuple[tuple[int, int], str]] = []
        rollback = rng.random() < ROLLBACK_CHANCE
        try:
            with ob.engine.begin() as conn:
                for _ in range(rng.randint(1, 4)):
                    queue = rng.choice(queues)
                    ob.add(conn, queue, "work", {"p": producer, "s": seq})
                    rows.append(((producer, seq), queue))
                    seq += 1
                if rollback:
                    raise _Rollback
        except _Rollback:
            with ledger.lock:
                ledger.rolled_back.update(marker for marker, _ in rows)
            continue
        with ledger.lock:
            ledger.committed.update(rows)
        time.sleep(rng.random() * 0.01)


class _Rollback(Exception):
    pass


class RelayProcs:
    def __init__(self, db: str, url: str, marks: Path, logs: Path) -> None:
        self.args = [sys.executable, "-m", "faults.outbox_relay", db, url, str(marks)]
        self.logs = logs
        self.env = {**os.environ, "PYTHONPATH": f"{os.environ.get('PYTHONPATH', '')}:{TESTS_DIR}"}
        self.procs: list[subprocess.Popen[bytes]] = []
        self.killed = 0

    def spawn(self, chance: float = CRASH_CHANCE) -> None:
        log = (self.logs / f"relay-{len(self.procs)}.log").open("wb")
        with log:
            self.procs.append(
                subprocess.Popen([*self.args, str(chance)], env=self.env, stdout=log, stderr=log)
            )

    def alive(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.procs if p.poll() is None]

    def kill_one(self, rng: random.Random) -> None:
        alive = self.alive()
        if alive:
            rng.choice(alive).kill()
            self.killed += 1

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)


def drain(q: SyncQueue) -> list[dict[str, int]]:
    """The data of every job of the queue, in the order they are served."""
    found: list[dict[str, int]] = []
    while True:
        jobs = q.claim(1000)
        if not jobs:
            return found
        found.extend(job.data for job in jobs)


def check_order(jobs: dict[str, list[dict[str, int]]], ledger: Ledger) -> None:
    """Each job in its row's queue, each producer's rows of a queue in commit order."""
    for name, found in jobs.items():
        assert all(ledger.committed[(d["p"], d["s"])] == name for d in found)
        for p in range(PRODUCERS):
            mine = [d["s"] for d in found if d["p"] == p]
            assert mine == sorted(mine), f"queue {name}: producer {p}'s rows out of order"


def rows_left(ob: Outbox) -> int:
    with ob.engine.connect() as conn:
        return int(
            conn.execute(sa.select(sa.func.count()).select_from(ob.tables.rows)).scalar_one()
        )


def test_every_committed_row_is_exactly_one_job(
    pg_url: str,
    server_factory: ServerFactory,
    tmp_path: Path,
    queue_name: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    valkey: PrivateServer = server_factory("valkey", {"appendonly": "yes", "appendfsync": "always"})
    ob = Outbox(pg_url)
    ob.create_table()
    queues = [f"{queue_name}-{n}" for n in range(QUEUES)]
    marks = tmp_path / "crashes"
    marks.touch()
    relays = RelayProcs(pg_url, valkey.url, marks, tmp_path)
    ledger = Ledger()
    stop = threading.Event()
    producers = [
        threading.Thread(target=produce, args=(ob, p, queues, ledger, stop), daemon=True)
        for p in range(PRODUCERS)
    ]
    rng = random.Random(32)
    valkey_kills = 0
    try:
        for _ in range(RELAYS):
            relays.spawn()
        for thread in producers:
            thread.start()
        started = time.monotonic()
        kill_valkey_at = sorted(rng.uniform(2, LOAD_SECONDS - 3) for _ in range(VALKEY_KILLS))
        while time.monotonic() - started < LOAD_SECONDS:
            time.sleep(rng.uniform(0.2, 0.8))
            if rng.random() < 0.5:
                relays.kill_one(rng)
            if kill_valkey_at and time.monotonic() - started > kill_valkey_at[0]:
                kill_valkey_at.pop(0)
                valkey.kill()
                valkey_kills += 1
                time.sleep(rng.uniform(0.1, 0.5))
                valkey.start()
            while len(relays.alive()) < RELAYS:
                relays.spawn()
        stop.set()
        for thread in producers:
            thread.join(30)
        relays.spawn(chance=0.0)  # one that is never killed empties the table
        wait_for(lambda: rows_left(ob) == 0, 60, "the relays to empty the outbox")
    finally:
        stop.set()
        relays.stop_all()
    jobs: dict[str, list[dict[str, int]]] = {}
    for name in queues:
        with SyncQueue(name, valkey.url) as q:
            jobs[name] = drain(q)
    ob.engine.dispose()

    seen = Counter((d["p"], d["s"]) for found in jobs.values() for d in found)
    committed = set(ledger.committed)
    duplicates = sum(n - 1 for n in seen.values() if n > 1)
    lost = len(committed - set(seen))
    ghosts = len(set(seen) & ledger.rolled_back)
    crashes = len(marks.read_text().splitlines())
    with capsys.disabled():  # the counts belong in every run's output
        print(
            f"\noutbox faults: rows committed {len(committed)}, "
            f"rolled back {len(ledger.rolled_back)}, "
            f"jobs added {sum(seen.values())}, duplicates {duplicates}, lost {lost}, "
            f"rolled-back rows as jobs {ghosts}; relays killed -9 {relays.killed + crashes} "
            f"({crashes} between add and delete), Valkey killed -9 and restarted {valkey_kills}"
        )
    assert duplicates == 0 and lost == 0 and ghosts == 0
    assert set(seen) == committed
    check_order(jobs, ledger)
    assert crashes > 0 and relays.killed > 0 and valkey_kills == VALKEY_KILLS
