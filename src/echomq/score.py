"""The composite-score codec: ``score = tier × 2^32 + counter``.

The tier (priority, lower first) sits in bits 32–52, the arrival counter in
bits 0–31. Any tier difference outweighs every counter value, and every score
stays below 2^53, so a sorted set's double carries it exactly.

>>> encode(1, 999)
4294968295
>>> encode(2, 1)
8589934593
"""

from __future__ import annotations

from dataclasses import dataclass

from echomq.errors import InvalidInput, InvalidPriority, InvalidScore

TIER_BITS = 21
COUNTER_BITS = 32
MAX_TIER = (1 << TIER_BITS) - 1
MAX_COUNTER = (1 << COUNTER_BITS) - 1
TIER_SHIFT = COUNTER_BITS
MAX_SCORE = (MAX_TIER << TIER_SHIFT) | MAX_COUNTER  # 2^53 − 1


@dataclass(frozen=True, slots=True)
class Decoded:
    """A score split into its fields, with the bit range each occupies."""

    score: int
    tier: int
    counter: int
    tier_bits: tuple[int, int] = (TIER_SHIFT, TIER_SHIFT + TIER_BITS - 1)
    counter_bits: tuple[int, int] = (0, COUNTER_BITS - 1)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_tier(tier: object) -> int:
    """Return ``tier`` if it is an int in 0 … 2^21−1, else raise InvalidPriority."""
    return _in_range(tier, "priority", MAX_TIER, "2^21−1", InvalidPriority)


def check_counter(counter: object) -> int:
    """Return ``counter`` if it is an int in 0 … 2^32−1, else raise InvalidScore."""
    return _in_range(counter, "counter", MAX_COUNTER, "2^32−1", InvalidScore)


def _in_range(value: object, what: str, high: int, power: str, error: type[InvalidInput]) -> int:
    if not _is_int(value):
        raise error(f"{what} {value!r} is not an integer; allowed 0 … {high}")
    assert isinstance(value, int)
    if not 0 <= value <= high:
        raise error(f"{what} {value} is out of range; allowed 0 … {high} ({power})")
    return value


def encode(tier: int, counter: int) -> int:
    """Pack a tier and an arrival counter into one score."""
    return (check_tier(tier) << TIER_SHIFT) | check_counter(counter)


def decode(score: int | float) -> Decoded:
    """Split a score into tier and counter (floats must be whole numbers)."""
    if isinstance(score, float):
        if not score.is_integer():
            raise InvalidScore(f"score {score!r} is not a whole number; allowed 0 … {MAX_SCORE}")
        score = int(score)
    if not _is_int(score):
        raise InvalidScore(f"score {score!r} is not an integer; allowed 0 … {MAX_SCORE}")
    if not 0 <= score <= MAX_SCORE:
        raise InvalidScore(f"score {score} is out of range; allowed 0 … {MAX_SCORE} (2^53−1)")
    return Decoded(score=score, tier=score >> TIER_SHIFT, counter=score & MAX_COUNTER)
