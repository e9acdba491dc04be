"""Listing a queue's batches (``q.batches()``): newest first, by cursor, bounded
work per call; the index lives and dies with the batches (includes/batch.lua).
Every test runs on each backend."""

from __future__ import annotations

from typing import Any

import pytest

from echomq import SyncQueue
from echomq.batches import BatchStatus, new_batch_id
from echomq.errors import BatchNotFound, InvalidOption
from echomq.keys import QueueKeys


def all_pages(sq: SyncQueue, count: int) -> list[BatchStatus]:
    found: list[BatchStatus] = []
    cursor = None
    for _ in range(1000):
        page = sq.batches(count=count, cursor=cursor)
        found.extend(page.batches)
        cursor = page.cursor
        if cursor is None:
            return found
    raise AssertionError("the pages did not end")


def expire(client: Any, keys: QueueKeys, batch_id: str) -> None:
    """What the end of a batch's retention does: its keys go (Batch.expire)."""
    client.delete(keys.batch(batch_id), keys.batch_jobs(batch_id), keys.batch_done(batch_id))


def test_batches_are_listed_newest_first_by_cursor_as_batch_status_reads_them(
    sq: SyncQueue,
) -> None:
    made = []
    for i in range(7):
        callbacks = {"on_success": {"name": "done", "data": "x" * 100_000}} if i % 2 else {}
        b = sq.batch(**callbacks)
        b.add_many([{"name": "child", "data": i}] * (i + 1))
        if i % 3 == 0:
            b.close()
        made.append(b.id)
    sq.complete(sq.claim(1)[0])  # the oldest batch's first child
    first = sq.batches(count=3)
    assert [s.id for s in first.batches] == made[::-1][:3] and first.cursor is not None
    listed = all_pages(sq, 3)
    assert [s.id for s in listed] == made[::-1]
    for status in listed:
        assert status == sq.batch_status(status.id)  # counts, state, callbacks given
    oldest = listed[-1]
    assert (oldest.total, oldest.completed, oldest.state) == (1, 1, "succeeded")
    assert listed[0].callbacks == {} and listed[1].callbacks == {"on_success": None}
    assert [s.state for s in listed[:3]] == ["running", "open", "open"]


def test_a_queue_that_makes_no_batch_has_no_index(sq: SyncQueue, redis_client: Any) -> None:
    sq.add("plain")
    sq.complete(sq.claim(1)[0])
    page = sq.batches()
    assert page.batches == [] and page.cursor is None
    assert redis_client.exists(sq.engine.keys.batches) == 0


def test_a_batch_gone_with_its_retention_is_not_listed_and_leaves_the_index(
    sq: SyncQueue, redis_client: Any
) -> None:
    keys = sq.engine.keys
    # open batches at the oldest end of the index: they stay, and the sweep goes past them
    stay = [sq.batch().id for _ in range(4)]
    gone = sq.batch()
    gone.add("child")
    gone.close()
    sq.complete(sq.claim(1)[0])  # it succeeded: its keys expire with the retention
    assert redis_client.pttl(keys.batch(gone.id)) > 0
    expire(redis_client, keys, gone.id)
    assert [s.id for s in all_pages(sq, 50)] == stay[::-1]
    assert redis_client.zscore(keys.batches, gone.id) is not None  # listed no more, not swept yet
    later = []
    for _ in range(10):
        later.append(sq.batch().id)
        if redis_client.zscore(keys.batches, gone.id) is None:
            break
    assert redis_client.zscore(keys.batches, gone.id) is None, "the sweep never reached it"
    assert len(later) <= 3  # 5 entries before it, 3 looked at per creation
    assert [s.id for s in all_pages(sq, 50)] == (stay + later)[::-1]
    assert redis_client.zcard(keys.batches) == len(stay) + len(later)


def test_the_sweep_goes_round_the_index_again_and_again(sq: SyncQueue, redis_client: Any) -> None:
    keys = sq.engine.keys
    made = [sq.batch().id for _ in range(6)]
    for batch_id in made[1::2]:
        expire(redis_client, keys, batch_id)
    for _ in range(12):  # at 3 entries a call, each entry is looked at several times
        made.append(sq.batch().id)
    for batch_id in made[-12:-6]:
        expire(redis_client, keys, batch_id)
    for _ in range(12):
        made.append(sq.batch().id)
    alive = [b for b in made if redis_client.exists(keys.batch(b))]
    assert redis_client.zrange(keys.batches, 0, -1) == alive


def test_a_page_looks_at_a_bounded_number_of_batches(sq: SyncQueue, redis_client: Any) -> None:
    keys = sq.engine.keys
    made = [sq.batch().id for _ in range(205)]
    for batch_id in made[4:]:
        expire(redis_client, keys, batch_id)
    first = sq.batches(count=10)
    # 200 entries looked at, all gone: an empty page that goes on
    assert first.batches == [] and first.cursor is not None
    rest = sq.batches(count=10, cursor=first.cursor)
    assert [s.id for s in rest.batches] == made[:4][::-1] and rest.cursor is None


@pytest.mark.parametrize("count", [0, 201, -1, 2.5, "3"])
def test_a_bad_count_is_refused(sq: SyncQueue, count: Any) -> None:
    with pytest.raises(InvalidOption, match=r"count .* allowed integers 1 … 200"):
        sq.batches(count=count)


def test_a_cursor_of_another_query_or_changed_by_hand_is_refused(sq: SyncQueue) -> None:
    for _ in range(3):
        sq.batch()
    cursor = sq.batches(count=1).cursor
    assert cursor is not None
    found = sq.find({"customer": "1"}, count=1)
    assert found.cursor is None
    sq.add_many([{"name": "t", "tags": {"customer": "1"}}] * 3)
    other = sq.find({"customer": "1"}, count=1).cursor
    for bad in (other, cursor[:-2] + "xx", "nope", 7):
        with pytest.raises(InvalidOption, match="not a cursor a page of this query returned"):
            sq.batches(cursor=bad)  # type: ignore[arg-type]


def test_peek_batch_reads_what_batch_status_reads_without_the_callbacks_data(
    sq: SyncQueue, redis_client: Any
) -> None:
    big = {"name": "report", "data": "x" * 300_000}
    b = sq.batch(on_success=big, on_complete=big, on_death={"name": "alarm"})
    b.add_many([{"name": "child"}] * 3)
    b.close()
    sq.complete(sq.claim(1)[0])
    sq.fail(sq.claim(1)[0], "no", retry=False)  # on_death fires
    peeked = sq.peek_batch(b.id)
    assert peeked == sq.batch_status(b.id)
    assert peeked.callbacks["on_death"] is not None and peeked.callbacks["on_success"] is None
    # what crosses the wire: the counters and flags, not the 600 KB of callback data
    raw = redis_client.execute_command(*sq.engine.peek_batch(b.id).wire(by_sha=False))
    assert sum(len(str(x)) for x in raw) < 1000
    stored = redis_client.hgetall(sq.engine.keys.batch(b.id))
    assert sum(len(k) + len(v) for k, v in stored.items()) > 600_000
    with pytest.raises(BatchNotFound, match="no batch"):
        sq.peek_batch(new_batch_id())
    with pytest.raises(InvalidOption, match="not a batch id"):
        sq.peek_batch("job_nope")
