"""Lanes that leave (docs/ordering.md "Lanes that leave"): many short-lived
tenants leave nothing behind but the controls set on purpose."""

from __future__ import annotations

import time

import redis

from echomq import SyncQueue
from echomq.keys import QueueKeys

LANES = 2000
BATCH = 200


def lane_fields(client: redis.Redis, keys: QueueKeys) -> dict[str, str]:
    fields = client.hgetall(keys.lanectl)
    return {str(k): str(v) for k, v in fields.items() if ":" in str(k)}


def test_short_lived_lanes_leave_nothing_behind(sq: SyncQueue, redis_client: redis.Redis) -> None:
    keys = QueueKeys(sq.name)
    sq.set_lane("kept", concurrency=2)  # an explicit control: a setting, kept
    sq.set_lane("hold", paused=True)  # parked all along: lanes leave the ring past it
    sq.add("j", group="hold")
    sq.configure(rate=(100_000, 1))  # the queue-wide rate list is written too
    done = 0
    for start in range(0, LANES, BATCH):
        lanes = [f"t{i}" for i in range(start, start + BATCH)]
        sq.add_many([{"name": "j", "group": lane} for lane in lanes])
        for lane in lanes[::4]:
            sq.throttle(lane, 0.05)  # a 429 once: an ended throttle is swept
        deadline = time.monotonic() + 30
        while done < start + BATCH:
            jobs = sq.claim(100)
            if not jobs:  # only throttled lanes left: they come back in 50 ms
                time.sleep(0.02)
                continue
            done += sum(err is None for err in sq.complete_many([(j, None) for j in jobs]))
            assert time.monotonic() < deadline, f"{done} done"
    assert len(lane_fields(redis_client, keys)) > LANES // 8  # the throttles are there

    sq.set_lane("hold", paused=False)
    [held] = sq.claim(5)
    sq.complete(held)
    runs = 0
    while any(k.startswith("t:") for k in lane_fields(redis_client, keys)):
        sq.maintain()
        runs += 1
        assert runs <= 100, "the sweep does not end"
    assert runs >= 2  # in budgeted steps, not all at once

    assert lane_fields(redis_client, keys) == {"c:kept": "2"}
    for empty in (keys.gone, keys.served, keys.lanewake, keys.ring, keys.turn, keys.weights):
        assert redis_client.exists(empty) == 0, empty
    assert list(redis_client.scan_iter(match=keys.prefix + "rate:*")) == []
    assert list(redis_client.scan_iter(match=keys.prefix + "lane:*")) == []
    # the queue-wide rate list holds at most max entries and expires after its window
    deadline = time.monotonic() + 5
    while redis_client.exists(keys.queue_rate):
        assert time.monotonic() < deadline
        time.sleep(0.05)
