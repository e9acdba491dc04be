"""What ``q.position(job_id)`` costs with 10,000 lanes (issue 33).

Target: 10,000 lanes in at most 10 ms of server time. position.lua reads the
ring (one LRANGE), the weights (none when none is stored, else one HGETALL or
one HMGET per 1,000 lanes), the turn, and the backlog (ZCARD) only of the
lanes whose allowance before the job is more than one claim (docs/ordering.md
"Where a job stands"): every ring lane holds a job, so a lane allowed at most
one claim before it adds exactly that. The lanes are summed in one pass that
finds the job's lane on the way; the ZCARDs (the server's command path, once
per lane) and the listing are most of the time.

Cases, each on one queue of a private server with ``--lanes`` lanes of 3
waiting jobs each, the job asked about in the ring's last lane:
- ``front``: weights 1, the lane's first job (its lane's first turn: no
  backlog read);
- ``weighted``: as ``front``, every tenth lane with weight 5 (their backlogs
  are read: 1,000 ZCARD);
- ``deep``: weights 1, the lane's last job (third turn: every lane's backlog
  is read, 10,000 ZCARD): the worst case.
The figure is the server's own time per position call (INFO commandstats:
usec / calls of fcall_ro, evalsha and eval), the least of five rounds of
``--calls`` calls.

    python benchmarks/position_cost.py [--server valkey] [--lanes 10000] [--calls 10]

A measurement, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import harness  # noqa: E402

from echomq import SyncQueue  # noqa: E402

SCRIPT_COMMANDS = ("fcall_ro", "fcall", "evalsha", "eval")


def server_us(url: str, q: SyncQueue, job_id: str, calls: int, rounds: int = 5) -> float:
    """Server µs per position call: the least of ``rounds`` averages of ``calls``
    calls (a busy shared machine slows some rounds; the least is the call's own cost)."""
    q.position(job_id)  # warm-up (library load)
    best = float("inf")
    with redis.Redis.from_url(url) as client:
        for _ in range(rounds):
            client.config_resetstat()
            for _ in range(calls):
                q.position(job_id)
            stats = client.info("commandstats")
            n = sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in SCRIPT_COMMANDS)
            usec = sum(int(stats.get(f"cmdstat_{c}", {}).get("usec", 0)) for c in SCRIPT_COMMANDS)
            best = min(best, usec / max(1, n))
    return best


def measure(url: str, lanes: int, calls: int) -> dict[str, float]:
    """The three cases (one queue each, named here; the caller flushes)."""
    out: dict[str, float] = {}
    for case in ("front", "weighted", "deep"):
        with SyncQueue(f"bench-position-{case}", url=url) as q:
            if case == "weighted":
                for i in range(0, lanes, 10):
                    q.set_weight(f"t{i}", 5)
            jobs = [{"name": "j", "group": f"t{i}"} for i in range(lanes) for _ in range(3)]
            ids: list[str] = []
            for start in range(0, len(jobs), 3000):
                ids += q.add_many(jobs[start : start + 3000])
            job_id = ids[-1] if case == "deep" else ids[-3]
            pos = q.position(job_id)
            out[f"{case}_queue_ahead"] = float(pos.queue_ahead or 0)
            out[f"{case}_server_us"] = server_us(url, q, job_id, calls)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", default="valkey", choices=["valkey", "redis", "valkey9"])
    parser.add_argument("--lanes", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=10)
    args = parser.parse_args()
    server = harness.BenchServer(args.server).start()
    try:
        figures = measure(server.url, args.lanes, args.calls)
    finally:
        server.stop()
    line = {"bench": "position_cost", "server": server.label, "lanes": args.lanes}
    line.update({k: round(v, 1) for k, v in figures.items()})
    print(json.dumps(line))


if __name__ == "__main__":
    main()
