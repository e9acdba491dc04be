"""Queue options, retry backoff and the checks that guard every input.

Every limit on what a caller may send lives here (JSON payloads are encoded
and limited by :func:`echomq.job.encode_payload`, which takes its limits from
here too); :data:`LIMITS` lists them all, and ``docs/lifecycle.md`` shows that
table (``python -m echomq.options`` prints it).
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, TypedDict

from echomq.errors import InvalidDelay, InvalidOption, InvalidWeight

Ordering = Literal["composite", "mint", "aged"]
ORDERINGS: tuple[str, ...] = ("composite", "mint", "aged")

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
#: most UTF-8 bytes a stored error message or traceback keeps (longer ones are cut).
MAX_ERROR_BYTES = 1024 * 1024
MAX_TRACEBACK_BYTES = 1024 * 1024
#: deepest JSON nesting a payload, result or progress value may have (orjson's own bound).
MAX_JSON_DEPTH = 254
#: the highest per-queue payload limit (QueueOptions.max_payload).
MAX_PAYLOAD_LIMIT = 64 * 1024 * 1024

#: input → (allowed values, what a refusal raises): the table docs/lifecycle.md shows.
LIMITS: tuple[tuple[str, str, str], ...] = (
    ("queue name, group", "1–128 characters of `A–Z a–z 0–9 . _ - :`", "InvalidName"),
    ("job name", f"a string of 1 … {MAX_JOB_NAME} characters, valid UTF-8", "InvalidOption"),
    (
        "payload (`data`), result, progress",
        f"JSON: at most `max_payload` bytes encoded (default {DEFAULT_MAX_PAYLOAD:,}, "
        f"settable up to {MAX_PAYLOAD_LIMIT:,}); finite numbers only (no NaN/Infinity); "
        f"integers within 64 bits; nesting at most {MAX_JSON_DEPTH} levels; valid UTF-8",
        "PayloadError",
    ),
    (
        "error (`fail`)",
        f"any text, valid UTF-8; longer than {MAX_ERROR_BYTES:,} bytes: the middle is cut "
        "out and replaced by a visible `[echomq: … bytes cut …]` marker",
        "InvalidOption",
    ),
    (
        "traceback (`fail`)",
        f"as error: at most {MAX_TRACEBACK_BYTES:,} bytes kept, head and tail around a marker",
        "InvalidOption",
    ),
    (
        "idempotency key",
        f"a string of 1 … {MAX_KEY_LENGTH} characters, valid UTF-8",
        "InvalidOption",
    ),
    (
        "dedupe (`Dedupe`)",
        "mode drop, throttle, debounce or latest; window seconds > 0 and ≤ "
        f"{MAX_DELAY:,.0f}, finite (throttle and debounce need one, latest takes none); "
        "max_wait ≥ window, debounce only; not with key=",
        "InvalidOption",
    ),
    ("priority (tier)", "an integer 0 … 2,097,151 (2^21 − 1)", "InvalidPriority"),
    ("delay, retry_delay", f"seconds 0 … {MAX_DELAY:,.0f} (ten years), finite", "InvalidDelay"),
    (
        "run_at",
        "a timezone-aware datetime at most ten years ahead (past: due now)",
        "InvalidDelay",
    ),
    ("delay and run_at together", "refused: give one", "InvalidOption"),
    ("max_attempts", f"an integer 1 … {MAX_ATTEMPTS}", "InvalidOption"),
    ("weight", f"an integer 1 … {MAX_WEIGHT}", "InvalidWeight"),
    ("claim n", f"an integer 1 … {MAX_CLAIM:,}", "InvalidOption"),
    ("lease", f"seconds > 0 and ≤ {MAX_LEASE:,.0f} (seven days)", "InvalidOption"),
    (
        "add_many item",
        "a mapping with `name`, and else only `data` and add's keywords "
        "(priority, group, delay, run_at, max_attempts, key)",
        "InvalidOption",
    ),
    ("jobs() page", "offset 0 … 10^9, count 1 … 10,000", "InvalidOption"),
    ("event id (events(after=…), read_events)", "an Event.id: 1 … 16 decimal digits", "InvalidId"),
    ("read_events count", "an integer 1 … 200 (stream entries)", "InvalidOption"),
    ("wait timeout", "seconds 0 … 86,400 (a day), finite", "InvalidOption"),
    (
        "configure settings",
        "each as in [settings](settings.md); one bad value refuses the whole call",
        "InvalidOption",
    ),
)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)  # type: ignore[arg-type]


def check_int(what: str, value: object, low: int, high: int) -> int:
    if not _is_int(value) or not low <= value <= high:  # type: ignore[operator]
        raise InvalidOption(f"{what} {value!r} is out of range; allowed integers {low} … {high}")
    return value  # type: ignore[return-value]


def check_known(what: str, given: Iterable[str], allowed: Iterable[str]) -> None:
    """Refuse keywords outside ``allowed`` (a misspelled option), naming them and
    the allowed ones: InvalidOption before anything is written."""
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise InvalidOption(
            f"{what}: unknown option(s) {', '.join(map(repr, unknown))}; "
            f"allowed: {', '.join(sorted(allowed))}"
        )


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


def is_utf8(text: str) -> bool:
    """False for a str that cannot be sent: it holds a lone surrogate."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def check_job_name(name: object) -> str:
    if not isinstance(name, str) or not 1 <= len(name) <= MAX_JOB_NAME or not is_utf8(name):
        raise InvalidOption(
            f"job name {name!r:.300} must be a string of 1 … {MAX_JOB_NAME} characters "
            "of valid UTF-8"
        )
    return name


def check_key(key: object) -> str:
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY_LENGTH or not is_utf8(key):
        raise InvalidOption(
            f"idempotency key {key!r:.600} must be a string of 1 … {MAX_KEY_LENGTH} characters "
            "of valid UTF-8"
        )
    return key


def bounded_text(what: str, value: object, limit: int) -> str:
    """An error or traceback as stored: ``str(value)``, cut to ``limit`` UTF-8 bytes.

    A longer text keeps its head and its tail (where a traceback names the
    exception) around a marker saying how much was cut. Not UTF-8
    (a lone surrogate) → InvalidOption."""
    text = value if isinstance(value, str) else str(value)
    try:
        raw = text.encode()
    except UnicodeEncodeError as exc:
        raise InvalidOption(
            f"{what} holds {text[exc.start : exc.end]!r}, which is not valid UTF-8 "
            f"(at character {exc.start}); allowed: any text of valid UTF-8"
        ) from None
    if len(raw) <= limit:
        return text
    marker = f"\n… [echomq: {{}} of {len(raw):,} bytes cut; {what} keeps at most {limit:,}] …\n"
    keep = limit - len(marker.encode()) - 16
    head, tail = raw[: keep // 2], raw[len(raw) - (keep - keep // 2) :]
    cut = len(raw) - len(head) - len(tail)
    # "ignore" drops a character split at either cut: the result stays valid and short
    return head.decode(errors="ignore") + marker.format(f"{cut:,}") + tail.decode(errors="ignore")


def delay_ms(delay: object) -> int:
    """A delay in seconds (>= 0) as whole milliseconds; -1 for none."""
    if delay is None:
        return -1
    if not _is_number(delay) or not 0 <= delay <= MAX_DELAY:  # type: ignore[operator]
        raise InvalidDelay(f"delay {delay!r} is out of range; allowed seconds 0 … {MAX_DELAY:.0f}")
    return round(delay * 1000)  # type: ignore[operator]


def run_at_ms(run_at: object) -> int:
    """An aware datetime as epoch milliseconds; -1 for none.

    Capped like ``delay``: at most MAX_DELAY seconds ahead of this process's
    clock. That clock only bounds the input; the server's clock fires the job."""
    if run_at is None:
        return -1
    if not isinstance(run_at, datetime):
        raise InvalidDelay(
            f"run_at {run_at!r:.100} is not a datetime; pass a timezone-aware datetime"
        )
    if run_at.tzinfo is None or run_at.utcoffset() is None:
        raise InvalidDelay(f"run_at {run_at.isoformat()} is naive; pass a timezone-aware datetime")
    ms = round(run_at.timestamp() * 1000)
    if ms > (time.time() + MAX_DELAY) * 1000:
        raise InvalidDelay(
            f"run_at {run_at.isoformat()} is out of range; allowed at most "
            f"{MAX_DELAY:.0f} seconds (ten years) ahead, like delay"
        )
    return max(0, ms)


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
        check_int("max_payload", self.max_payload, 1, MAX_PAYLOAD_LIMIT)
        check_int("max_attempts", self.max_attempts, 1, MAX_ATTEMPTS)

    @classmethod
    def from_settings(cls, settings: QueueSettings) -> QueueOptions:
        """The options a queue was opened with: its settings over the defaults above."""
        given = dict(settings)
        allowed = ("url", "client", "durable", "durable_timeout", *QueueSettings.__annotations__)
        check_known("Queue", given, allowed)
        if given.get("backoff", 0) is None:
            del given["backoff"]
        return cls(**given)  # type: ignore[arg-type]

    def settings(self) -> QueueSettings:
        """These options as the constructor's keywords (a twin queue is made with them)."""
        return QueueSettings(
            ordering=self.ordering,
            max_stalls=self.max_stalls,
            keep_completed=self.keep_completed,
            keep_completed_age=self.keep_completed_age,
            keep_dead=self.keep_dead,
            keep_dead_age=self.keep_dead_age,
            max_payload=self.max_payload,
            max_attempts=self.max_attempts,
            backoff=self.backoff,
        )

    def script_block(self) -> list[str]:
        """ARGV[2..6] of every script (ARGV[1] is the key prefix)."""
        return [
            str(self.max_stalls),
            str(round(self.keep_completed_age * 1000)),
            str(self.keep_completed),
            str(round(self.keep_dead_age * 1000)),
            str(self.keep_dead),
        ]


def limits_table() -> str:
    """:data:`LIMITS` as the markdown table in docs/lifecycle.md."""
    rows = ["| input | allowed | refused with |", "| --- | --- | --- |"]
    rows += [f"| {what} | {allowed} | `{error}` |" for what, allowed, error in LIMITS]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(limits_table(), end="")
