"""Where a waiting job's memory goes, at the server's default settings (issue 20's
memory target: the profile behind RESULTS.md's memory figures).

For each kind of waiting job, ``count`` of them are added to a fresh queue on a
private server (harness.BenchServer) whose ``hash-max-listpack-value`` is the
server default, 64, and reported per job: the ``used_memory`` delta less the
payload, the job key alone (``MEMORY USAGE``, the mean of a sample), the
rest (the lane's sorted-set entry and the queue's other per-job entries),
the hash's encoding and its number of fields. Kinds:

- ``plain``: ``add(name, data)`` with a 100-byte JSON payload;
- ``options``: the same with every per-job option a waiting job can carry
  (group, priority, max_attempts, expires, headers; an idempotency key is a
  key of its own, so it is left out);
- ``scheduled``: jobs a schedule fired (``every``: one schedule per job,
  fired by ``maintain``; at most 1,000, a queue's limit), which carry the
  schedule's id and fire time: their job key only (the memory delta also
  holds the schedules).

    python benchmarks/job_memory.py [--server valkey|redis|valkey9] [--count 2000]

A measurement, not a test: nothing here asserts a size.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import harness  # noqa: E402

from echomq import Queue  # noqa: E402

PAYLOAD = "x" * 98  # JSON-encoded: exactly 100 bytes
SAMPLE = 100
GROUP = "tenant-7"
#: a queue holds at most this many schedules: the scheduled kind's count
SCHEDULES = 1_000


async def fill(q: Queue, kind: str, count: int) -> None:
    if kind == "scheduled":
        for i in range(count):  # count <= SCHEDULES, a queue's limit
            await q.schedule(f"s{i}", every=1.0, name="noop", data=PAYLOAD)
        await asyncio.sleep(1.2)  # every schedule's first fire time has passed
        for _ in range(100):  # a maintenance pass fires a bounded number
            if (await q.stats()).counts.get("waiting", 0) > count:
                break
            await q.maintain()
        return
    extra = {}
    if kind == "options":
        extra = {
            "group": GROUP,
            "priority": 2,
            "max_attempts": 5,
            "expires": 86_400.0,
            "headers": {"trace": "4bf92f3577b34da6"},
        }
    for start in range(0, count, 1000):
        size = min(1000, count - start)
        await q.add_many([{"name": "noop", "data": PAYLOAD, **extra} for _ in range(size)])


async def measure(url: str, raw: redis.Redis, kind: str, count: int) -> dict[str, object]:
    async with Queue(f"mem-{kind}", url) as q:
        await q.add("noop")  # the queue's fixed keys exist before the baseline
        before = int(raw.info("memory")["used_memory"])
        await fill(q, kind, count)
        after = int(raw.info("memory")["used_memory"])
        group = GROUP if kind == "options" else None
        # the last SAMPLE of the lane: the baseline's job is the first of the default lane
        size = count + (1 if group is None else 0)
        jobs = await q.jobs("waiting", offset=max(0, size - SAMPLE), count=SAMPLE, group=group)
        keys = [q.engine.keys.job(j.id) for j in jobs]
    usage = [int(raw.memory_usage(k, samples=0) or 0) for k in keys]
    # the scheduled kind's delta also holds the schedules themselves: job key only
    per_job = None if kind == "scheduled" else (after - before) / count
    job_key = statistics.mean(usage)
    return {
        "kind": kind,
        "jobs_waiting_sampled": len(keys),
        "bytes_per_job_beyond_payload": per_job and round(per_job - len(PAYLOAD) - 2, 1),
        "job_key_bytes": round(job_key, 1),
        "rest_bytes": per_job and round(per_job - job_key, 1),
        "encoding": raw.object("encoding", keys[-1]),
        "hash_fields": int(raw.hlen(keys[-1])),
        "fields": sorted(raw.hkeys(keys[-1])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default="valkey", choices=("valkey", "redis", "valkey9"))
    parser.add_argument("--count", type=int, default=2_000)
    args = parser.parse_args()
    with harness.BenchServer(args.server) as server:
        raw = redis.Redis.from_url(server.url, decode_responses=True)
        raw.config_set("hash-max-listpack-value", harness.SERVER_DEFAULT_LISTPACK_VALUE)
        for kind in ("plain", "options", "scheduled"):
            started = time.perf_counter()
            count = min(args.count, SCHEDULES) if kind == "scheduled" else args.count
            found = asyncio.run(measure(server.url, raw, kind, count))
            found["server"] = server.label
            found["seconds"] = round(time.perf_counter() - started, 1)
            print(json.dumps(found))
        raw.close()


if __name__ == "__main__":
    main()
