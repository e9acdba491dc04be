"""The limits of docs/lifecycle.md (issue 14, row 6): each refusal is an EchoMQError
naming the value and the limit, with nothing written; long errors are cut.

These are checks made before anything is sent, so one backend (Valkey) is enough.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest
import redis

from echomq import InvalidDelay, InvalidOption, PayloadError, SyncQueue
from echomq.options import MAX_ERROR_BYTES, MAX_TRACEBACK_BYTES
from keyspace import keyspace

pytestmark = pytest.mark.parametrize("backend", ["valkey"], indirect=True)


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def refused(
    client: redis.Redis, q: SyncQueue, error: type[Exception], match: str, call: Callable[[], Any]
) -> None:
    before = keyspace(client, q.name)
    with pytest.raises(error, match=match):
        call()
    assert keyspace(client, q.name) == before


def test_a_long_error_and_traceback_are_cut_to_1_mib_with_a_marker(sq: SyncQueue) -> None:
    sq.add("j", max_attempts=1)
    [job] = sq.claim(1)
    error = "E" * 10 + "é" * (2 * MAX_ERROR_BYTES) + "end-of-error"
    traceback = (
        "Traceback (most recent call last):\n"
        + "x" * (3 * MAX_TRACEBACK_BYTES)
        + "\nValueError: why"
    )
    sq.fail(job, error, traceback, retry=False)
    stored = sq.get(job.id)
    assert stored is not None and stored.error is not None and stored.traceback is not None
    assert len(stored.error.encode()) <= MAX_ERROR_BYTES
    assert len(stored.traceback.encode()) <= MAX_TRACEBACK_BYTES
    assert stored.error.startswith("EEEEEEEEEEé") and stored.error.endswith("end-of-error")
    assert stored.traceback.endswith("ValueError: why")  # the tail says what was raised
    assert "bytes cut; error keeps at most 1,048,576]" in stored.error
    assert "bytes cut; traceback keeps at most 1,048,576]" in stored.traceback


def test_fail_refuses_text_that_is_not_utf8(sq: SyncQueue, redis_client: redis.Redis) -> None:
    sq.add("j")
    [job] = sq.claim(1)
    refused(redis_client, sq, InvalidOption, "not valid UTF-8", lambda: sq.fail(job, "bad \ud800"))
    refused(redis_client, sq, InvalidOption, "traceback", lambda: sq.fail(job, "ok", "tb \udfff"))


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_nan_and_infinity_are_refused_everywhere(
    sq: SyncQueue, redis_client: redis.Redis, number: float
) -> None:
    sq.add("j")
    [job] = sq.claim(1)
    fragment = "JSON cannot carry; allowed: finite numbers only"
    data = {"a": [1, None, {"b": number}]}
    refused(redis_client, sq, PayloadError, fragment, lambda: sq.add("x", data))
    refused(
        redis_client,
        sq,
        PayloadError,
        fragment,
        lambda: sq.add_many([{"name": "ok"}, {"name": "x", "data": data}]),
    )
    refused(redis_client, sq, PayloadError, fragment, lambda: sq.progress(job, data))
    refused(redis_client, sq, PayloadError, fragment, lambda: sq.complete(job, data))
    sq.add("fine", {"a": None, "b": 1.5})  # a null that was null is fine


def test_add_many_refuses_unknown_keys(sq: SyncQueue, redis_client: redis.Redis) -> None:
    items: list[dict[str, Any]] = [
        {"name": "j", "foo": 1},
        {"name": "j", "job_id": "x"},
        {"name": "j", "name2": 1},
    ]
    for item in items:
        batch = [{"name": "fine"}, item]
        refused(
            redis_client,
            sq,
            InvalidOption,
            r"add_many item 1 has unknown key\(s\) .*; "
            r"allowed: batch, data, dedupe, delay, .*group",
            partial(sq.add_many, batch),
        )


def test_deep_json_is_refused_not_a_recursion_error(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    deep = nested(10_000)
    refused(
        redis_client, sq, PayloadError, "nested deeper than 254 levels", lambda: sq.add("j", deep)
    )
    sq.add("j", nested(254))  # the deepest that is accepted


def test_run_at_is_capped_like_delay(sq: SyncQueue, redis_client: redis.Redis) -> None:
    far = datetime(9999, 1, 1, tzinfo=UTC)
    refused(redis_client, sq, InvalidDelay, "ten years", lambda: sq.add("j", run_at=far))
    refused(
        redis_client,
        sq,
        InvalidDelay,
        "ten years",
        lambda: sq.add_many([{"name": "j", "run_at": far}]),
    )
    sq.add("j", run_at=datetime.now(UTC) + timedelta(days=9 * 365))


def test_names_and_keys_must_be_utf8(sq: SyncQueue, redis_client: redis.Redis) -> None:
    refused(redis_client, sq, InvalidOption, "valid UTF-8", lambda: sq.add("bad\ud800"))
    refused(redis_client, sq, InvalidOption, "valid UTF-8", lambda: sq.add("j", key="k\udfff"))
