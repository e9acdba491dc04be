"""The aged ordering's setting and surface (docs/ordering.md "The aged ordering");
its order is model-tested in test_order_model.py, its bound in
test_aged_starvation.py."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from echomq import InvalidOption, OrderingMismatch, SyncQueue, TierCounts
from echomq.score import aged_decode, aged_encode


@pytest.mark.parametrize("bad", [0, -1, 0.0004, math.nan, math.inf, 86_400.001, True, "60"])
def test_a_bad_age_step_is_refused_and_nothing_is_written(sq: SyncQueue, bad: object) -> None:
    sq.configure(age_step=2.0)
    with pytest.raises(InvalidOption, match=r"age_step .* is out of range; allowed seconds > 0"):
        sq.configure(age_step=bad, max_stalls=3)  # type: ignore[arg-type]
    assert sq.settings() == {"age_step": 2.0}


def test_age_step_is_stored_and_removed(sq: SyncQueue) -> None:
    sq.configure(age_step=86_400)
    assert sq.settings() == {"age_step": 86_400.0}
    sq.configure(age_step=None)
    assert sq.settings() == {}


def test_an_aged_key_is_due_time_plus_tier_times_age_step(
    make_sync: Callable[..., SyncQueue], queue_name: str
) -> None:
    q = make_sync(queue_name + "-aged", ordering="aged")
    q.configure(age_step=0.25)
    job_id = q.add("x", priority=3)
    job = q.get(job_id)
    assert job is not None and job.created_at is not None
    due = round(job.created_at.timestamp() * 1000)
    assert job.score == aged_encode(due, 3, 250) == due + 750
    assert aged_decode(job.score, 3, 250).due_ms == due
    # the queue keeps its ordering: opening it with another one is refused
    with pytest.raises(OrderingMismatch):
        make_sync(queue_name + "-aged", ordering="composite").add("x")
    # no tier can be read from an aged key: waiting_tiers reports none
    assert q.waiting_tiers() == {None: TierCounts(counts={}, more=True)}
