"""Job logs (DESIGN §10): what a handler logged while it ran, kept with its job.

Inside a handler, ``job.log(message)`` and every ``logging`` record at or above
the worker's ``job_log_level`` that the handler's own code emits go to the
job's :class:`JobLog` (echomq.worker.logcapture routes the records). The
lines wait there until the worker's next call for the job (its heartbeat, or
its outcome), which carries them to the server: no round trip of its own.
The server keeps them in the list ``keys.QueueKeys.log`` (scripts/includes/logs.lua),
at most :data:`MAX_LINES` lines and :data:`MAX_BYTES` bytes per job, the oldest
dropped first and one line saying how many; the list goes when its job goes.

``q.logs(job_id)`` reads a job's log as :class:`LogLine` s, oldest first.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from echomq.errors import InvalidOption

#: the most lines kept per job (with the line that says how many older ones were dropped).
MAX_LINES = 1000
#: the most bytes of lines kept per job.
MAX_BYTES = 256 * 1024
#: the longest message of one line, in bytes (a longer one is cut, and says so).
MAX_MESSAGE = 8 * 1024
#: what a stored line adds to its message (its time, attempt and level), at most.
LINE_OVERHEAD = 40
#: the most bytes of log lines one heartbeat call carries, all its jobs together (the
#: rest wait for the next; a job's outcome carries all its lines).
HEARTBEAT_LOG_BYTES = 1024 * 1024
#: the levels a line may carry, as ``logging`` names them.
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_LEVEL_NUMBERS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}
#: the message of the line that says how many older lines were dropped.
DROPPED = "{} older line(s) dropped: a job keeps {} lines and {} KiB of log at most"


def check_level(level: object) -> str:
    """A level name (``"INFO"``) or number (``logging.INFO``) as its name, or InvalidOption."""
    if isinstance(level, str) and level.upper() in _LEVEL_NUMBERS:
        return level.upper()
    if isinstance(level, int) and not isinstance(level, bool) and level in _LEVEL_NUMBERS.values():
        return LEVELS[level // 10 - 1]
    raise InvalidOption(
        f"log level {level!r:.60} is not a level; allowed {', '.join(LEVELS)} "
        "(or their logging numbers 10 … 50)"
    )


def level_number(level: str) -> int:
    return _LEVEL_NUMBERS[level]


def cut_message(message: str) -> str:
    """``message`` within MAX_MESSAGE bytes (UTF-8), cut at a character boundary."""
    raw = message.encode("utf-8", "replace")
    if len(raw) <= MAX_MESSAGE:
        return message
    note = f" … [cut: {len(raw)} bytes]"
    return raw[: MAX_MESSAGE - len(note.encode())].decode("utf-8", "ignore") + note


@dataclass(frozen=True, slots=True)
class LogLine:
    """One line of a job's log: when (server clock), in which attempt, its level
    (a ``logging`` level name) and its message."""

    at: datetime
    attempt: int
    level: str
    message: str


class JobLog:
    """The lines a running job logged that are not sent yet (thread-safe: a sync
    handler logs from its thread, the worker takes them on its loop).

    Bounded like the stored log: past MAX_LINES - 1 lines or MAX_BYTES bytes
    waiting, the oldest are dropped here and counted, and the count travels
    with the next lines (the server's "dropped" line includes them)."""

    def __init__(self, attempt: int, level: str = "INFO") -> None:
        self.attempt = attempt
        self.level = check_level(level)
        self.threshold = level_number(self.level)
        self._lines: deque[tuple[float, str, str, int]] = deque()
        self._bytes = 0
        self._dropped = 0
        self._lock = threading.Lock()

    def add(self, level: str, message: str, at: float | None = None) -> None:
        """Keep one line (``at``: its wall-clock time, default now)."""
        text = cut_message(message)
        size = len(text.encode("utf-8", "replace")) + LINE_OVERHEAD
        with self._lock:
            self._lines.append((time.time() if at is None else at, level, text, size))
            self._bytes += size
            while len(self._lines) > MAX_LINES - 1 or self._bytes > MAX_BYTES:
                self._bytes -= self._lines.popleft()[3]
                self._dropped += 1

    def __len__(self) -> int:
        return len(self._lines)

    def take(self, max_bytes: int | None = None) -> list[Any] | None:
        """The waiting lines as one log entry (attempt, dropped, then [age ms,
        level, message] per line; includes/logs.lua), or None when there is
        nothing to send. What is taken is gone from here. ``max_bytes``: take
        the oldest lines up to that many bytes only; the rest wait for the
        next call (a heartbeat's budget)."""
        with self._lock:
            if not self._lines and not self._dropped:
                return None
            lines: list[tuple[float, str, str, int]] = []
            size = 0
            while self._lines and (max_bytes is None or size + self._lines[0][3] <= max_bytes):
                line = self._lines.popleft()
                lines.append(line)
                size += line[3]
            if not lines and self._lines:  # nothing fits this call: all waits
                return None
            dropped = self._dropped
            self._bytes -= size
            self._dropped = 0
        now = time.time()
        entry: list[Any] = [self.attempt, dropped]
        for at, level, text, _ in lines:
            entry.append([max(0, round((now - at) * 1000)), level, text])
        return entry

    @property
    def waiting_bytes(self) -> int:
        """The bytes of the lines waiting (what a take would carry, about)."""
        return self._bytes


def take_entry(job: Any, max_bytes: int | None = None) -> list[Any] | None:
    """The log entry a call for ``job`` carries (None: it has none); see JobLog.take."""
    log: JobLog | None = getattr(job, "_log", None)
    return None if log is None else log.take(max_bytes)


def take_text(job: Any, max_bytes: int | None = None) -> str | None:
    """take_entry as JSON text (a script argument of its own)."""
    entry = take_entry(job, max_bytes)
    return None if entry is None else orjson.dumps(entry).decode()


def decode_log(reply: Any) -> list[LogLine] | None:
    """readLog.lua's reply: None for no such job, else its lines (with the line
    that says how many were dropped first, once some were)."""
    if not reply:
        return None
    lg, raw_lines = str(reply[0]), reply[1:]
    out: list[LogLine] = []
    parts = lg.split(" ")
    if len(parts) == 4 and int(parts[1]) > 0:
        out.append(
            LogLine(
                _ms(parts[2]),
                int(parts[3]),
                "WARNING",
                DROPPED.format(int(parts[1]), MAX_LINES, MAX_BYTES // 1024),
            )
        )
    for raw in raw_lines:
        at_ms, attempt, level, message = str(raw).split(" ", 3)
        out.append(LogLine(_ms(at_ms), int(attempt), level, message))
    return out


def _ms(raw: str) -> datetime:
    return datetime.fromtimestamp(int(raw) / 1000, tz=UTC)
