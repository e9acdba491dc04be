"""Queue-wide settings stored on the server (``configure`` / ``settings``).

A queue's settings live in its settings hash (``keys.QueueKeys.settings``).
Every script reads that hash once (includes/fixed.lua) and falls back, field
by field, to the option block the calling client sends (its constructor
options), so every producer, worker, maintenance run, CLI and dashboard of
the queue obeys the same stored values (docs/settings.md).

This module checks each setting, turns it into hash fields (integers in
milliseconds for ages and delays, so the scripts never parse a float of
seconds) and reads the hash back. Checking happens before anything is sent:
one bad value refuses the whole ``configure`` call and nothing is written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypedDict

from echomq.errors import InvalidOption
from echomq.lanecontrols import check_rate
from echomq.options import MAX_ATTEMPTS, MAX_DELAY, Backoff, QueueOptions, check_int

#: events kept in the queue's stream when no length is stored (0 turns events off).
DEFAULT_EVENT_STREAM_LENGTH = 10_000
#: the longest event stream a queue may keep.
MAX_EVENT_STREAM_LENGTH = 10_000_000
#: the highest queue-wide concurrency (a rate's bounds are lanecontrols.check_rate's).
MAX_QUEUE_LIMIT = 1_000_000
MAX_RETENTION_COUNT = 10_000_000
MAX_STALLS = 1000


class Settings(TypedDict, total=False):
    """``configure``'s keywords (each may also be None: remove the stored value)."""

    max_stalls: int | None
    keep_completed: int | None
    keep_completed_age: float | None
    keep_dead: int | None
    keep_dead_age: float | None
    max_attempts: int | None
    backoff: Backoff | None
    event_stream_length: int | None
    concurrency: int | None
    rate: tuple[int, float] | None
    age_step: float | None
    metrics: bool | None


#: the settings ``configure`` accepts, in the order ``settings()`` and the CLI show them.
NAMES: tuple[str, ...] = tuple(Settings.__annotations__)

#: the hash fields each setting is stored in.
FIELDS: dict[str, tuple[str, ...]] = {
    "max_stalls": ("max_stalls",),
    "keep_completed": ("keep_completed",),
    "keep_completed_age": ("keep_completed_ms",),
    "keep_dead": ("keep_dead",),
    "keep_dead_age": ("keep_dead_ms",),
    "max_attempts": ("max_attempts",),
    "backoff": ("backoff_base_ms", "backoff_factor", "backoff_cap_ms", "backoff_jitter"),
    "event_stream_length": ("event_stream_length",),
    "concurrency": ("concurrency",),
    "rate": ("rate_max", "rate_per_ms"),
    "age_step": ("age_step_ms",),
    "metrics": ("metrics",),
}

#: seconds a tier adds to an aged key when no age_step is stored (docs/ordering.md).
DEFAULT_AGE_STEP = 60.0
#: the largest age_step: a day (so tier x age_step stays far below 2^53 ms).
MAX_AGE_STEP = 86_400.0


def _ms(seconds: float) -> str:
    return str(round(seconds * 1000))


def _seconds(what: str, value: object) -> float:
    ok = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
        and value <= MAX_DELAY
    )
    if not ok:
        raise InvalidOption(
            f"{what} {value!r} is out of range; allowed seconds >= 0 and <= {MAX_DELAY:.0f}"
        )
    return float(value)  # type: ignore[arg-type]


#: the integer settings and their allowed range.
INT_RANGES: dict[str, tuple[int, int]] = {
    "max_stalls": (0, MAX_STALLS),
    "keep_completed": (0, MAX_RETENTION_COUNT),
    "keep_dead": (0, MAX_RETENTION_COUNT),
    "max_attempts": (1, MAX_ATTEMPTS),
    "event_stream_length": (0, MAX_EVENT_STREAM_LENGTH),
    "concurrency": (1, MAX_QUEUE_LIMIT),
}


def check_age_step(value: object) -> int:
    """``age_step`` in whole milliseconds (1 ms … a day), else InvalidOption."""
    ok = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
        and value <= MAX_AGE_STEP
        and round(value * 1000) >= 1
    )
    if not ok:
        raise InvalidOption(
            f"age_step {value!r:.80} is out of range; allowed seconds > 0 (at least 0.001)"
            f" and <= {MAX_AGE_STEP:.0f} (a day)"
        )
    return round(float(value) * 1000)  # type: ignore[arg-type]


def _encode_one(name: str, value: object) -> list[str]:
    """The stored field values of one setting (checked), in FIELDS[name] order."""
    if name in INT_RANGES:
        return [str(check_int(name, value, *INT_RANGES[name]))]
    if name in ("keep_completed_age", "keep_dead_age"):
        return [_ms(_seconds(name, value))]
    if name == "age_step":
        return [str(check_age_step(value))]
    if name == "backoff":
        if not isinstance(value, Backoff):
            raise InvalidOption(f"backoff {value!r:.80} must be an echomq.Backoff (or None)")
        return [_ms(value.base), repr(float(value.factor)), _ms(value.cap), repr(value.jitter)]
    if name == "metrics":
        if not isinstance(value, bool):
            raise InvalidOption(f"metrics {value!r:.80} must be True or False (or None)")
        return ["1" if value else "0"]
    assert name == "rate", name
    most, per_ms = check_rate(value)  # the one rate check, a lane's too
    return [str(most), str(per_ms)]


def encode(settings: Mapping[str, object]) -> list[str]:
    """configure.lua's arguments for ``settings``: field, value pairs, "" for a field
    to remove. Checks every setting first (InvalidOption names the value and the
    allowed range), so a bad one refuses the whole call."""
    if not settings:
        raise InvalidOption(f"configure needs at least one setting; allowed: {', '.join(NAMES)}")
    unknown = sorted(set(settings) - set(NAMES))
    if unknown:
        raise InvalidOption(f"unknown setting(s) {unknown}; allowed: {', '.join(NAMES)}")
    args: list[str] = []
    for name, value in settings.items():
        fields = FIELDS[name]
        values = [""] * len(fields) if value is None else _encode_one(name, value)
        for field, stored in zip(fields, values, strict=True):
            args += [field, stored]
    return args


def decode(stored: Mapping[str, str]) -> dict[str, Any]:
    """The settings a settings hash holds, by ``configure`` name, in NAMES order
    (fields this client does not know are left out)."""
    out: dict[str, Any] = {}
    for name in NAMES:
        fields = FIELDS[name]
        if not all(field in stored for field in fields):
            continue
        raw = [stored[field] for field in fields]
        if name.endswith("_age") or name == "age_step":
            out[name] = int(raw[0]) / 1000
        elif name == "backoff":
            out[name] = Backoff(
                base=int(raw[0]) / 1000,
                factor=float(raw[1]),
                cap=int(raw[2]) / 1000,
                jitter=float(raw[3]),
            )
        elif name == "rate":
            out[name] = (int(raw[0]), int(raw[1]) / 1000)
        elif name == "metrics":
            out[name] = raw[0] == "1"
        else:
            out[name] = int(raw[0])
    return out


def defaults(options: QueueOptions) -> dict[str, Any]:
    """What applies to a setting nobody stored: a client's constructor options (the
    built-in defaults where it gave none); None for a limit that is off."""
    return {
        "max_stalls": options.max_stalls,
        "keep_completed": options.keep_completed,
        "keep_completed_age": options.keep_completed_age,
        "keep_dead": options.keep_dead,
        "keep_dead_age": options.keep_dead_age,
        "max_attempts": options.max_attempts,
        "backoff": options.backoff,
        "event_stream_length": DEFAULT_EVENT_STREAM_LENGTH,
        "concurrency": None,
        "rate": None,
        "age_step": DEFAULT_AGE_STEP,
        "metrics": False,
    }
