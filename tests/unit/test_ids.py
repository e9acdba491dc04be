"""Branded ids: format, mint order, parsing errors."""

from __future__ import annotations

import re
import threading
import uuid

import pytest

from echomq import ids
from echomq.errors import InvalidId


def test_format_is_prefix_and_26_crockford_chars() -> None:
    job_id = ids.new_id()
    assert job_id.startswith("job_")
    body = job_id[4:]
    assert len(body) == 26
    assert set(body) <= set(ids.ALPHABET)


def test_tight_loop_ids_sort_in_mint_order() -> None:
    minted = [ids.new_id() for _ in range(20_000)]  # several per millisecond
    assert minted == sorted(minted)
    assert len(set(minted)) == len(minted)


def test_ids_from_threads_are_unique_and_each_thread_is_monotonic() -> None:
    results: dict[int, list[str]] = {}

    def mint(k: int) -> None:
        results[k] = [ids.new_id() for _ in range(2000)]

    threads = [threading.Thread(target=mint, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for batch in results.values() for i in batch]
    assert len(set(every)) == len(every)
    for batch in results.values():
        assert batch == sorted(batch)


def test_parse_returns_uuid7_and_round_trips() -> None:
    job_id = ids.new_id()
    parsed = ids.parse_id(job_id)
    assert isinstance(parsed, uuid.UUID)
    assert parsed.version == 7
    assert parsed.variant == uuid.RFC_4122


def test_timestamp_is_close_to_now() -> None:
    import time

    before = time.time()
    stamp = ids.id_timestamp(ids.new_id()).timestamp()
    assert before - 0.01 <= stamp <= time.time() + 0.01


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        ("task_01m8vfgs8rekv8d1a4xp5pwfjf", "does not start"),
        ("job_01m8vfgs8rekv8d1a4xp5pwfj", "expected 26"),
        ("job_01m8vfgs8rekv8d1a4xp5pwfjff", "expected 26"),
        ("job_01m8vfgs8rekv8d1a4xp5pwfjU", "outside lowercase Crockford"),
        ("job_01m8vfgs8rekv8d1a4xp5pwfji", "outside lowercase Crockford"),
        ("job_81m8vfgs8rekv8d1a4xp5pwfjf", "above 2^128"),
        ("job_00000000000000000000000000", "not a UUIDv7"),
        (42, "not a string"),
    ],
)
def test_malformed_ids_are_refused_with_the_reason(bad: object, fragment: str) -> None:
    with pytest.raises(InvalidId, match=re.escape(fragment)):
        ids.parse_id(bad)
    assert not ids.is_id(bad)


def test_batch_minting_matches_single_ids_and_keeps_order() -> None:
    before = ids.new_id()
    batch = ids.new_ids(5000)  # more than one millisecond's counter: borrows ms
    after = ids.new_id()
    assert len(set(batch)) == 5000
    assert [before, *batch, after] == sorted([before, *batch, after])
    for job_id in batch[:200]:
        value = ids.parse_id(job_id).int
        assert ids.PREFIX + ids._encode(value) == job_id
