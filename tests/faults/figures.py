"""The figures the fault cases measure, one JSON line per case run.

Why: docs/delivery.md and the failover part of docs/scaling.md publish
what these cases measure. Their tables are rendered from these lines by
``python tests/faults/report.py``, never typed by hand, so every published
figure names the run that produced it.

- ``ECHOMQ_FAULT_RESULTS``: the JSON-lines file the cases append to
  (default ``test-artifacts/faults.jsonl``, outside version control);
- ``ECHOMQ_FAULT_KILLS``: server ``kill -9`` cycles per persistence case
  (default 3);
- ``ECHOMQ_FAILOVER_RUNS``: primary kills per failover case (default 1);
- ``ECHOMQ_SOAK_JOBS``: jobs in the soak (tests/faults/test_soak.py).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

RESULTS_ENV = "ECHOMQ_FAULT_RESULTS"
KILLS_ENV = "ECHOMQ_FAULT_KILLS"
FAILOVER_RUNS_ENV = "ECHOMQ_FAILOVER_RUNS"
DEFAULT_RESULTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "faults.jsonl"


def env_int(name: str, default: int, low: int = 1, high: int = 1000) -> int:
    """A positive count from the environment, checked (a typo must not run 0 cycles)."""
    raw = os.environ.get(name, "")
    value = int(raw) if raw.strip() else default
    if not low <= value <= high:
        raise ValueError(f"{name}={raw!r} is out of range; allowed {low} … {high}")
    return value


def results_path() -> Path:
    return Path(os.environ.get(RESULTS_ENV) or DEFAULT_RESULTS)


def record(case: str, **figures: Any) -> None:
    """Append one case's figures (JSON-serialisable values) to the results file."""
    path = results_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    line = {"case": case, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **figures}
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(line, sort_keys=True) + "\n")
