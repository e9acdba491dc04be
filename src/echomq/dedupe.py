"""Deduplication and debounce (DESIGN §10): one policy object for an add.

``Dedupe(key, mode="drop", window=None, max_wait=None)`` says what an add does
when a job with the same ``key`` stands already (docs/lifecycle.md
"Deduplication and debounce"):

- ``drop``: while that job is waiting, delayed, blocked, active or pending a
  retry, the add returns its id and writes nothing; with ``window`` also for
  ``window`` seconds after it finished (without one: for the completed or dead
  retention age, as ``key=`` always did).
- ``throttle``: one job per ``window`` seconds, counted from the add that made
  it; every add inside the window returns its id.
- ``debounce``: the job runs ``window`` seconds after the last add; an add
  while it has not started replaces its data and moves its run time to now +
  ``window``, never past its first add + ``max_wait``.
- ``latest``: at most one active and one waiting job per key; an add while
  the key's job has not started replaces its data, an add while it runs (or
  waits for a retry) adds one job that is held until that one finished.

Every decision is made by add.lua, on the server clock, in the add's own
script (includes/dedupe.lua). ``add(key=K)`` is ``Dedupe(K)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from echomq.errors import InvalidOption
from echomq.options import MAX_DELAY, check_key

Mode = Literal["drop", "throttle", "debounce", "latest"]
#: the modes, in the order docs/lifecycle.md lists them.
MODES: tuple[str, ...] = ("drop", "throttle", "debounce", "latest")
#: the longest window or max_wait: the longest retention age (seconds).
MAX_WINDOW = MAX_DELAY


def _window_ms(what: str, value: object) -> int:
    ok = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 < value <= MAX_WINDOW
    )
    if not ok:
        raise InvalidOption(
            f"dedupe {what} {value!r} is out of range; allowed seconds > 0 and "
            f"<= {MAX_WINDOW:,.0f} (the longest retention age)"
        )
    return max(1, round(float(value) * 1000))  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Dedupe:
    """What an add does when a job with ``key`` stands already (see the module)."""

    key: str
    mode: Mode = "drop"
    window: float | None = None
    max_wait: float | None = None

    def __post_init__(self) -> None:
        check_key(self.key)
        if self.mode not in MODES:
            raise InvalidOption(f"dedupe mode {self.mode!r} is not one of {', '.join(MODES)}")
        if self.window is not None:
            _window_ms("window", self.window)
        elif self.mode in ("throttle", "debounce"):
            raise InvalidOption(f"dedupe mode {self.mode!r} needs a window (seconds > 0)")
        if self.mode == "latest" and self.window is not None:
            raise InvalidOption("dedupe mode 'latest' takes no window (it holds while a job runs)")
        if self.max_wait is not None:
            if self.mode != "debounce":
                raise InvalidOption(
                    f"dedupe max_wait {self.max_wait!r} is for mode 'debounce' only, "
                    f"not {self.mode!r}"
                )
            _window_ms("max_wait", self.max_wait)
            if self.window is not None and self.max_wait < self.window:
                raise InvalidOption(
                    f"dedupe max_wait {self.max_wait!r} is shorter than its window "
                    f"{self.window!r}; allowed: max_wait >= window"
                )

    def encode(self) -> str:
        """add.lua's job element 15: "" for ``Dedupe(key)`` (a plain ``key=``),
        else "<mode> <window ms> <max_wait ms>" (0: none)."""
        if self.mode == "drop" and self.window is None:
            return ""
        window = 0 if self.window is None else _window_ms("window", self.window)
        most = 0 if self.max_wait is None else _window_ms("max_wait", self.max_wait)
        return f"{self.mode} {window} {most}"


def dedupe_element(key: object, dedupe: object, options: Mapping[str, Any]) -> tuple[str, str]:
    """add.lua's job elements 9 (the key, "" for none) and 15 (the encoded
    Dedupe) for an add's ``key=`` and ``dedupe=``; InvalidOption before anything
    is written for a bad value or a combination the mode cannot honour."""
    if dedupe is None:
        return ("" if key is None else check_key(key)), ""
    dedupe = as_dedupe(dedupe)
    if key is not None:
        raise InvalidOption("give key= or dedupe=, not both (key=K is Dedupe(K))")
    if dedupe.mode == "debounce":
        clash = [name for name in ("delay", "run_at") if options.get(name) is not None]
        if clash:
            raise InvalidOption(
                f"dedupe mode 'debounce' sets the run time itself (now + window): "
                f"give no {' or '.join(clash)}"
            )
    if dedupe.mode in ("debounce", "latest") and options.get("depends_on") is not None:
        raise InvalidOption(f"dedupe mode {dedupe.mode!r} cannot be combined with depends_on")
    return dedupe.key, dedupe.encode()


def as_dedupe(value: object) -> Dedupe:
    """A ``dedupe=`` value, checked: InvalidOption for anything but a Dedupe."""
    if not isinstance(value, Dedupe):
        raise InvalidOption(f"dedupe {value!r:.200} must be an echomq.Dedupe")
    return value
