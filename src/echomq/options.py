"""Queue options, retry backoff and the checks that guard every input."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, TypedDict

from echomq.errors import InvalidDelay, InvalidOption, InvalidWeight

Ordering = Literal["composite", "mint"]
ORDERINGS: tuple[str, ...] = ("composite", "mint")

MAX_WEIGHT = 1000
MAX_CLAIM = 10_000
MAX_LEASE = 7 * 86_400.0
MAX_DELAY = 10 * 365 * 86_400.0
MAX_ATTEMPTS = 1000
MAX_KEY_LENGTH = 512
MAX_JOB_NAME = 256
#: the most bytes of a job's headers (JSON text): trace context, not payload.
MAX_HEADERS = 4096
#: a lease in seconds when none is given (claims, renewals, workers).
DEFAULT_LEASE = 30.0
#: a worker's running handlers when none is given.
DEFAULT_CONCURRENCY = 10
#: seconds a stopping worker lets running handlers finish when none is given.
DEFAULT_GRACE = 10.0
#: the largest payload (and result, progress) a queue accepts by default, in bytes.
DEFAULT_MAX_PAYLOAD = 512 * 1024
#: seconds a durable add waits for a replica by default (echomq.sending.durable).
DEFAULT_DURABLE_TIMEOUT = 5.0
#: the longest durable wait (it must stay below the client's socket timeout).
MAX_DURABLE_TIMEOUT = 8.0


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)  # type: ignore[arg-type]


def check_int(what: str, value: object, low: int, high: int) -> int:
    if not _is_int(value) or not low <= value <= high:  # type: ignore[operator]
        raise InvalidOption(f"{what} {value!r} is out of range; allowed integers {low} … {high}")
    return value  # type: ignore[return-value]


def check_seconds(what: str, value: object, low: float, high: float, *, open_low: bool) -> float:
    ok = _is_number(value) and (value > low if open_low else value >= low) and value <= high  # type: ignore[operator]
    if not ok:
        bound = f"> {low}" if open_low else f">= {low}"
        raise InvalidOption(
            f"{what} {value!r} is out of range; allowed seconds {bound} and <= {high}"
        )
    return float(value)  # type: ignore[arg-type]


def check_durable_timeout(timeout: object) -> float:
    """A durable wait in seconds, > 0 and ≤ MAX_DURABLE_TIMEOUT (InvalidOption otherwise)."""
    return check_seconds("durable_timeout", timeout, 0.0, MAX_DURABLE_TIMEOUT, open_low=True)


def check_weight(weight: object) -> int:
    if not _is_int(weight) or not 1 <= weight <= MAX_WEIGHT:  # type: ignore[operator]
        raise InvalidWeight(f"weight {weight!r} is out of range; allowed integers 1 … {MAX_WEIGHT}")
    return weight  # type: ignore[return-value]


def check_job_name(name: object) -> str:
    if not isinstance(name, str) or not 1 <= len(name) <= MAX_JOB_NAME:
        raise InvalidOption(f"job name {name!r} must be a string of 1 … {MAX_JOB_NAME} characters")
    return name


def check_key(key: object) -> str:
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY_LENGTH:
        raise InvalidOption(
            f"idempotency key {key!r} must be a string of 1 … {MAX_KEY_LENGTH} characters"
        )
    return key


def delay_ms(delay: object) -> int:
    """A delay in seconds (>= 0) as whole milliseconds; -1 for none."""
    if delay is None:
        return -1
    if not _is_number(delay) or not 0 <= delay <= MAX_DELAY:  # type: ignore[operator]
        raise InvalidDelay(f"delay {delay!r} is out of range; allowed seconds 0 … {MAX_DELAY:.0f}")
    return round(delay * 1000)  # type: ignore[operator]


def run_at_ms(run_at: object) -> int:
    """An aware datetime as epoch milliseconds; -1 for none."""
    if run_at is None:
        return -1
    if not isinstance(run_at, datetime):
        raise InvalidDelay(f"run_at {run_at!r} is not a datetime; pass a timezone-aware datetime")
    if run_at.tzinfo is None or run_at.utcoffset() is None:
        raise InvalidDelay(f"run_at {run_at.isoformat()} is naive; pass a timezone-aware datetime")
    return max(0, round(run_at.timestamp() * 1000))


def expires_ms(expires: object) -> int:
    """A job's time to live in seconds (> 0) as whole milliseconds (at least 1)."""
    seconds = check_seconds("expires", expires, 0.0, MAX_DELAY, open_low=True)
    return max(1, round(seconds * 1000))


def encode_headers(headers: object) -> str:
    """A job's headers (a mapping of strings, e.g. trace context) as JSON text."""
    ok = isinstance(headers, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    )
    if not ok:
        raise InvalidOption(f"headers {headers!r:.80} must be a mapping of str to str")
    text = json.dumps(dict(headers), separators=(",", ":"))  # type: ignore[call-overload]
    if len(text) > MAX_HEADERS:
        raise InvalidOption(f"headers are {len(text)} bytes encoded; the limit is {MAX_HEADERS}")
    return text


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with jitter: attempt k waits base × factor^(k−1), capped, ± jitter."""

    base: float = 1.0
    factor: float = 2.0
    cap: float = 3600.0
    jitter: float = 0.2

    def __post_init__(self) -> None:
        check_seconds("backoff base", self.base, 0.0, MAX_DELAY, open_low=False)
        check_seconds("backoff cap", self.cap, 0.0, MAX_DELAY, open_low=False)
        if not _is_number(self.factor) or self.factor < 1:
            raise InvalidOption(f"backoff factor {self.factor!r} is out of range; allowed >= 1")
        if not _is_number(self.jitter) or not 0 <= self.jitter <= 1:
            raise InvalidOption(f"backoff jitter {self.jitter!r} is out of range; allowed 0 … 1")

    def delay(self, attempts: int, rng: random.Random | None = None) -> float:
        """Seconds to wait before the retry that follows failed attempt ``attempts`` (1-based)."""
        raw = min(self.cap, self.base * self.factor ** max(0, attempts - 1))
        spread = (rng or random).uniform(-self.jitter, self.jitter)
        return max(0.0, raw * (1 + spread))


class QueueSettings(TypedDict, total=False):
    """The keyword options of ``Queue``/``SyncQueue`` that become :class:`QueueOptions`."""

    ordering: Ordering
    max_stalls: int
    keep_completed: int
    keep_completed_age: float
    keep_dead: int
    keep_dead_age: float
    max_payload: int
    max_attempts: int
    backoff: Backoff | None


@dataclass(frozen=True, slots=True)
class QueueOptions:
    """Per-queue settings that the scripts receive with every call."""

    ordering: Ordering = "composite"
    max_stalls: int = 1
    keep_completed: int = 1000
    keep_completed_age: float = 86_400.0
    keep_dead: int = 10_000
    keep_dead_age: float = 7 * 86_400.0
    max_payload: int = DEFAULT_MAX_PAYLOAD
    max_attempts: int = 3
    backoff: Backoff = Backoff()

    def __post_init__(self) -> None:
        if self.ordering not in ORDERINGS:
            raise InvalidOption(f"ordering {self.ordering!r} is not one of {ORDERINGS}")
        check_int("max_stalls", self.max_stalls, 0, 1000)
        check_int("keep_completed", self.keep_completed, 0, 10_000_000)
        check_int("keep_dead", self.keep_dead, 0, 10_000_000)
        check_seconds("keep_completed_age", self.keep_completed_age, 0, MAX_DELAY, open_low=False)
        check_seconds("keep_dead_age", self.keep_dead_age, 0, MAX_DELAY, open_low=False)
        check_int("max_payload", self.max_payload, 1, 64 * 1024 * 1024)
        check_int("max_attempts", self.max_attempts, 1, MAX_ATTEMPTS)

    @classmethod
    def from_settings(cls, settings: QueueSettings) -> QueueOptions:
        """The options a queue was opened with: its settings over the defaults above."""
        given = dict(settings)
        if given.get("backoff", 0) is None:
            del given["backoff"]
        return cls(**given)  # type: ignore[arg-type]

    def script_block(self) -> list[str]:
        """ARGV[2..6] of every script (ARGV[1] is the key prefix)."""
        return [
            str(self.max_stalls),
            str(round(self.keep_completed_age * 1000)),
            str(self.keep_completed),
            str(round(self.keep_dead_age * 1000)),
            str(self.keep_dead),
        ]
