"""A queue's whole keyspace as data, to prove a refused call wrote nothing.

Both the input-limit tests and the fuzz test compare a snapshot taken before
a refusal with one taken after it.
"""

from __future__ import annotations

from typing import Any

import redis

from echomq.keys import QueueKeys
from echomq.schedules import Definition, Timing


def keyspace(client: redis.Redis, queue: str) -> dict[str, Any]:
    """Every key of the queue with its type's content (DUMP for other types)."""
    out: dict[str, Any] = {}
    for key in client.scan_iter(match=f"emq:{{{queue}}}:*", count=1000):
        kind = client.type(key)
        if kind == "hash":
            out[key] = client.hgetall(key)
        elif kind == "zset":
            out[key] = client.zrange(key, 0, -1, withscores=True)
        elif kind == "list":
            out[key] = client.lrange(key, 0, -1)
        else:
            out[key] = client.dump(key)
    return out


def give_unwritten_fixed_keys(client: Any, keys: QueueKeys) -> None:
    """Make the fixed keys no script writes yet exist (settings, events, waiters,
    lane controls, renumber, which exists only while a renumbering runs, and a
    schedule's and the dependencies' keys),
    as they will on a busy queue: while one declared key of a migrating slot is
    missing, the server answers TRYAGAIN to every script before it starts."""
    client.hset(keys.settings, "placeholder", "1")
    client.xadd(keys.events, {"k": "placeholder"})
    client.zadd(keys.waiters, {"job_placeholder": 2**52})
    client.zadd(keys.renumber, {"job_placeholder": 0})  # no such job: a step drops it
    client.hset(keys.lanectl, "placeholder", "1")
    client.zadd(keys.lanewake, {"placeholder-lane": 2**52})
    client.hset(keys.gone, "placeholder-lane", "x")
    never = Definition(Timing(None, 2**40, "UTC"), "placeholder", "null", 0, "", 1, False, True)
    client.hset(keys.schedules, "placeholder", never.encode())
    client.zadd(keys.fires, {"placeholder": 2**47})  # year 6429: still a datetime
    client.hset(keys.fired, "placeholder", "{}")
    client.zadd(keys.blocked, {"job_placeholder": 1})
    client.zadd(keys.releasing, {"job_placeholder": 2**52})
    client.zadd(keys.cancelled, {"job_placeholder": 2**52})  # never past its retention


def set_counter(client: Any, keys: QueueKeys, value: int) -> None:
    """Set a queue's arrival counter as the scripts would leave it: past 2^31 the
    meta mark "rq" tells the next calls to look at it (includes/lanes.lua
    note_high_counter; a queue in format 2 or later without it reads no counter)."""
    client.set(keys.counter, value)
    if value > 2**31:
        client.hset(keys.meta, "rq", "1")
