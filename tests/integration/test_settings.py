"""Settings on the server (DESIGN §8): configure/settings, and every client obeys them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from clock import wait_past
from echomq import Backoff, InvalidOption, State, SyncQueue
from echomq.keys import QueueKeys


def complete_one(q: SyncQueue) -> None:
    [job] = q.claim(1)
    q.complete(job, job.data)


def test_configure_merges_and_none_removes(sq: SyncQueue) -> None:
    assert sq.settings() == {}
    assert sq.configure(keep_completed=3, max_stalls=2) == {"keep_completed": 3, "max_stalls": 2}
    # a later call changes only what it names
    backoff = Backoff(base=0.5, factor=3.0, cap=60.0, jitter=0.0)
    stored = sq.configure(backoff=backoff, keep_dead_age=2.5, rate=(10, 1.5))
    assert stored == {
        "keep_completed": 3,
        "max_stalls": 2,
        "keep_dead_age": 2.5,
        "backoff": backoff,
        "rate": (10, 1.5),
    }
    # None removes a stored value (it falls back to each client's own option)
    assert sq.configure(keep_completed=None, backoff=None, rate=None) == {
        "max_stalls": 2,
        "keep_dead_age": 2.5,
    }
    assert sq.settings() == {"max_stalls": 2, "keep_dead_age": 2.5}


@pytest.mark.parametrize(
    ("setting", "value", "named"),
    [
        ("keep_completed", -1, "0 … 10000000"),
        ("keep_dead", 1.5, "0 … 10000000"),
        ("keep_completed_age", float("nan"), "seconds >= 0"),
        ("max_stalls", 1001, "0 … 1000"),
        ("max_attempts", 0, "1 … 1000"),
        ("event_stream_length", -5, "0 … 10000000"),
        ("concurrency", 0, "1 … 1000000"),
        ("rate", (0, 1.0), "1 … 100000"),
        ("rate", (5, 0), "seconds >= 0.001"),
        ("rate", (1, 1e-9), "seconds >= 0.001"),  # was stored as a 0 ms window
        ("rate", 5, "(max, per_seconds)"),
        ("backoff", 2.0, "echomq.Backoff"),
        ("keep_everything", 1, "allowed: max_stalls"),
    ],
)
def test_bad_setting_is_refused_and_nothing_written(
    sq: SyncQueue, setting: str, value: Any, named: str
) -> None:
    sq.configure(keep_dead=7)
    with pytest.raises(InvalidOption) as err:
        # a good setting in the same call is not written either
        sq.configure(**{"keep_dead_age": 5, setting: value})
    assert named in str(err.value)
    assert repr(value)[:20] in str(err.value) or setting in str(err.value)
    assert sq.settings() == {"keep_dead": 7}


def test_event_stream_length_is_a_plain_integer_field(
    sq: SyncQueue, redis_client: Any, queue_name: str
) -> None:
    sq.configure(event_stream_length=0)
    settings = QueueKeys(queue_name).settings
    assert redis_client.hget(settings, "event_stream_length") == "0"
    sq.configure(event_stream_length=250)
    assert redis_client.hget(settings, "event_stream_length") == "250"


def test_two_clients_with_other_retention_obey_the_stored_one(
    make_sync: Callable[..., SyncQueue],
) -> None:
    small = make_sync(keep_completed=2)
    default = make_sync()  # keep_completed 1000
    small.configure(keep_completed=3)
    small.add_many([{"name": "j", "data": i} for i in range(12)])
    for _ in range(4):
        complete_one(small)
    assert len(small.jobs(State.COMPLETED)) == 3
    for _ in range(4):
        complete_one(default)
    assert len(default.jobs(State.COMPLETED)) == 3
    # maintenance by either client keeps the stored count too
    small.configure(keep_completed=1)
    default.maintain()
    assert len(default.jobs(State.COMPLETED)) == 1
    # removed: each client's own option applies again
    default.configure(keep_completed=None)
    for _ in range(4):
        complete_one(small)
    assert len(small.jobs(State.COMPLETED)) == 2


def test_stored_max_attempts_is_the_default_of_every_producer(
    make_sync: Callable[..., SyncQueue],
) -> None:
    q = make_sync(max_attempts=2)
    assert q.get(q.add("a")).max_attempts == 2  # type: ignore[union-attr]
    q.configure(max_attempts=5)
    assert q.get(q.add("b")).max_attempts == 5  # type: ignore[union-attr]
    # a per-call option wins over the stored setting
    assert q.get(q.add("c", max_attempts=7)).max_attempts == 7  # type: ignore[union-attr]
    many = q.add_many([{"name": "d"}, {"name": "e", "max_attempts": 1}])
    assert [q.get(i).max_attempts for i in many] == [5, 1]  # type: ignore[union-attr]
    q.configure(max_attempts=None)
    assert q.get(q.add("f")).max_attempts == 2  # type: ignore[union-attr]


def _retry_delay(q: SyncQueue) -> float:
    """Fail the next job with no delay given; the seconds until its retry (server clock)."""
    [job] = q.claim(1)
    assert job.claimed_at is not None
    assert q.fail(job, "boom") is State.FAILED
    assert job.run_at is not None
    return (job.run_at - job.claimed_at).total_seconds()


def test_backoff_is_computed_by_the_server_from_the_stored_setting(
    make_sync: Callable[..., SyncQueue],
) -> None:
    q = make_sync(backoff=Backoff(base=50.0, jitter=0.0))
    q.add_many([{"name": "x"}, {"name": "y"}])
    # no stored backoff: the client's own option
    assert 49.9 < _retry_delay(q) < 51.0
    q.configure(backoff=Backoff(base=500.0, jitter=0.0))
    assert 499.9 < _retry_delay(q) < 501.0


def test_stored_backoff_jitter_stays_in_its_range(make_sync: Callable[..., SyncQueue]) -> None:
    q = make_sync()
    q.configure(backoff=Backoff(base=100.0, jitter=0.5), max_attempts=10)
    q.add_many([{"name": "x"} for _ in range(6)])
    delays = [_retry_delay(q) for _ in range(6)]
    assert all(49.9 < d < 151.0 for d in delays)


def test_stored_max_stalls_decides_a_stalled_job(make_sync: Callable[..., SyncQueue]) -> None:
    q = make_sync(max_stalls=5)
    q.configure(max_stalls=0)
    job_id = q.add("s")
    [job] = q.claim(1, lease=0.05)
    assert job.lease_deadline is not None
    wait_past(q.client(), job.lease_deadline)
    q.maintain()
    dead = q.get(job_id)
    assert dead is not None and dead.state is State.DEAD


@pytest.mark.parametrize(
    "rate",
    [(0, 1.0), (100_001, 1.0), (1, 0.0), (1, 1e-9), (1, 0.0009), (1, 604_801.0), (1.5, 1.0), 5],
)
def test_one_rate_check_for_a_lane_and_the_queue(sq: SyncQueue, rate: Any) -> None:
    """A lane's rate and the queue-wide one are refused alike, with the same words."""
    with pytest.raises(InvalidOption) as lane:
        sq.set_lane("acme", rate=rate)
    with pytest.raises(InvalidOption) as queue_wide:
        sq.configure(rate=rate)
    assert str(lane.value) == str(queue_wide.value)
    assert not sq.exists()


@pytest.mark.parametrize("rate", [(1, 0.001), (100_000, 604_800.0), (7, 0.25)])
def test_a_stored_rate_is_taken_back_as_it_reads(sq: SyncQueue, rate: tuple[int, float]) -> None:
    stored = sq.configure(rate=rate)["rate"]
    assert stored == rate
    assert sq.configure(rate=stored)["rate"] == rate  # what settings() shows is accepted
    sq.set_lane("acme", rate=stored)
    (lane,) = [x for x in sq.lanes() if x.group == "acme"]
    assert lane.rate == rate
