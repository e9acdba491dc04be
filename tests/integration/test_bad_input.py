"""Bad input raises an EchoMQError naming the value and the range, and writes nothing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
import redis

from echomq import (
    EchoMQError,
    InvalidDelay,
    InvalidName,
    InvalidOption,
    InvalidPriority,
    InvalidWeight,
    LeaseLost,
    OrderingMismatch,
    PayloadError,
    SyncQueue,
)

BAD_ADDS: list[tuple[dict[str, Any], type[EchoMQError], str]] = [
    ({"priority": -1}, InvalidPriority, "0 … 2097151"),
    ({"priority": 2**21}, InvalidPriority, "0 … 2097151"),
    ({"priority": 1.0}, InvalidPriority, "not an integer"),
    ({"priority": "2"}, InvalidPriority, "not an integer"),
    ({"group": "has space"}, InvalidName, "1–128 characters"),
    ({"group": "{tag}"}, InvalidName, "1–128 characters"),
    ({"group": ""}, InvalidName, "1–128 characters"),
    ({"group": "x" * 129}, InvalidName, "1–128 characters"),
    ({"data": {1, 2}}, PayloadError, "not JSON-serialisable"),
    ({"data": "x" * (512 * 1024)}, PayloadError, "limit is 524288 bytes"),
    ({"delay": -0.5}, InvalidDelay, "allowed seconds 0"),
    ({"delay": float("nan")}, InvalidDelay, "allowed seconds 0"),
    ({"run_at": datetime(2030, 1, 1)}, InvalidDelay, "naive"),
    ({"run_at": "tomorrow"}, InvalidDelay, "not a datetime"),
    ({"max_attempts": 0}, InvalidOption, "1 … 1000"),
    ({"key": ""}, InvalidOption, "1 … 512"),
]


def queue_keys(client: redis.Redis, name: str) -> list[str]:
    return list(client.scan_iter(match=f"emq:{{{name}}}:*"))


@pytest.mark.parametrize(("kwargs", "error", "fragment"), BAD_ADDS)
def test_bad_add_raises_and_writes_nothing(
    sq: SyncQueue,
    redis_client: redis.Redis,
    kwargs: dict[str, Any],
    error: type[EchoMQError],
    fragment: str,
) -> None:
    with pytest.raises(error, match=fragment):
        sq.add("job", **kwargs)
    with pytest.raises(error):
        sq.add_many([{"name": "fine"}, {"name": "job", **kwargs}])
    assert queue_keys(redis_client, sq.name) == []


@pytest.mark.parametrize("name", ["", "a b", "q{1}", "é", "x" * 129, None])
def test_bad_queue_names_are_refused(backend_url: str, name: object) -> None:
    with pytest.raises(InvalidName, match="1–128 characters"):
        SyncQueue(name, backend_url)  # type: ignore[arg-type]


@pytest.mark.parametrize("weight", [0, 1001, 2.5, "3", True])
def test_bad_weights_are_refused(sq: SyncQueue, redis_client: redis.Redis, weight: object) -> None:
    with pytest.raises(InvalidWeight, match="1 … 1000"):
        sq.set_weight("acme", weight)  # type: ignore[arg-type]
    assert queue_keys(redis_client, sq.name) == []


@pytest.mark.parametrize(("n", "lease"), [(0, 30.0), (-1, 30.0), (1.5, 30.0), (1, 0), (1, -1)])
def test_bad_claims_are_refused(
    sq: SyncQueue, redis_client: redis.Redis, n: Any, lease: Any
) -> None:
    sq.add("j")
    with pytest.raises(InvalidOption, match="allowed"):
        sq.claim(n, lease=lease)
    assert sq.stats().counts["waiting"] == 1


def test_complete_fail_extend_by_a_non_holder(make_sync: Callable[..., SyncQueue]) -> None:
    q = make_sync()
    q.add("j")
    [job] = q.claim(1)
    forged = type(job)(
        **{**{f: getattr(job, f) for f in job.__dataclass_fields__}, "lease_token": "999"}
    )
    for call in (
        lambda: q.complete(forged),
        lambda: q.fail(forged, "x"),
        lambda: q.extend(forged, 5),
    ):
        with pytest.raises(LeaseLost):
            call()
    unclaimed = q.get(job.id)
    assert unclaimed is not None
    unclaimed.lease_token = None
    with pytest.raises(LeaseLost, match="no lease"):
        q.complete(unclaimed)
    q.complete(job)


def test_opening_with_the_other_ordering_is_refused(
    make_sync: Callable[..., SyncQueue],
) -> None:
    make_sync(ordering="composite").add("j")
    with pytest.raises(OrderingMismatch, match="mint"):
        make_sync(ordering="mint").add("j")


def test_unknown_ordering_is_refused(backend_url: str) -> None:
    with pytest.raises(InvalidOption, match="ordering"):
        SyncQueue("q", backend_url, ordering="fifo")  # type: ignore[arg-type]
