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

    def next_int(self) -> int:
        with self._lock:
            now_ms = time.time_ns() // 1_000_000
            if now_ms > self._last_ms:
                self._last_ms = now_ms
                self._seq = int.from_bytes(os.urandom(2), "big") & 0x7FF  # leave headroom
            else:
                self._seq += 1
                if self._seq > _MAX_SEQ:  # counter spent: borrow the next millisecond
                    self._last_ms += 1
                    self._seq = 0
            ms, seq = self._last_ms, self._seq
        rand_b = self._random_62()
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
