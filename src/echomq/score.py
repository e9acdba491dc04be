"""The composite-score codec: ``score = tier × 2^32 + counter``; and the aged
ordering's key: ``key = due_ms + tier × age_step_ms`` (aged_encode, aged_decode).

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


# -- the aged ordering's key (docs/ordering.md "The aged ordering") -------------
#: the largest age_step in milliseconds (a day; settings.MAX_AGE_STEP).
MAX_AGE_STEP_MS = 86_400_000
#: the largest due time a key holds exactly: 2^53 minus the largest tier part
#: (about the year 287,000: every server time fits).
MAX_DUE_MS = (1 << 53) - 1 - MAX_TIER * MAX_AGE_STEP_MS


@dataclass(frozen=True, slots=True)
class AgedKey:
    """An aged lane key split into its parts: ``key = due_ms + tier × age_step_ms``.

    The key alone does not tell the tier (due times and tier parts overlap):
    the job's tier and the queue's age_step are needed to read it back."""

    key: int
    tier: int
    age_step_ms: int
    due_ms: int

    @property
    def tier_part_ms(self) -> int:
        return self.tier * self.age_step_ms


def _check_age_step_ms(age_step_ms: object) -> int:
    if not _is_int(age_step_ms) or not 1 <= age_step_ms <= MAX_AGE_STEP_MS:  # type: ignore[operator]
        raise InvalidScore(
            f"age_step {age_step_ms!r} ms is out of range; allowed 1 … {MAX_AGE_STEP_MS} ms"
        )
    assert isinstance(age_step_ms, int)
    return age_step_ms


def aged_encode(due_ms: int, tier: int, age_step_ms: int) -> int:
    """The aged key of a job of ``tier`` due at ``due_ms`` (epoch ms)."""
    step = _check_age_step_ms(age_step_ms)
    if not _is_int(due_ms) or not 0 <= due_ms <= MAX_DUE_MS:
        raise InvalidScore(f"due time {due_ms!r} ms is out of range; allowed 0 … {MAX_DUE_MS}")
    return due_ms + check_tier(tier) * step


def aged_decode(key: int | float, tier: int, age_step_ms: int) -> AgedKey:
    """Split an aged key, given the job's tier and the queue's age_step (ms)."""
    if isinstance(key, float):
        if not key.is_integer():
            raise InvalidScore(f"key {key!r} is not a whole number of milliseconds")
        key = int(key)
    step = _check_age_step_ms(age_step_ms)
    tier = check_tier(tier)
    if not _is_int(key) or not tier * step <= key < 1 << 53:
        raise InvalidScore(
            f"key {key!r} is out of range for tier {tier} and age_step {step} ms;"
            f" allowed {tier * step} … {(1 << 53) - 1}"
        )
    return AgedKey(key=key, tier=tier, age_step_ms=step, due_ms=key - tier * step)
