"""Writes RESULTS.md (and results.jsonl) from the lines one run.py invocation collected.

Everything above the marker line is generated; everything below it (the
hand-written analysis: profiles, explanations) is kept from the previous file.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness import LISTPACK_VALUE

MARKER = "<!-- end of generated results: the analysis below is kept when run.py rewrites -->"

Lines = Sequence[Mapping[str, Any]]
Table = dict[tuple[str, str], float | None]  # (system, metric) -> value

MAIN_METRICS = (
    ("add_concurrent", "jobs/s"),
    ("add_single", "jobs/s"),
    ("add_bulk", "jobs/s"),
    ("drain", "jobs/s"),
    ("drain_sweep", "jobs/s"),
    ("drain_sweep_concurrency", "workers"),
    ("drain_c1", "jobs/s"),
    ("drain_c50", "jobs/s"),
    ("drain_c100", "jobs/s"),
    ("priority_inversions", "jobs"),
    ("priority_drain", "jobs/s"),
    ("server_cpu_us_per_job", "µs/job"),
    ("server_calls_per_job", "calls/job"),
    ("add_concurrent_server_cpu_us_per_job", "µs/job"),
    ("add_single_server_cpu_us_per_job", "µs/job"),
    ("add_bulk_server_cpu_us_per_job", "µs/job"),
    ("drain_server_cpu_us_per_job", "µs/job"),
    ("add_concurrent_server_calls_per_job", "calls/job"),
    ("add_single_server_calls_per_job", "calls/job"),
    ("add_bulk_server_calls_per_job", "calls/job"),
    ("drain_server_calls_per_job", "calls/job"),
)


@dataclass(frozen=True, slots=True)
class Target:
    text: str
    measure: Callable[[Table, Sequence[str]], float | None]
    goal: float
    at_most: bool  # True: measured ≤ goal passes; False: measured ≥ goal passes
    #: the metric(s) of this run the figure is computed from: a bare metric name is
    #: echomq's own (tests/test_benchmarks_quick.py checks the quick run prints it)
    source: str


def _get(table: Table, system: str, metric: str) -> float | None:
    return table.get((system, metric))


def _best_peer(table: Table, peers: Sequence[str], metric: str) -> float | None:
    values = [v for p in peers if (v := _get(table, p, metric)) is not None]
    return max(values) if values else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def _vs_best(metric: str) -> Callable[[Table, Sequence[str]], float | None]:
    return lambda t, peers: _ratio(_get(t, "echomq", metric), _best_peer(t, peers, metric))


def _own(metric: str) -> Callable[[Table, Sequence[str]], float | None]:
    return lambda t, _peers: _get(t, "echomq", metric)


def _vs(system: str, metric: str) -> Callable[[Table, Sequence[str]], float | None]:
    return lambda t, _peers: _ratio(_get(t, "echomq", metric), _get(t, system, metric))


#: the memory target's cases: (ordering, payload bytes), each at the server's default settings
MEMORY_CASES = tuple(
    (ordering, payload) for ordering in ("composite", "mint") for payload in (100, 1024)
)


def memory_metric(ordering: str, payload: int) -> str:
    """The metric echomq_bench.py extras records for one case of the memory target."""
    return f"memory_overhead_bytes_per_waiting_job_default_{ordering}_{payload}b"


TARGETS = (
    Target(
        "drain at equal settings (worker concurrency 10, default prefetch) ≥ 4× the fastest "
        "peer at 10 (ratio)",
        _vs_best("drain"),
        4.0,
        False,
        "drain, every system",
    ),
    Target(
        "best drain over concurrency 1/10/50/100 (drain_sweep) ≥ 4× the best peer's best (ratio)",
        _vs_best("drain_sweep"),
        4.0,
        False,
        "drain_sweep, every system",
    ),
    Target(
        "server CPU per drained job at concurrency 10 ≤ 25 µs",
        _own("drain_server_cpu_us_per_job"),
        25.0,
        True,
        "drain_server_cpu_us_per_job",
    ),
    Target(
        "drain at concurrency 10 ≥ 8× BullMQ's Python package (ratio)",
        _vs("bullmq", "drain"),
        8.0,
        False,
        "drain, echomq and bullmq",
    ),
    Target(
        "bulk add ≥ 2× the fastest peer's bulk add (ratio)",
        _vs_best("add_bulk"),
        2.0,
        False,
        "add_bulk, every system",
    ),
    Target("bulk add ≥ 80,000 jobs/s", _own("add_bulk"), 80_000, False, "add_bulk"),
    Target(
        "100 concurrent callers adding one job each ≥ 3× the fastest peer (ratio)",
        _vs_best("add_concurrent"),
        3.0,
        False,
        "add_concurrent, every system",
    ),
    Target(
        "≤ 25 µs server CPU per add under 100 concurrent callers",
        _own("add_concurrent_server_cpu_us_per_job"),
        25,
        True,
        "add_concurrent_server_cpu_us_per_job",
    ),
    Target(
        "single add ≥ 1.5× the fastest peer's single add (ratio)",
        _vs_best("add_single"),
        1.5,
        False,
        "add_single, every system",
    ),
    Target(
        "single add ≥ 1.5× the fastest peer's, blocking SyncQueue (ratio)",
        lambda t, peers: _ratio(
            _get(t, "echomq", "add_single_sync"), _best_peer(t, peers, "add_single")
        ),
        1.5,
        False,
        "add_single_sync (echomq), add_single (peers)",
    ),
    Target(
        "add of one job ≤ 15 µs server time (script time, empty queue)",
        _own("add_us_backlog_0"),
        15,
        True,
        "add_us_backlog_0",
    ),
    Target(
        "claim(1) ≤ 20 µs server time (script time, 10^3 waiting)",
        _own("claim_us_backlog_1000"),
        20,
        True,
        "claim_us_backlog_1000",
    ),
    Target("0 priority inversions", _own("priority_inversions"), 0, True, "priority_inversions"),
    Target(
        "priority drain at concurrency 1 ≥ 1.5× BullMQ's (ratio)",
        _vs("bullmq", "priority_drain"),
        1.5,
        False,
        "priority_drain, echomq and bullmq",
    ),
    Target(
        "full lifecycle ≤ 25 µs server CPU per job, batched, events on (the default)",
        _own("lifecycle_batched_server_cpu_us_per_job"),
        25,
        True,
        "lifecycle_batched_server_cpu_us_per_job",
    ),
    Target(
        "claim at 10^6 backlog ≤ 1.5× claim at 10^3 (ratio; --quick: 3·10^4)",
        _own("claim_cost_ratio_backlog"),
        1.5,
        True,
        "claim_cost_ratio_backlog",
    ),
    Target(
        "claim with 10^5 lanes ≤ 1.5× claim with 1 lane (ratio; --quick: 5·10^3)",
        _own("claim_cost_ratio_lanes"),
        1.5,
        True,
        "claim_cost_ratio_lanes",
    ),
    Target(
        "claim with 99 % of 10^4 lanes paused or capped ≤ 2× an uncapped claim "
        "(ratio; --quick: 2·10^3 lanes)",
        _own("claim_cost_ratio_lanes_capped"),
        2.0,
        True,
        "claim_cost_ratio_lanes_capped",
    ),
    Target(
        "idle add → handler start p50 ≤ 1 ms, TCP",
        _own("idle_latency_p50"),
        1.0,
        True,
        "idle_latency_p50",
    ),
    Target(
        "idle add → handler start p99 ≤ 10 ms, TCP",
        _own("idle_latency_p99"),
        10.0,
        True,
        "idle_latency_p99",
    ),
    Target(
        "idle add → handler start p50 ≤ 1 ms, unix socket",
        _own("idle_latency_unix_p50"),
        1.0,
        True,
        "idle_latency_unix_p50",
    ),
    Target(
        "idle add → handler start p99 ≤ 5 ms, unix socket",
        _own("idle_latency_unix_p99"),
        5.0,
        True,
        "idle_latency_unix_p99",
    ),
    Target(
        "add → handler start p50 ≤ 2 ms under load (a steady 50 % of the worker's maximum; "
        "the load reached: load_latency_fraction)",
        _own("load_latency_p50"),
        2.0,
        True,
        "load_latency_p50",
    ),
    Target(
        "add → handler start p99 ≤ 10 ms under load (the same)",
        _own("load_latency_p99"),
        10.0,
        True,
        "load_latency_p99",
    ),
    Target(
        "job's final transition → wait() returns, p50 ≤ 2 ms",
        _own("wait_latency_p50"),
        2.0,
        True,
        "wait_latency_p50",
    ),
    *(
        Target(
            f"≤ 200 B server memory per waiting job beyond its {payload} B payload, "
            f"ordering={ordering!r}, server default settings",
            _own(memory_metric(ordering, payload)),
            200,
            True,
            memory_metric(ordering, payload),
        )
        for ordering, payload in MEMORY_CASES
    ),
    Target(
        "≤ 200 B per waiting job beyond a 100 B payload, hash-max-listpack-value "
        f"{LISTPACK_VALUE} (the embedded server's)",
        _own("memory_overhead_bytes_per_waiting_job"),
        200,
        True,
        "memory_overhead_bytes_per_waiting_job",
    ),
)


def machine() -> list[str]:
    cpu = "unknown"
    try:
        for row in Path("/proc/cpuinfo").read_text().splitlines():
            if row.startswith("model name"):
                cpu = row.split(":", 1)[1].strip()
                break
        kib = next(
            int(r.split()[1])
            for r in Path("/proc/meminfo").read_text().splitlines()
            if r.startswith("MemTotal")
        )
        memory = f"{kib / 1024 / 1024:.1f} GiB"
    except (OSError, StopIteration):
        memory = "unknown"
    return [
        f"- CPU: {cpu}, {os.cpu_count()} cores (nproc); memory {memory}",
        f"- OS: {platform.platform()}; Python {platform.python_version()}",
    ]


def _fmt(value: float | None) -> str:
    if value is None:
        return "—"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}" if abs(value) >= 1 or value == 0 else f"{value:.3f}"


def tables_by_server(lines: Lines) -> dict[str, Table]:
    out: dict[str, Table] = {}
    for line in lines:
        out.setdefault(line["server"], {})[(line["system"], line["metric"])] = line["value"]
    return out


def _systems(table: Table) -> list[str]:
    seen: list[str] = []
    for system, _ in table:
        if system not in seen:
            seen.append(system)
    return seen


def main_table(table: Table) -> list[str]:
    systems = _systems(table)
    rows = [
        "| metric | unit | " + " | ".join(systems) + " |",
        "| --- | --- | " + " | ".join("---:" for _ in systems) + " |",
    ]
    for metric, unit in MAIN_METRICS:
        cells = [_fmt(table.get((s, metric))) for s in systems]
        rows.append(f"| {metric} | {unit} | " + " | ".join(cells) + " |")
    main = {m for m, _ in MAIN_METRICS}
    extra = sorted({(s, m) for s, m in table if m not in main and s != "echomq"})
    rows += [
        f"| {m} ({s}) | | "
        + " | ".join(_fmt(table.get((s, m))) if x == s else "" for x in systems)
        + " |"
        for s, m in extra
    ]
    return rows


def echomq_table(lines: Lines, server: str) -> list[str]:
    main = {m for m, _ in MAIN_METRICS}
    rows = ["| metric | value | unit | runs |", "| --- | ---: | --- | ---: |"]
    for line in lines:
        if line["server"] == server and line["system"] == "echomq" and line["metric"] not in main:
            rows.append(
                f"| {line['metric']} | {_fmt(line['value'])} | {line['unit']} | {line['runs']} |"
            )
    return rows


def target_table(table: Table, *, measured_only: bool = False) -> list[str]:
    """One row per target: goal, the figure this run measured, met or not, and the
    metric(s) of this run's results.jsonl it comes from. ``measured_only``: leave
    out the targets this server was not measured for."""
    peers = [s for s in _systems(table) if s != "echomq"]
    rows = [
        "| target | goal | measured | met | from (this run's metric) |",
        "| --- | ---: | ---: | :---: | --- |",
    ]
    for target in TARGETS:
        value = target.measure(table, peers)
        if value is None and measured_only:
            continue
        if value is None:
            met = "n/a"
        else:
            met = (
                "yes"
                if (value <= target.goal if target.at_most else value >= target.goal)
                else "**no**"
            )
        rows.append(
            f"| {target.text} | {_fmt(target.goal)} | {_fmt(value)} | {met} | {target.source} |"
        )
    return rows


def versions(meta: Mapping[str, Mapping[str, Any]], servers: Sequence[str]) -> list[str]:
    rows = [f"- servers: {', '.join(servers) or 'none'}"]
    for system, info in meta.items():
        rows.append(f"- {system} {info.get('version')} (Python {info.get('python')})")
        rows += [f"  - {note}" for note in info.get("notes", [])]
    return rows


def git_revision() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parent,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def render(
    lines: Lines,
    meta: Mapping[str, Mapping[str, Any]],
    skipped: Mapping[str, str],
    servers: Sequence[str],
    command: str,
    elapsed: float,
    load: tuple[float, float],
    run_name: str,
) -> str:
    out = [
        "# Benchmark results",
        "",
        "Generated by `benchmarks/run.py`; every figure is the median of the runs shown in "
        "`results.jsonl`. Rates are jobs per second of wall time; server CPU and commands "
        "come from `INFO cpu` / `INFO commandstats` deltas of the private server.",
        "",
        "## Machine",
        "",
        *machine(),
        "",
        "## Command",
        "",
        f"    {command}",
        "",
        f"This is {run_name}. Took {elapsed:.0f} s (git {git_revision()}, plus uncommitted "
        "changes if any). "
        f"1-minute load average {load[0]:.1f} at the start, {load[1]:.1f} at the end: "
        "the server, the producer, the worker and anything else running share the cores, "
        "so compare systems within one run (rounds are interleaved: every system runs "
        "once per round).",
        "",
        "## Versions and settings",
        "",
        *versions(meta, servers),
        "",
    ]
    if skipped:
        out += ["## Skipped", "", *(f"- {k}: {v}" for k, v in skipped.items()), ""]
    for server, table in tables_by_server(lines).items():
        partial = ("echomq", "drain") not in table
        out += [
            f"## {server}",
            "",
            f"### Targets ({run_name}: same server, same run)",
            "",
            *(
                ["Only the echomq figures below were measured on this server.", ""]
                if partial
                else []
            ),
            *target_table(table, measured_only=partial),
            "",
            *([] if partial else ["### All systems", "", *main_table(table), ""]),
            "### echomq only",
            "",
            *echomq_table(lines, server),
            "",
        ]
    return "\n".join(out)


def write(
    path: Path,
    lines: Lines,
    meta: Mapping[str, Mapping[str, Any]],
    skipped: Mapping[str, str],
    servers: Sequence[str],
    *,
    command: str,
    elapsed: float,
    load: tuple[float, float] = (0.0, 0.0),
) -> None:
    kept = ""
    if path.exists():
        previous = path.read_text(encoding="utf-8")
        if MARKER in previous:
            kept = previous.split(MARKER, 1)[1]
    run_name = f"the run of {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    if "--quick" in command.split():
        run_name = f"the quick run of {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    text = render(lines, meta, skipped, servers, command, elapsed, load, run_name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{text}\n{MARKER}{kept or chr(10)}", encoding="utf-8")
    jsonl = path.with_name("results.jsonl")
    jsonl.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
