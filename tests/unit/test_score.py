"""The composite-score codec of DESIGN §2."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from echomq import score
from echomq.errors import InvalidPriority, InvalidScore


def test_worked_examples_of_the_design() -> None:
    assert score.encode(1, 999) == 4_294_968_295
    assert score.encode(2, 1) == 8_589_934_593
    assert score.encode(2, 7) == 8_589_934_599
    assert score.encode(1, 999) < score.encode(2, 1)


def test_decode_gives_fields_and_bit_ranges() -> None:
    d = score.decode(8_589_934_599)
    assert (d.tier, d.counter) == (2, 7)
    assert d.tier_bits == (32, 52)
    assert d.counter_bits == (0, 31)


def test_largest_score_is_below_2_pow_53_and_exact_as_a_double() -> None:
    top = score.encode(score.MAX_TIER, score.MAX_COUNTER)
    assert top == 2**53 - 1
    assert int(float(top)) == top
    assert score.decode(float(top)).tier == score.MAX_TIER


@given(
    st.integers(0, score.MAX_TIER),
    st.integers(0, score.MAX_COUNTER),
    st.integers(0, score.MAX_TIER),
    st.integers(0, score.MAX_COUNTER),
)
def test_order_is_tier_then_counter(t1: int, c1: int, t2: int, c2: int) -> None:
    assert (score.encode(t1, c1) < score.encode(t2, c2)) == ((t1, c1) < (t2, c2))
    d = score.decode(score.encode(t1, c1))
    assert (d.tier, d.counter) == (t1, c1)


@pytest.mark.parametrize("tier", [-1, 2**21, 1.5, "1", True, None])
def test_bad_tiers_are_refused_naming_the_bound(tier: object) -> None:
    with pytest.raises(InvalidPriority, match="2097151"):
        score.encode(tier, 0)  # type: ignore[arg-type]


@pytest.mark.parametrize("counter", [-1, 2**32, 2.0, "3"])
def test_bad_counters_are_refused_naming_the_bound(counter: object) -> None:
    with pytest.raises(InvalidScore, match="4294967295"):
        score.encode(0, counter)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1, 2**53, 1.5, "12"])
def test_bad_scores_are_refused(bad: object) -> None:
    with pytest.raises(InvalidScore):
        score.decode(bad)  # type: ignore[arg-type]
