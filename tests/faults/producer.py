"""A soak producer process: ``python -m faults.producer URL QUEUE COUNT SEED PHASE``.

PHASE ``backlog`` fills lanes a–d in proportion to their weights (no delays),
so they all stay backlogged while the workers drain them; PHASE ``mixed``
adds random tiers, groups and delays. 5 % of the jobs ask their handler to
fail (they end dead). Returned ids are appended to ``side_key(queue):added``
so the checker knows exactly which adds were acknowledged.
"""

from __future__ import annotations

import asyncio
import random
import sys
from typing import Any

import redis.asyncio

from echomq import Queue
from faults.invariants import side_key

WEIGHTS = {"a": 1, "b": 2, "c": 3, "d": 4}
GROUPS = (None, "a", "b", "c", "d")
BATCH = 50
FAIL_RATE = 0.05
DELAY_RATE = 0.1


def _job(rng: random.Random, phase: str, seq: int, group: str | None) -> dict[str, Any]:
    job: dict[str, Any] = {
        "name": "work",
        "data": {"fail": rng.random() < FAIL_RATE, "seq": seq},
        "priority": rng.randrange(4),
        "group": group,
    }
    if phase == "mixed" and rng.random() < DELAY_RATE:
        job["delay"] = rng.uniform(0.1, 2.0)
    return job


def _groups(rng: random.Random, phase: str, count: int) -> list[str | None]:
    if phase == "backlog":
        total = sum(WEIGHTS.values())
        out: list[str | None] = []
        for group, weight in WEIGHTS.items():
            out += [group] * (count * weight // total)
        rng.shuffle(out)
        return out
    return [rng.choice(GROUPS) for _ in range(count)]


async def produce(url: str, queue_name: str, count: int, seed: int, phase: str) -> None:
    rng = random.Random(seed)
    queue = Queue(queue_name, url, keep_completed=1_000_000, keep_dead=1_000_000)
    side = redis.asyncio.Redis.from_url(url, decode_responses=True)
    groups = _groups(rng, phase, count)
    try:
        for start in range(0, len(groups), BATCH):
            chunk = groups[start : start + BATCH]
            specs = [_job(rng, phase, start + i, g) for i, g in enumerate(chunk)]
            ids = await queue.add_many(specs)
            await side.rpush(side_key(queue_name) + ":added", *ids)
    finally:
        await side.aclose()
        await queue.close()


if __name__ == "__main__":
    url, queue_name, count, seed, phase = sys.argv[1:6]
    asyncio.run(produce(url, queue_name, int(count), int(seed), phase))
