"""What a claim costs when most lanes cannot be served (issue 16).

Target: with 10^4 lanes of which 99 % are paused or at their concurrency cap,
a claim costs at most 2x a claim from a queue with one uncapped lane. Parked
lanes are out of the ring (docs/ordering.md "Lane controls"), so a claim never
visits them; the first claim after they became ineligible parks each once
(warm-up, not timed).

Cases, each on a fresh queue of a private server:
- ``one-lane``: one lane, no controls, 20,000 waiting jobs;
- ``parked-99``: 9,900 lanes paused (half) or capped at 1 with their one slot
  taken (half), each with waiting jobs, and 100 uncapped lanes with 100 jobs.
Each then runs ``--claims`` claim(1) calls; the figure is the server's own
time per claim script call (INFO commandstats: usec / calls of fcall, fcall_ro,
evalsha and eval), plus the client's wall-clock time per claim. run.py takes
the same figures through :func:`measure` (echomq_bench.py extras:
``claim_cost_ratio_lanes_capped``).

    python benchmarks/lane_caps.py [--server valkey] [--claims 2000]

A measurement, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import harness  # noqa: E402

from echomq import SyncQueue  # noqa: E402

LANES, SERVED_LANES = 10_000, 100
#: the commands that run a script: the function library's, or EVALSHA/EVAL without it.
SCRIPT_COMMANDS = ("fcall", "fcall_ro", "evalsha", "eval")


def claim_cost(url: str, q: SyncQueue, claims: int) -> tuple[float, float]:
    """(server usec per claim call, client usec per claim)."""
    with redis.Redis.from_url(url) as client:
        client.config_resetstat()
        start = time.perf_counter()
        for _ in range(claims):
            assert q.claim(1)
        wall = (time.perf_counter() - start) / claims * 1e6
        stats = client.info("commandstats")
    calls = sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in SCRIPT_COMMANDS)
    usec = sum(int(stats.get(f"cmdstat_{c}", {}).get("usec", 0)) for c in SCRIPT_COMMANDS)
    return usec / max(1, calls), wall


def one_lane(url: str, claims: int, jobs: int = 20_000) -> dict[str, float]:
    with SyncQueue("bench-one-lane", url=url) as q:
        for start in range(0, jobs, 1000):
            q.add_many([{"name": "j", "group": "solo"}] * min(1000, jobs - start))
        q.claim(1)  # warm-up (script load)
        server, wall = claim_cost(url, q, claims)
    return {"server_us": server, "wall_us": wall}


def parked_99(url: str, claims: int, lanes: int = LANES) -> dict[str, float]:
    with SyncQueue("bench-parked-99", url=url) as q:
        return _parked_99(url, q, claims, lanes)


def _parked_99(url: str, q: SyncQueue, claims: int, lanes: int) -> dict[str, float]:
    served_lanes = lanes * SERVED_LANES // LANES  # 1 %
    blocked = [f"t{i}" for i in range(lanes - served_lanes)]
    served = [f"s{i}" for i in range(served_lanes)]
    for i, lane in enumerate(blocked):
        if i % 2:
            q.set_lane(lane, paused=True)
        else:
            q.set_lane(lane, concurrency=1)
    jobs = [{"name": "j", "group": lane} for lane in blocked for _ in range(2)]
    per_served = 100 * LANES // lanes  # 10^4 jobs in the served lanes, whatever ``lanes``
    jobs += [{"name": "j", "group": lane} for lane in served for _ in range(per_served)]
    for i in range(0, len(jobs), 2000):
        q.add_many(jobs[i : i + 2000])
    # warm-up: claims run the ring once: capped lanes take their one slot and
    # park, paused ones park at once; afterwards only the served lanes (1 %) remain
    with redis.Redis.from_url(url) as ring:
        while ring.llen(q.engine.keys.ring) > served_lanes:
            q.claim(1000)
    server, wall = claim_cost(url, q, claims)
    return {"server_us": server, "wall_us": wall}


def measure(url: str, claims: int, lanes: int = LANES) -> dict[str, float]:
    """Both cases on the server at ``url`` (queues of their own names; the caller
    flushes), with ``lanes`` lanes of which 99 % parked: server and wall µs per
    claim of each, and the server ratio."""
    base = one_lane(url, claims, jobs=max(claims + 1000, 2 * lanes))
    parked = parked_99(url, claims, lanes)
    return {
        "one_lane_server_us": base["server_us"],
        "parked_99_server_us": parked["server_us"],
        "ratio_server": parked["server_us"] / base["server_us"],
        "one_lane_wall_us": base["wall_us"],
        "parked_99_wall_us": parked["wall_us"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", default="valkey", choices=["valkey", "redis", "valkey9"])
    parser.add_argument("--claims", type=int, default=2000)
    args = parser.parse_args()
    server = harness.BenchServer(args.server).start()
    try:
        figures = measure(server.url, args.claims)
    finally:
        server.stop()
    line = {"bench": "lane_caps", "server": server.label, "claims": args.claims}
    line.update({k: round(v, 2 if k.startswith("ratio") else 1) for k, v in figures.items()})
    print(json.dumps(line))


if __name__ == "__main__":
    main()
