"""The queue's event stream (docs/lifecycle.md "Events"), on every backend.

Each transition writes its event in the same script; a reader follows the
stream from now or resumes after an id, and is told when it missed events
that were trimmed. The stream length is the stored setting
``event_stream_length`` (``configure``; one test also writes the settings
hash field by hand).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from echomq import Event, Queue, SyncQueue
from echomq.events import EventPage
from echomq.keys import QueueKeys

DEADLINE = 10.0


def all_after(q: SyncQueue, cursor: str) -> list[Event]:
    """Every event after ``cursor`` (pages until caught up)."""
    out: list[Event] = []
    while True:
        page: EventPage = q.read_events(cursor)
        out.extend(page.events)
        if not page.events:
            return out
        cursor = page.cursor


def kinds_of(events: list[Event], job_id: str) -> list[str]:
    return [e.kind for e in events if e.job_id == job_id]


def one(events: list[Event], job_id: str, kind: str, nth: int = 0) -> Event:
    return [e for e in events if e.job_id == job_id and e.kind == kind][nth]


def poll(condition: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def set_length(q: SyncQueue, length: int) -> None:
    q.configure(event_stream_length=length)


def test_every_transition_writes_its_event_with_its_fields(sq: SyncQueue) -> None:
    start = sq.read_events(None).cursor
    # a: added → claimed → progress → retrying → claimed → completed
    a = sq.add("a", {"x": 1}, group="g1")
    [ja] = sq.claim(1)
    sq.progress(ja, {"pct": 50})
    sq.fail(ja, "boom " * 100, retry_delay=0)
    ja2 = poll(lambda: sq.claim(1), "the retry to be claimable")[0]
    sq.complete(ja2, {"ok": True})
    # b: added → claimed → dead → requeued → removed
    b = sq.add("b", max_attempts=1)
    [jb] = sq.claim(1)
    sq.fail(jb, "fatal")
    assert sq.retry_dead([b]) == [b]
    assert sq.remove(b)
    # c: a lease that expires → stalled (the job is waiting again)
    c = sq.add("c")
    sq.claim(1, lease=0.05)
    poll(lambda: sq.maintain().reaped, "the lease to be reaped")
    [jc] = sq.claim(1)
    sq.release(jc)  # released
    # d: delayed (it becomes waiting at its next_run with no event of its own);
    # e: cancelled before it started
    d = sq.add("d", delay=0.05)
    poll(lambda: sq.maintain().promoted, "the delayed job to be promoted")
    e = sq.add("e")
    assert sq.cancel(e)
    events = all_after(sq, start)

    assert kinds_of(events, a) == [
        "added", "claimed", "progress", "retrying", "claimed", "completed"
    ]  # fmt: skip
    assert kinds_of(events, b) == ["added", "claimed", "dead", "requeued", "removed"]
    assert kinds_of(events, c) == ["added", "claimed", "stalled", "claimed", "released"]
    assert kinds_of(events, d) == ["added"]
    assert kinds_of(events, e) == ["added", "cancelled", "removed"]

    assert {ev.group for ev in events if ev.job_id == a} == {"g1"}
    assert {ev.group for ev in events if ev.job_id != a} == {None}
    assert one(events, a, "claimed").attempt == 1
    assert one(events, a, "claimed", 1).attempt == 2
    assert one(events, a, "progress").progress == {"pct": 50}
    retrying = one(events, a, "retrying")
    assert retrying.attempt == 1 and retrying.next_run is not None
    assert retrying.error is not None and retrying.error.startswith("boom")
    assert len(retrying.error.encode()) == 200  # cut to the events' bound
    assert one(events, a, "completed").result_size == len(b'{"ok":true}')
    dead = one(events, b, "dead")
    assert (dead.attempt, dead.error) == (1, "fatal")
    assert one(events, c, "stalled").stalls == 1
    assert one(events, d, "added").next_run is not None
    assert one(events, e, "added").next_run is None
    ids = [ev.id for ev in events]
    assert ids == sorted(ids, key=lambda i: tuple(map(int, i.split("-"))))
    assert all(ev.at is not None for ev in events)
    ats = [ev.at for ev in events]
    assert ats == sorted(ats)  # type: ignore[type-var]


def test_a_retried_job_is_never_added_twice(sq: SyncQueue) -> None:
    start = sq.read_events(None).cursor
    job_id = sq.add("j", max_attempts=3)
    for _ in range(3):
        job = poll(lambda: sq.claim(1), "a claim")[0]
        sq.fail(job, "again", retry_delay=0)
    events = all_after(sq, start)
    assert kinds_of(events, job_id) == [
        "added", "claimed", "retrying", "claimed", "retrying", "claimed", "dead"
    ]  # fmt: skip


def test_add_many_and_claim_n_write_one_event_per_job(sq: SyncQueue) -> None:
    start = sq.read_events(None).cursor
    ids = sq.add_many([{"name": "j", "data": i} for i in range(50)])
    jobs = sq.claim(50)
    sq.complete_many([(job, None) for job in jobs])
    events = all_after(sq, start)
    for kind in ("added", "claimed", "completed"):
        assert [e.job_id for e in events if e.kind == kind] == ids


def test_events_follow_from_now_and_resume_after_an_id(sq: SyncQueue) -> None:
    sq.add("before")
    stream = sq.events()  # from now: the moment of this call
    first = sq.add("first")
    got = next(stream)
    assert (got.kind, got.job_id) == ("added", first)
    second, third = sq.add("second"), sq.add("third")
    assert [next(stream).job_id for _ in range(2)] == [second, third]
    resumed = sq.events(after=got.id)  # exclusive
    assert [next(resumed).job_id for _ in range(2)] == [second, third]


def test_a_trimmed_cursor_resumes_at_the_oldest_event_with_a_missed_notice(
    sq: SyncQueue, redis_client: Any, queue_name: str
) -> None:
    set_length(sq, 10)
    first = sq.add("first")
    [added] = sq.read_events("0").events
    assert (added.job_id, added.id) == (first, "1")
    for _ in range(300):  # one stream entry each: the server drops whole nodes of 100
        sq.add("j")
    page = sq.read_events(added.id)
    assert page.missed > 0
    stream = sq.events(after=added.id)
    notice = next(stream)
    assert (notice.kind, notice.job_id, notice.id) == ("missed", None, added.id)
    assert notice.skipped == page.missed
    oldest = next(stream)
    assert int(oldest.id) == 1 + notice.skipped + 1  # events are numbered without gaps
    assert sq.read_events(oldest.id).missed == 0  # a retained cursor: no notice


@pytest.mark.parametrize("how", ["configure", "raw hash field"])
def test_length_zero_writes_no_stream(
    sq: SyncQueue, redis_client: Any, queue_name: str, how: str
) -> None:
    if how == "configure":
        set_length(sq, 0)
    else:
        redis_client.hset(QueueKeys(queue_name).settings, "event_stream_length", 0)
    job_id = sq.add("j")
    [job] = sq.claim(1)
    sq.progress(job, 1)
    sq.complete(job)
    assert sq.get(job_id) is not None
    assert redis_client.exists(QueueKeys(queue_name).events) == 0
    set_length(sq, 5)  # on again: events go on from here
    start = sq.read_events(None).cursor
    other = sq.add("k")
    assert [(e.kind, e.job_id) for e in all_after(sq, start)] == [("added", other)]


def test_the_stream_stays_near_its_length(
    sq: SyncQueue, redis_client: Any, queue_name: str
) -> None:
    set_length(sq, 150)
    for _ in range(500):
        sq.add("j")  # one entry of one event each
    kept = len(all_after(sq, "0"))
    assert 150 <= kept <= 150 + 100  # approximate trimming: whole nodes of 100 entries


def test_a_bad_cursor_is_refused_before_anything_is_sent(sq: SyncQueue) -> None:
    from echomq import InvalidId

    with pytest.raises(InvalidId, match="event id"):
        sq.events(after="job_123")
    with pytest.raises(InvalidId, match="event id"):
        sq.read_events("nope")


async def test_async_events_see_a_new_job(aq: Queue) -> None:
    stream = aq.events()
    reader = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0)
    job_id = ""
    deadline = time.monotonic() + DEADLINE
    while not reader.done() and time.monotonic() < deadline:
        job_id = await aq.add("j")
        await asyncio.wait([reader], timeout=0.3)
    event = reader.result()
    assert event.kind == "added" and event.job_id is not None
    assert job_id
    await stream.aclose()  # type: ignore[attr-defined]


def server_ms(q: SyncQueue) -> float:
    """The server clock now (a read of the stream's cursor is not a clock: use TIME)."""
    seconds, micros = q.client().time()
    return seconds * 1000 + micros / 1000


def test_expiry_cancel_of_a_running_job_delayed_release_and_purge(sq: SyncQueue) -> None:
    start = sq.read_events(None).cursor
    # f: expired before it started → expired, dead
    f = sq.add("f", expires=0.05)
    job_f = sq.get(f)
    assert job_f is not None and job_f.expires_at is not None
    expiry_ms = job_f.expires_at.timestamp() * 1000
    poll(lambda: server_ms(sq) > expiry_ms, "the job's expiry")
    assert sq.claim(1) == []
    # g: cancelled while running → cancelled, dead; h: cancelled with retry → retrying
    g, h = sq.add("g"), sq.add("h")
    sq.claim(2)
    assert sq.cancel(g) and sq.cancel(h, retry=True)
    # i: released with a delay → released with next_run; then purged from dead
    i = sq.add("i", max_attempts=1)
    [job_i] = sq.claim(1)
    sq.release(job_i, delay=3600)
    k = sq.add("k", max_attempts=1)
    [job_k] = sq.claim(1)
    sq.fail(job_k, "x")
    assert sq.purge_dead([k]) == [k]
    events = all_after(sq, start)
    assert kinds_of(events, f) == ["added", "expired", "dead"]
    assert one(events, f, "dead").error.startswith("Expired")  # type: ignore[union-attr]
    assert kinds_of(events, g) == ["added", "claimed", "cancelled", "dead"]
    assert kinds_of(events, h) == ["added", "claimed", "cancelled", "retrying"]
    assert one(events, h, "retrying").next_run is not None
    assert kinds_of(events, i) == ["added", "claimed", "released"]
    assert one(events, i, "released").next_run is not None
    assert kinds_of(events, k) == ["added", "claimed", "dead", "removed"]


def test_a_large_batch_is_split_into_entries_numbered_without_gaps(sq: SyncQueue) -> None:
    start = sq.read_events(None).cursor
    ids = sq.add_many([{"name": "j"} for _ in range(1200)])  # three entries of up to 500
    events = all_after(sq, start)
    assert [e.job_id for e in events] == ids
    numbers = [int(e.id) for e in events]
    assert numbers == list(range(int(start) + 1, int(start) + 1201))
    resumed = sq.read_events(str(int(start) + 700))  # inside the second entry
    assert resumed.events[0].job_id == ids[700]


def test_a_stream_deleted_by_hand_goes_on_numbering_and_readers_hear_they_missed(
    sq: SyncQueue, redis_client: Any, queue_name: str
) -> None:
    first = sq.add("first")
    second = sq.add("second")
    [one_event, _] = sq.read_events("0").events
    assert one_event.job_id == first
    redis_client.delete(QueueKeys(queue_name).events)
    fresh = sq.read_events(None).cursor  # from now, with no stream: the last number given
    assert fresh == "2"
    third = sq.add("third")
    [after_fresh] = sq.read_events(fresh).events
    assert (after_fresh.job_id, after_fresh.id) == (third, "3")  # never numbered again from 1
    assert sq.read_events(fresh).missed == 0
    page = sq.read_events(one_event.id)  # the reader had event 1: event 2 is gone
    assert page.missed == 1
    assert [(e.kind, e.job_id, e.id) for e in page.with_notice(one_event.id)] == [
        ("missed", None, "1"),
        ("added", third, "3"),
    ]
    assert second not in [e.job_id for e in all_after(sq, "0")]


def test_a_stream_ahead_of_the_counter_goes_on_after_its_last_event(
    sq: SyncQueue, redis_client: Any, queue_name: str
) -> None:
    # a stream numbered by a writer that kept no counter (an older echomq, or the
    # meta hash's field deleted by hand): numbering goes on after the stream's last id
    keys = QueueKeys(queue_name)
    sq.add("first")
    redis_client.xadd(keys.events, {"t": "0", "n": "1", "k": "added", "j": "x", "g": ""}, id="40-0")
    assert sq.read_events(None).cursor == "40"
    redis_client.hdel(keys.meta, "ev")
    ids = sq.add_many([{"name": "j"} for _ in range(600)])  # two entries: 41-540, 541-640
    events = all_after(sq, "40")
    assert [e.job_id for e in events] == ids
    assert [int(e.id) for e in events] == list(range(41, 641))
    assert redis_client.hget(keys.meta, "ev") == "640"
    assert sq.read_events(None).cursor == "640"
    nxt = sq.add("next")
    assert [(e.job_id, e.id) for e in all_after(sq, "640")] == [(nxt, "641")]
    redis_client.hset(keys.meta, "ev", "5")  # behind the stream: its XADD is refused
    again = sq.add("again")
    assert [(e.job_id, e.id) for e in all_after(sq, "641")] == [(again, "642")]
    assert redis_client.hget(keys.meta, "ev") == "642"
