"""Fuzzing the front doors (issue 14): random strings, numbers and nested JSON through
``add``, ``add_many``, ``fail``, ``progress`` and the CLI's ``add --data``.

Each call must either work or raise an ``EchoMQError`` (the CLI: exit 0, or
exit 1 with one ``Error:`` line) — never another exception — and a refused
call must leave every key of the queue exactly as it was: no partial write.
The checks are made before anything is sent, so one backend (Valkey) is enough.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import redis
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from echomq import EchoMQError, Job, SyncQueue
from echomq.cli import cli
from keyspace import keyspace

pytestmark = pytest.mark.parametrize("backend", ["valkey"], indirect=True)

#: the keys an add_many item may have (add's keywords, name and data)
ADD_MANY_KEYS = ("name", "data", "priority", "group", "delay", "run_at", "max_attempts", "key")

FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# texts a user or an attacker may send: markup, escapes, lone surrogates, long ones
texts = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["", "\ud800", "a\udfffb", "x" * 600, "[bold]x[/]", "\x1b[31m", "a\nb", "é"]),
)
numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
)
json_values = st.recursive(
    st.one_of(st.none(), numbers, texts),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=20,
)


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


class Deep(list[Any]):
    """A deeply nested list that reports itself in one line (a failing example's
    report would otherwise recurse as deep as the value)."""

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # hypothesis's printer only
        depth, inner = 1, self
        while inner:
            depth, inner = depth + 1, inner[0]
        printer.text(f"<list nested {depth} deep>")


deep = st.integers(min_value=200, max_value=3000).map(lambda n: Deep([nested(n - 1)]))
not_json = st.one_of(
    st.sets(st.integers(), max_size=2),
    st.binary(max_size=8),
    st.dictionaries(st.integers(), st.integers(), min_size=1, max_size=2),
    st.builds(object),
)
values = st.one_of(json_values, deep, not_json)
anything = st.one_of(st.none(), numbers, texts, json_values)
# mostly plausible names, so that the checks after the name's are reached too
names = st.one_of(st.text(min_size=1, max_size=20), st.sampled_from(["j", "\ud800"]), anything)


def works_or_refuses(client: redis.Redis, q: SyncQueue, call: Callable[[], object]) -> bool:
    """Run ``call``: True if it worked; after an EchoMQError, assert nothing changed."""
    before = keyspace(client, q.name)
    try:
        call()
    except EchoMQError:
        assert keyspace(client, q.name) == before, "a refused call wrote something"
        return False
    return True


def claimed(q: SyncQueue) -> Job:
    q.add("victim", max_attempts=1000)
    jobs = q.claim(1, lease=300)
    assert jobs
    return jobs[0]


@FUZZ
@given(
    name=names,
    data=values,
    options=st.dictionaries(st.sampled_from(ADD_MANY_KEYS[2:]), anything, max_size=2),
)
def test_add(
    sq: SyncQueue, redis_client: redis.Redis, name: Any, data: Any, options: dict[str, Any]
) -> None:
    works_or_refuses(redis_client, sq, lambda: sq.add(name, data, **options))


@FUZZ
@given(
    items=st.lists(
        st.one_of(
            st.fixed_dictionaries(
                {"name": names},
                optional={key: anything for key in (*ADD_MANY_KEYS[1:], "foo", "job_id")},
            ),
            st.fixed_dictionaries({"name": names, "data": values}),
            anything,
        ),
        max_size=3,
    )
)
def test_add_many(sq: SyncQueue, redis_client: redis.Redis, items: list[Any]) -> None:
    works_or_refuses(redis_client, sq, lambda: sq.add_many(items))


@FUZZ
@given(
    error=st.one_of(anything, st.text(min_size=1).map(lambda t: t * 5000)),
    traceback=anything,
    retry=st.booleans(),
    retry_delay=anything,
)
def test_fail(
    sq: SyncQueue,
    redis_client: redis.Redis,
    error: Any,
    traceback: Any,
    retry: bool,
    retry_delay: Any,
) -> None:
    job = claimed(sq)
    done = works_or_refuses(
        redis_client,
        sq,
        lambda: sq.fail(job, error, traceback, retry=retry, retry_delay=retry_delay),
    )
    if not done:
        sq.release(job)
    sq.remove(job.id)  # keeps the keyspace, read twice per example, small


@FUZZ
@given(value=values)
def test_progress(sq: SyncQueue, redis_client: redis.Redis, value: Any) -> None:
    job = claimed(sq)
    works_or_refuses(redis_client, sq, lambda: sq.progress(job, value))
    sq.remove(job.id)


def _json_text(value: Any) -> str:
    # NaN and Infinity are written as the bare words json.loads accepts
    return json.dumps(value, allow_nan=True, default=str)


cli_data = st.one_of(
    json_values.map(_json_text),
    st.integers(min_value=1, max_value=20_000).map(lambda n: "[" * n + "]" * n),
    st.text(max_size=40),
    st.sampled_from(["NaN", "-Infinity", '{"a": NaN}', "1e999", "", "{", "[" * 5000]),
)


@FUZZ
@given(name=st.text(min_size=1, max_size=20).filter(lambda t: "\x00" not in t), data=cli_data)
def test_cli_add_data(
    sq: SyncQueue, redis_client: redis.Redis, backend_url: str, name: str, data: str
) -> None:
    before = keyspace(redis_client, sq.name)
    result = CliRunner().invoke(
        cli,
        ["add", "--data", "-", "--url", backend_url, "--queue", sq.name, "--", name],
        input=data,
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code in (0, 1), result.output
    if result.exit_code == 1:
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
        assert "Traceback" not in result.output
        assert keyspace(redis_client, sq.name) == before
    else:
        assert result.stdout.strip().startswith("job_")
