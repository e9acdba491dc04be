"""How long ``echomq stats`` takes as a whole process, against ``python -c "import redis"``.

The CLI's start-up target (issue 19): ``echomq stats`` on an empty queue
takes at most 1.3× the time of a bare ``import redis`` on the same machine,
both measured as whole processes (interpreter start included), median of 5.
The embedded server runs in a private ``ECHOMQ_HOME`` and is started before
the first timed run (starting it is a once-per-session cost, not start-up);
it is stopped at the end.

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

TARGET = 1.3


def timed(argv: Sequence[str], env: Mapping[str, str]) -> float:
    """Wall-clock seconds of one process, from spawn to exit (it must exit 0)."""
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def median_of(argv: Sequence[str], env: Mapping[str, str], runs: int) -> float:
    timed(argv, env)  # warm the page cache and the .pyc files once
    return statistics.median(timed(argv, env) for _ in range(runs))


def line(metric: str, value: float, unit: str, runs: int) -> None:
    print(json.dumps({"metric": metric, "value": round(value, 4), "unit": unit, "runs": runs}))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per command (median)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="emq-startup-") as home:
        env = {k: v for k, v in os.environ.items() if k not in ("ECHOMQ_URL", "ECHOMQ_QUEUE")}
        env["ECHOMQ_HOME"] = home
        echomq = [sys.executable, "-m", "echomq.cli"]
        subprocess.run([*echomq, "server", "start"], env=env, check=True, stdout=subprocess.DEVNULL)
        try:
            base = median_of([sys.executable, "-c", "import redis"], env, args.runs)
            stats = median_of([*echomq, "stats", "-q", "startup-empty"], env, args.runs)
        finally:
            subprocess.run([*echomq, "server", "stop"], env=env, stdout=subprocess.DEVNULL)
    line("import_redis_s", base, "s", args.runs)
    line("echomq_stats_s", stats, "s", args.runs)
    line("stats_vs_import_redis", stats / base, "ratio", args.runs)
    print(f"echomq stats / import redis = {stats / base:.2f} (target ≤ {TARGET})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
