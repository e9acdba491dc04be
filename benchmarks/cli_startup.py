"""How long ``echomq stats`` takes as a whole process, against ``python -c "import redis"``.

The CLI's start-up target (issue 19): ``echomq stats`` on an empty queue
takes at most 1.3× the time of a bare ``import redis`` on the same machine,
both measured as whole processes (interpreter start included), median of 5.
The embedded server runs in a private ``ECHOMQ_HOME`` and is started before
the first timed run (starting it is a once-per-session cost, not start-up);
it is stopped at the end. The queue has never held a job, so ``stats`` also
walks the server's queues for its "never held a job" note (the slower case).
Modules load from bytecode as after a pip install (PYTHONDONTWRITEBYTECODE
is dropped, so the warm-up run writes the .pyc files). Runs are interleaved;
the CPU time (user + sys) of each process is reported beside the wall-clock
time, as it hardly moves when other processes load the machine.

    python benchmarks/cli_startup.py            # prints one JSON line per figure
    python benchmarks/cli_startup.py --runs 9

This is a measurement, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

TARGET = 1.3


@dataclass(frozen=True, slots=True)
class Timing:
    """One process run: wall-clock seconds and the CPU seconds it used (user + sys)."""

    wall: float
    cpu: float


def timed(argv: Sequence[str], env: Mapping[str, str]) -> Timing:
    """One process, from spawn to exit (it must exit 0)."""
    before = os.times()
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return Timing(wall, cpu)


def interleaved(
    commands: Sequence[Sequence[str]], env: Mapping[str, str], runs: int
) -> list[list[Timing]]:
    """``runs`` timings of each command, taken in turns (so a burst of load from other
    processes on the machine hits every command alike), after one warm-up run each."""
    for argv in commands:
        timed(argv, env)  # the page cache and the .pyc files
    out: list[list[Timing]] = [[] for _ in commands]
    for _ in range(runs):
        for i, argv in enumerate(commands):
            out[i].append(timed(argv, env))
    return out


def line(metric: str, value: float, unit: str, runs: int) -> None:
    print(json.dumps({"metric": metric, "value": round(value, 4), "unit": unit, "runs": runs}))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per command (median)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="emq-startup-") as home:
        env = {k: v for k, v in os.environ.items() if k not in ("ECHOMQ_URL", "ECHOMQ_QUEUE")}
        env["ECHOMQ_HOME"] = home
        # as installed by pip, modules load from bytecode: let the warm-up runs write it
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        echomq = [sys.executable, "-m", "echomq.cli"]
        subprocess.run([*echomq, "server", "start"], env=env, check=True, stdout=subprocess.DEVNULL)
        try:
            base, stats = interleaved(
                [[sys.executable, "-c", "import redis"], [*echomq, "stats", "-q", "startup-empty"]],
                env,
                args.runs,
            )
        finally:
            subprocess.run([*echomq, "server", "stop"], env=env, stdout=subprocess.DEVNULL)
    for what, key in (("wall", "s"), ("cpu", "cpu_s")):
        b = statistics.median(getattr(t, what) for t in base)
        e = statistics.median(getattr(t, what) for t in stats)
        line(f"import_redis_{key}", b, "s", args.runs)
        line(f"echomq_stats_{key}", e, "s", args.runs)
        line(f"stats_vs_import_redis_{what}", e / b, "ratio", args.runs)
        print(
            f"{what}: echomq stats / import redis = {e / b:.2f} (target ≤ {TARGET})",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
