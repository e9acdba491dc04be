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
time per claim script call (INFO commandstats, usec_per_call of evalsha),
plus the client's wall-clock time per claim.

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


def claim_cost(url: str, q: SyncQueue, claims: int) -> tuple[float, float]:
    """(server usec per claim call, client usec per claim)."""
    client = redis.Redis.from_url(url)
    client.config_resetstat()
    start = time.perf_counter()
    for _ in range(claims):
        assert q.claim(1)
    wall = (time.perf_counter() - start) / claims * 1e6
    stats = client.info("commandstats")["cmdstat_evalsha"]
    return stats["usec"] / stats["calls"], wall


def one_lane(url: str, claims: int) -> dict[str, float]:
    q = SyncQueue("bench-one-lane", url=url)
    for _ in range(20):
        q.add_many([{"name": "j", "group": "solo"}] * 1000)
    q.claim(1)  # warm-up (script load)
    server, wall = claim_cost(url, q, claims)
    return {"server_us": server, "wall_us": wall}


def parked_99(url: str, claims: int) -> dict[str, float]:
    q = SyncQueue("bench-parked-99", url=url)
    blocked = [f"t{i}" for i in range(LANES - SERVED_LANES)]
    served = [f"s{i}" for i in range(SERVED_LANES)]
    for i, lane in enumerate(blocked):
        if i % 2:
            q.set_lane(lane, paused=True)
        else:
            q.set_lane(lane, concurrency=1)
    jobs = [{"name": "j", "group": lane} for lane in blocked for _ in range(2)]
    jobs += [{"name": "j", "group": lane} for lane in served for _ in range(100)]
    for i in range(0, len(jobs), 2000):
        q.add_many(jobs[i : i + 2000])
    # warm-up: claims run the ring once: capped lanes take their one slot and
    # park, paused ones park at once; afterwards only the 100 served lanes remain
    ring = redis.Redis.from_url(url)
    while ring.llen(q.engine.keys.ring) > SERVED_LANES:
        q.claim(1000)
    server, wall = claim_cost(url, q, claims)
    return {"server_us": server, "wall_us": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", default="valkey", choices=["valkey", "redis", "valkey9"])
    parser.add_argument("--claims", type=int, default=2000)
    args = parser.parse_args()
    server = harness.BenchServer(args.server).start()
    try:
        base = one_lane(server.url, args.claims)
        parked = parked_99(server.url, args.claims)
    finally:
        server.stop()
    line = {
        "bench": "lane_caps",
        "server": server.label,
        "claims": args.claims,
        "one_lane_server_us": round(base["server_us"], 1),
        "parked_99_server_us": round(parked["server_us"], 1),
        "ratio_server": round(parked["server_us"] / base["server_us"], 2),
        "one_lane_wall_us": round(base["wall_us"], 1),
        "parked_99_wall_us": round(parked["wall_us"], 1),
    }
    print(json.dumps(line))


if __name__ == "__main__":
    main()
