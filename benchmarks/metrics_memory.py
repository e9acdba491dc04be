"""What the metrics kept on the server cost in memory (DESIGN §10, issue 30): 72
hours of minutes for 100 job names.

On a private server (harness.BenchServer, the server's default settings) a
queue with ``configure(metrics=True)`` completes ``--jobs`` jobs of each of
100 names through ``complete_many``, so one minute's hash holds 100 names as
the completion script writes them. That hash is then copied (DUMP / RESTORE)
into every other minute of the 72 hours (4,320 minute hashes: the most the
server keeps, each expiring 72 h after its minute began), and the
``used_memory`` delta is reported: every name finishing jobs in every minute,
the worst case of the kept window. Two synthetic kinds rewrite every field of
that hash first (synthetic values, real memory): ``typical``, four buckets of
each histogram used and every number six digits long (a busy name: some
hundred thousand jobs a minute, run times in a few buckets); ``worst``, every
bucket used and every number seven digits long (the longest values the
format holds in practice).

    python benchmarks/metrics_memory.py [--server valkey|redis|valkey9] [--jobs 20]

A measurement, not a test: nothing here asserts a size.
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
from echomq.metrics import BUCKETS, KEPT_MINUTES  # noqa: E402

NAMES = 100


def one_minute(q: SyncQueue, raw: redis.Redis, jobs: int) -> str:
    """Complete ``jobs`` jobs of each name; the minute hash they were counted in."""
    q.configure(metrics=True)
    for start in range(0, NAMES * jobs, 1000):
        size = min(1000, NAMES * jobs - start)
        q.add_many([{"name": f"job.name.{(start + i) % NAMES:03d}"} for i in range(size)])
        claimed = q.claim(size)
        q.complete_many([(job, None) for job in claimed])
    keys = raw.keys(q.engine.keys.prefix + "metrics:*")
    # the fullest minute (a run that crossed a minute boundary splits the names)
    return str(max(keys, key=lambda k: int(raw.hlen(k))))


#: the synthetic kinds: (buckets used per histogram, digits of every number)
SYNTHETIC = {"typical": (4, 6), "worst": (len(BUCKETS) + 1, 7)}


def synthetic_value(used: int, digits: int) -> str:
    """A field with ``used`` buckets of each histogram filled and every number
    ``digits`` long (the stored format, includes/metrics.lua: counts, then the
    r/w sums and bucket:count)."""
    big = "1" * digits
    buckets = " ".join(f"{b}:{big}" for b in range(1, used + 1))
    return f"{big} {big} {big} r{big} {buckets} w{big} {buckets}"


def copies(raw: redis.Redis, key: str) -> int:
    """``used_memory`` grown by KEPT_MINUTES - 1 copies of ``key`` (its TTL each)."""
    dump = raw.dump(key)
    ttl = int(raw.pttl(key))
    base = key.rsplit(":", 1)[0]
    before = int(raw.info("memory")["used_memory"])
    pipe = raw.pipeline(transaction=False)
    for i in range(1, KEPT_MINUTES):
        pipe.restore(f"{base}:copy{i}", ttl, dump)
        if i % 500 == 0:
            pipe.execute()
    pipe.execute()
    return int(raw.info("memory")["used_memory"]) - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default="valkey", choices=("valkey", "redis", "valkey9"))
    parser.add_argument("--jobs", type=int, default=20, help="jobs per name in the minute")
    args = parser.parse_args()
    with harness.BenchServer(args.server) as server:
        raw = redis.Redis.from_url(server.url, decode_responses=True)
        raw.config_set("hash-max-listpack-value", harness.SERVER_DEFAULT_LISTPACK_VALUE)
        for kind in ("measured", *SYNTHETIC):
            started = time.perf_counter()
            q = SyncQueue(f"metrics-{kind}", server.url)
            key = one_minute(q, raw, args.jobs)
            if kind in SYNTHETIC:
                fields = [f for f in raw.hkeys(key) if f.startswith("n:")]
                raw.hset(key, mapping=dict.fromkeys(fields, synthetic_value(*SYNTHETIC[kind])))
            minute_bytes = int(raw.memory_usage(key, samples=0) or 0)
            grown = copies(raw, key)
            total = grown + minute_bytes
            print(
                json.dumps(
                    {
                        "server": server.label,
                        "kind": kind,
                        "names": int(raw.hlen(key)) - 1,
                        "jobs_per_name": args.jobs,
                        "minute_hash_bytes": minute_bytes,
                        "encoding": raw.object("encoding", key),
                        "minutes": KEPT_MINUTES,
                        "bytes_72h": total,
                        "mib_72h": round(total / 2**20, 1),
                        "bytes_per_name_minute": round(total / KEPT_MINUTES / NAMES, 1),
                        "seconds": round(time.perf_counter() - started, 1),
                    }
                )
            )
            q.close()
        raw.close()


if __name__ == "__main__":
    main()
