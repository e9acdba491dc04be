"""What deduplication costs the server, per call (DESIGN §10, §9).

A private server (harness.BenchServer) gets one queue per row, each with a
small backlog and one warm-up round (as tests/integration/test_command_counts.py
does). Then, for a plain add and for each way of deduplicating, it counts the
server commands (the sum of ``calls`` over INFO commandstats, the FCALL
itself included) of: the first add of a key (it makes a job), a second add
of the same key (it makes none: dropped, throttled or replaced; latest
while the job runs makes one held behind it), the claim of the job, and its
completion.

    python benchmarks/dedupe_cost.py [--server valkey|redis|valkey9] [--json]

A measurement, not a test: nothing here asserts a figure.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import harness  # noqa: E402
import redis  # noqa: E402

from echomq import Dedupe, SyncQueue  # noqa: E402

ROWS: dict[str, dict[str, Any]] = {
    "plain": {},
    "key=": {"key": "k"},
    "drop, window 60 s": {"dedupe": Dedupe("k", "drop", 60)},
    "throttle 60 s": {"dedupe": Dedupe("k", "throttle", 60)},
    "debounce 60 s": {"dedupe": Dedupe("k", "debounce", 60)},
    "latest": {"dedupe": Dedupe("k", "latest")},
}


def commands(client: redis.Redis, run: Callable[[], object]) -> int:
    def calls() -> Counter[str]:
        info: dict[str, Any] = client.info("commandstats")
        return Counter({name: int(v["calls"]) for name, v in info.items()})

    before = calls()
    run()
    delta = calls() - before
    return sum(delta.values()) - 1  # the first INFO counts itself once it has answered


def row(url: str, client: redis.Redis, name: str, options: dict[str, Any]) -> dict[str, Any]:
    q = SyncQueue("cost-" + "".join(c for c in name if c.isalnum()), url)
    try:
        q.add_many([{"name": "backlog"} for _ in range(5)])
        q.complete(q.claim(1)[0])
        q.add("warm")
        out: dict[str, Any] = {"row": name}
        first: list[str] = []
        out["first add"] = commands(client, lambda: first.append(q.add("job", 1, **options)))
        if name != "latest":
            out["second add"] = commands(client, lambda: q.add("job", 2, **options))
        got: list[Any] = []
        out["claim(10)"] = commands(client, lambda: got.extend(q.claim(10)))
        if name == "latest":  # the second add while the job runs: one more is held behind it
            out["second add"] = commands(client, lambda: q.add("job", 2, **options))
        job = next((j for j in got if j.id == first[0]), None)
        if job is not None:  # (a debounce job is delayed: not claimed yet)
            out["complete"] = commands(client, lambda: q.complete(job, 1))
        return out
    finally:
        q.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="valkey", choices=("valkey", "redis", "valkey9"))
    parser.add_argument("--json", action="store_true", help="one JSON line per row")
    args = parser.parse_args()
    with harness.probed_server(args.server) as (server, _probe):
        client = redis.Redis(port=server.port)
        rows = [row(server.url, client, name, options) for name, options in ROWS.items()]
        client.close()
    for out in rows:
        out["server"] = server.label
        if args.json:
            print(json.dumps(out))
        else:
            cells = ", ".join(f"{k} {v}" for k, v in out.items() if k not in ("row", "server"))
            print(f"{out['row']:<20} {cells}")
    if not args.json:
        print(f"({server.label}; claim(10) claims the job and the backlog)")


if __name__ == "__main__":
    main()
