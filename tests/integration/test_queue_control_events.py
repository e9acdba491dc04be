"""pause, resume and set_weight go through scripts (issue 35): each records its
event (``paused``, ``resumed``, ``lane_changed``; no job), a repeated pause or
resume records nothing, and resume rings the doorbell (the idle worker's
wake: tests/integration/test_worker.py)."""

from __future__ import annotations

import pytest
import redis
from redis.cluster import RedisCluster

from echomq import InvalidWeight, SyncQueue
from echomq.events import Event


def _events_after(sq: SyncQueue, cursor: str) -> list[Event]:
    return list(sq.read_events(cursor).events)


def _cursor(sq: SyncQueue) -> str:
    return sq.read_events(None).cursor or "0"


def test_pause_and_resume_record_one_event_each(sq: SyncQueue) -> None:
    sq.add("j")
    before = _cursor(sq)
    sq.pause()
    sq.pause()  # paused already: nothing changes, nothing is recorded
    assert sq.stats().paused and sq.claim(1) == []
    sq.resume()
    sq.resume()
    assert not sq.stats().paused and len(sq.claim(1)) == 1
    kinds = [(e.kind, e.job_id, e.group) for e in _events_after(sq, before)]
    assert kinds[:2] == [("paused", None, None), ("resumed", None, None)]
    assert [k for k, _, _ in kinds].count("paused") == 1
    assert [k for k, _, _ in kinds].count("resumed") == 1


def test_resume_rings_the_doorbell(sq: SyncQueue, redis_client: redis.Redis | RedisCluster) -> None:
    sq.pause()
    redis_client.delete(sq.engine.keys.wake)
    sq.resume()
    assert redis_client.llen(sq.engine.keys.wake) == 1


def test_set_weight_records_lane_changed_and_bad_weight_writes_nothing(sq: SyncQueue) -> None:
    before = _cursor(sq)
    sq.set_weight("acme", 7)
    assert sq.weights() == {"acme": 7}
    events = _events_after(sq, before)
    assert [(e.kind, e.job_id, e.group) for e in events] == [("lane_changed", None, "acme")]
    cursor = events[-1].id
    for bad in (0, 1001, "3", 2.0):
        with pytest.raises(InvalidWeight, match="1 … 1000"):
            sq.set_weight("acme", bad)  # type: ignore[arg-type]
    assert sq.weights() == {"acme": 7}
    assert _events_after(sq, cursor) == []


def test_set_lane_records_lane_changed(sq: SyncQueue) -> None:
    before = _cursor(sq)
    sq.set_lane(None, concurrency=2)
    events = _events_after(sq, before)
    assert [(e.kind, e.group) for e in events] == [("lane_changed", None)]
