"""Branded job ids: ``job_`` + 26 lowercase Crockford base32 characters of a UUIDv7.

Crockford's alphabet is in ASCII order and every id has the same length, so
the lexicographic order of ids is the numeric order of their UUIDs, which for
UUIDv7 is mint order: a 48-bit millisecond timestamp, then a 12-bit counter
(RFC 9562 method 1) that keeps ids minted in one process strictly increasing
even within one millisecond or when the wall clock steps back.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from datetime import UTC, datetime

from echomq.errors import InvalidId

PREFIX = "job_"
ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
BODY_LENGTH = 26
_DIGIT = {c: i for i, c in enumerate(ALPHABET)}
_MAX_SEQ = 0xFFF


class _Minter:
    """Monotonic UUIDv7 source for one process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._seq = 0
        self._pool = b""
        self._offset = 0

    def _random_62(self) -> int:
        """62 random bits from a pooled os.urandom read (one system call per 512 ids)."""
        with self._lock:
            if self._offset >= len(self._pool):
                self._pool, self._offset = os.urandom(4096), 0
            chunk = self._pool[self._offset : self._offset + 8]
            self._offset += 8
        return int.from_bytes(chunk, "big") & ((1 << 62) - 1)

    def _advance(self, now_ms: int) -> int:
        """The next (ms << 16 | seq) stamp; the caller holds the lock."""
        if now_ms > self._last_ms:
            self._last_ms = now_ms
            self._seq = int.from_bytes(os.urandom(2), "big") & 0x7FF  # leave headroom
        else:
            self._seq += 1
            if self._seq > _MAX_SEQ:  # counter spent: borrow the next millisecond
                self._last_ms += 1
                self._seq = 0
        return (self._last_ms << 16) | self._seq

    def next_int(self) -> int:
        with self._lock:
            stamp = self._advance(time.time_ns() // 1_000_000)
        return _assemble(stamp, self._random_62())

    def next_ints(self, count: int) -> list[int]:
        """``count`` increasing values minted together: one clock read, one lock,
        one random read (what a bulk add needs)."""
        with self._lock:
            now_ms = time.time_ns() // 1_000_000
            stamps = [self._advance(now_ms) for _ in range(count)]
        rand = os.urandom(8 * count)
        return [
            _assemble(stamp, int.from_bytes(rand[8 * i : 8 * i + 8], "big") & _MASK_62)
            for i, stamp in enumerate(stamps)
        ]


_MASK_62 = (1 << 62) - 1


def _assemble(stamp: int, rand_b: int) -> int:
    """UUIDv7 bits from a (ms << 16 | seq) stamp and 62 random bits."""
    ms, seq = stamp >> 16, stamp & 0xFFFF
    return (ms << 80) | (0x7 << 76) | (seq << 64) | (0b10 << 62) | rand_b


_minter = _Minter()


# two base32 digits (10 bits) per table lookup: 13 lookups per id
_PAIRS = [a + b for a in ALPHABET for b in ALPHABET]


def _encode(value: int) -> str:
    pairs = _PAIRS
    return "".join([pairs[(value >> shift) & 0x3FF] for shift in range(120, -1, -10)])


def new_id() -> str:
    """Mint a new branded id, greater than every id this process minted before."""
    return PREFIX + _encode(_minter.next_int())


def new_ids(count: int) -> list[str]:
    """Mint ``count`` increasing ids at once (the same ids as ``count`` new_id calls).

    The top 50 bits (10 characters) are the millisecond, shared by most ids of
    a batch, so they are encoded once per millisecond; the low 80 bits take
    eight table lookups joined in one call.
    """
    pairs = _PAIRS
    out: list[str] = []
    last_ms, head = -1, ""
    for v in _minter.next_ints(count):
        if v >> 80 != last_ms:
            last_ms, head = v >> 80, PREFIX + _encode(v)[:10]
        out.append(
            "".join(
                (
                    head,
                    pairs[(v >> 70) & 0x3FF],
                    pairs[(v >> 60) & 0x3FF],
                    pairs[(v >> 50) & 0x3FF],
                    pairs[(v >> 40) & 0x3FF],
                    pairs[(v >> 30) & 0x3FF],
                    pairs[(v >> 20) & 0x3FF],
                    pairs[(v >> 10) & 0x3FF],
                    pairs[v & 0x3FF],
                )
            )
        )
    return out


def parse_id(job_id: object) -> uuid.UUID:
    """Return the UUIDv7 behind a branded id, or raise InvalidId saying what is wrong."""
    if not isinstance(job_id, str):
        raise InvalidId(f"job id {job_id!r} is not a string; expected 'job_' + 26 base32 chars")
    if not job_id.startswith(PREFIX):
        raise InvalidId(f"job id {job_id!r} does not start with {PREFIX!r}")
    body = job_id[len(PREFIX) :]
    if len(body) != BODY_LENGTH:
        raise InvalidId(
            f"job id {job_id!r} has {len(body)} characters after the prefix; expected {BODY_LENGTH}"
        )
    value = 0
    for ch in body:
        digit = _DIGIT.get(ch)
        if digit is None:
            raise InvalidId(
                f"job id {job_id!r} has {ch!r}, outside lowercase Crockford base32 ({ALPHABET})"
            )
        value = (value << 5) | digit
    if value >> 128:
        raise InvalidId(f"job id {job_id!r} encodes a value above 2^128−1")
    parsed = uuid.UUID(int=value)
    if parsed.version != 7 or parsed.variant != uuid.RFC_4122:
        raise InvalidId(f"job id {job_id!r} is not a UUIDv7 (version {parsed.version})")
    return parsed


def is_id(job_id: object) -> bool:
    """True if ``job_id`` parses as a branded id."""
    try:
        parse_id(job_id)
    except InvalidId:
        return False
    return True


def id_timestamp(job_id: str) -> datetime:
    """The mint time of an id (millisecond precision, UTC)."""
    ms = parse_id(job_id).int >> 80
    return datetime.fromtimestamp(ms / 1000, tz=UTC)
