"""Lane controls as data: checking ``set_lane``'s arguments and encoding them
for the setLane script (no I/O). docs/ordering.md "Lane controls" has the rules.

``set_lane(group, weight=…, concurrency=…, rate=…, paused=…, max_waiting=…,
throttle=…)``: an omitted argument (``UNSET``) is left as it is; ``None``
removes that control (``throttle=None`` lifts a throttle in force). Every
value is checked before anything is written.
"""

from __future__ import annotations

import math
import re
from enum import Enum
from typing import Final

from echomq.errors import InvalidOption
from echomq.options import MAX_DELAY, check_int, check_seconds, check_weight


class Unset(Enum):
    UNSET = "UNSET"


#: the default of every ``set_lane`` argument: leave that control as it is.
UNSET: Final = Unset.UNSET

MAX_CONCURRENCY = 1_000_000
MAX_WAITING_LIMIT = 10**12
#: the most claims a rate allows per window (the server keeps one time per claim);
#: one rate check for a lane's rate and the queue-wide one (settings.py).
MAX_RATE = 100_000
MIN_RATE_WINDOW = 0.001
MAX_RATE_WINDOW = 86_400.0 * 7
#: a rate written as text: MAX/WINDOW, the window a number with a unit (or seconds).
_RATE_TEXT = re.compile(r"^\s*(\d+)\s*/\s*(\d+(?:\.\d+)?|\.\d+)?\s*(ms|s|m|h)?\s*$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
RATE_FORMAT = "MAX/WINDOW, e.g. 100/1s, 5/200ms, 1000/m or 10/2.5 (seconds)"


def check_rate(rate: object) -> tuple[int, int]:
    """``(max, per_seconds)`` → (max, window in ms), InvalidOption otherwise: max
    1 … MAX_RATE, per_seconds MIN_RATE_WINDOW … MAX_RATE_WINDOW (a whole ms at least)."""
    if not isinstance(rate, tuple | list) or len(rate) != 2:
        raise InvalidOption(
            f"rate {rate!r:.80} must be a pair (max, per_seconds), "
            "e.g. (100, 1.0) for 100 claims a second"
        )
    most = check_int("rate max", rate[0], 1, MAX_RATE)
    per = check_seconds(
        "rate per_seconds", rate[1], MIN_RATE_WINDOW, MAX_RATE_WINDOW, open_low=False
    )
    return most, max(1, round(per * 1000))


def parse_rate_text(text: str) -> tuple[int, float]:
    """A rate as the CLI writes it (RATE_FORMAT) → (max, per_seconds), checked
    like ``check_rate``; InvalidOption naming the text otherwise."""
    found = _RATE_TEXT.match(text)
    if found is None:
        raise InvalidOption(f"rate {text!r:.80} must look like {RATE_FORMAT}")
    count, amount, unit = found.groups()
    rate = (int(count), float(amount or "1") * _UNIT[unit or "s"])
    check_rate(rate)
    return rate


def format_rate(rate: tuple[int, float]) -> str:
    """(max, per_seconds) as the CLI writes it: ``100/1s``, ``5/200ms``."""
    most, per = rate
    if per < 1:
        return f"{most}/{per * 1000:g}ms"
    return f"{most}/{per:g}s"


def parse_rate(text: str) -> tuple[int, float]:
    """The stored ``"max per_ms"`` → (max, per_seconds)."""
    most, per_ms = text.split(" ")
    return int(most), int(per_ms) / 1000


def check_throttle(seconds: object) -> int:
    """A throttle length in seconds (> 0, ≤ MAX_DELAY) → ms."""
    value = check_seconds("throttle seconds", seconds, 0.0, MAX_DELAY, open_low=True)
    return max(1, math.ceil(value * 1000))


def _int_or_lift(what: str, value: object, low: int, high: int) -> str:
    """A control's stored text: the checked integer, or "" (lift it) for None."""
    return "" if value is None else str(check_int(what, value, low, high))


def encode_controls(
    *,
    weight: int | Unset | None,
    concurrency: int | Unset | None,
    rate: tuple[int, float] | Unset | None,
    paused: bool | Unset,
    max_waiting: int | Unset | None,
    throttle: float | Unset | None = UNSET,
) -> list[str]:
    """The setLane field/value pairs for the given arguments ("" removes a control)."""
    out: list[str] = []
    if weight is not UNSET:
        out += ["w", "" if weight is None else str(check_weight(weight))]
    if concurrency is not UNSET:
        out += ["c", _int_or_lift("concurrency", concurrency, 1, MAX_CONCURRENCY)]
    if rate is not UNSET:
        if rate is None:
            out += ["r", ""]
        else:
            most, per_ms = check_rate(rate)
            out += ["r", f"{most} {per_ms}"]
    if paused is not UNSET:
        if not isinstance(paused, bool):
            raise InvalidOption(f"paused {paused!r} must be True or False")
        out += ["p", "1" if paused else ""]
    if max_waiting is not UNSET:
        out += ["m", _int_or_lift("max_waiting", max_waiting, 0, MAX_WAITING_LIMIT)]
    if throttle is not UNSET:
        # None lifts a throttle in force at once; seconds throttle as ``throttle()``
        out += ["t", "" if throttle is None else str(check_throttle(throttle))]
    return out
