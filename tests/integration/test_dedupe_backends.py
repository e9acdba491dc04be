"""Deduplication on every backend (Valkey, Redis 7, Valkey 9, the cluster): the
modes' decisions that need no clock control, bad input, tasks and events.
The edges in time run on a frozen clock in test_dedupe.py."""

from __future__ import annotations

import math
from typing import Any

import pytest
import redis

from echomq import Dedupe, EchoMQError, InvalidOption, State, SyncQueue

BAD_RULES: list[tuple[dict[str, Any], str]] = [
    ({"mode": "once"}, "not one of drop, throttle, debounce, latest"),
    ({"window": 0}, "allowed seconds > 0"),
    ({"window": -1}, "allowed seconds > 0"),
    ({"window": math.nan}, "allowed seconds > 0"),
    ({"window": math.inf}, "allowed seconds > 0"),
    ({"window": True}, "allowed seconds > 0"),
    ({"window": "5"}, "allowed seconds > 0"),
    ({"window": 11 * 365 * 86_400.0}, "the longest retention age"),
    ({"mode": "throttle"}, "needs a window"),
    ({"mode": "debounce"}, "needs a window"),
    ({"mode": "latest", "window": 5}, "takes no window"),
    ({"mode": "debounce", "window": 5, "max_wait": 4}, "max_wait >= window"),
    ({"mode": "debounce", "window": 5, "max_wait": math.nan}, "allowed seconds > 0"),
    ({"window": 5, "max_wait": 10}, "for mode 'debounce' only"),
    ({"mode": "throttle", "window": 5, "max_wait": 10}, "for mode 'debounce' only"),
]


@pytest.mark.parametrize(("fields", "fragment"), BAD_RULES)
def test_a_bad_rule_is_refused_when_made(fields: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidOption, match=fragment):
        Dedupe("k", **fields)


def test_a_bad_key_is_refused() -> None:
    with pytest.raises(InvalidOption, match="1 … 512"):
        Dedupe("")


BAD_ADDS: list[tuple[dict[str, Any], str]] = [
    ({"dedupe": "k"}, "must be an echomq.Dedupe"),
    ({"dedupe": Dedupe("k"), "key": "k"}, "not both"),
    ({"dedupe": Dedupe("k", "debounce", 5), "delay": 1}, "give no delay"),
    ({"dedupe": Dedupe("k", "debounce", 5), "depends_on": []}, "cannot be combined"),
    ({"dedupe": Dedupe("k", "latest"), "depends_on": []}, "cannot be combined"),
]


def queue_keys(client: redis.Redis, name: str) -> list[str]:
    return list(client.scan_iter(match=f"emq:{{{name}}}:*"))


@pytest.mark.parametrize(("kwargs", "fragment"), BAD_ADDS)
def test_a_bad_add_writes_nothing(
    sq: SyncQueue, redis_client: redis.Redis, kwargs: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(EchoMQError, match=fragment):
        sq.add("job", **kwargs)
    with pytest.raises(EchoMQError, match=fragment):
        sq.add_many([{"name": "fine"}, {"name": "job", **kwargs}])
    assert queue_keys(redis_client, sq.name) == []


def test_each_mode_decides_on_every_backend(sq: SyncQueue) -> None:
    drop = Dedupe("a", window=60)
    first = sq.add("j", dedupe=drop)
    assert sq.add("j", dedupe=drop) == first
    throttle = Dedupe("b", "throttle", window=60)
    t1 = sq.add("j", dedupe=throttle)
    assert sq.add("j", dedupe=throttle) == t1
    debounce = Dedupe("c", "debounce", window=60)
    d1 = sq.add("j", {"v": 1}, dedupe=debounce)
    assert sq.add("j", {"v": 2}, dedupe=debounce) == d1
    job = sq.get(d1)
    assert job is not None and job.data == {"v": 2} and job.state is State.DELAYED
    latest = Dedupe("d", "latest")
    l1 = sq.add("j", {"v": 1}, dedupe=latest)
    [running] = [j for j in sq.claim(5) if j.id == l1]
    l2 = sq.add("j", {"v": 2}, dedupe=latest)
    assert sq.add("j", {"v": 3}, dedupe=latest) == l2 != l1
    sq.complete(running)
    claimed = sq.claim(5)
    assert [(j.id, j.data) for j in claimed if j.id == l2] == [(l2, {"v": 3})]
    events = [e for e in sq.read_events("0", 200).events if e.kind == "deduplicated"]
    assert [(e.outcome, e.job_id) for e in events] == [
        ("dropped", first),
        ("throttled", t1),
        ("replaced", d1),
        ("replaced", l2),
    ]
    assert sq.stats().totals["added"] == 5


def test_key_is_the_shortcut_for_dedupe_key(sq: SyncQueue) -> None:
    first = sq.add("j", key="k")
    assert sq.add("j", dedupe=Dedupe("k")) == first
    assert sq.add("j", key="k") == first


def test_a_task_takes_a_dedupe_rule_of_its_arguments(sq: SyncQueue) -> None:
    @sq.task(name="refresh", dedupe=lambda user: Dedupe(f"user-{user}", "latest"))
    def refresh(user: int) -> None: ...

    a = refresh.enqueue(1)
    assert refresh.enqueue(1) == a
    assert refresh.enqueue(2) != a
    # enqueue_with wins over the task's rule
    assert refresh.enqueue_with(dedupe=Dedupe("other")).enqueue(1) != a

    @sq.task(name="bad", dedupe=lambda: "nope")  # type: ignore[arg-type]
    def bad() -> None: ...

    with pytest.raises(InvalidOption, match=r"must be an echomq\.Dedupe"):
        bad.enqueue()


def test_a_task_refuses_a_bad_fixed_rule(sq: SyncQueue) -> None:
    with pytest.raises(InvalidOption, match=r"must be an echomq\.Dedupe"):
        sq.task(name="t", dedupe="k")(lambda: None)  # type: ignore[call-overload]
