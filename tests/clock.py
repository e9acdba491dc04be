"""The server's clock for tests: wait for a moment by ``TIME``, never by a bare sleep.

Why: leases, delays and retention ages are measured by the server's clock
(DESIGN §4), so a test that wants "after the lease ran out" polls the
server's ``TIME`` until it has passed the lease deadline the server itself
handed out. No margin to guess, and a loaded machine only makes it slower.

``FrozenClock`` is the other way: a private server whose wall clock the test
sets and moves itself (libfaketime), for reference models that must predict
exactly what happens at which time (tests/schedule_model.py).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prerequisites import missing
from servers import PrivateServer

#: how long a wait for the server's clock may take before the test fails.
CLOCK_TIMEOUT = 10.0
_POLL = 0.005


def _ms(reply: Any) -> int:
    seconds, micros = reply
    return int(seconds) * 1000 + int(micros) // 1000


def to_ms(moment: datetime | float) -> float:
    """A datetime as epoch ms; a number is taken as ms already."""
    return moment.timestamp() * 1000 if isinstance(moment, datetime) else float(moment)


def server_ms(client: Any) -> int:
    """The server's clock in epoch ms (a sync redis client or cluster client)."""
    return _ms(client.time())


def wait_past(client: Any, moment: datetime | float, timeout: float = CLOCK_TIMEOUT) -> datetime:
    """Poll the server's clock until it is past ``moment`` (a datetime or epoch ms);
    return the server time seen then."""
    target = to_ms(moment)
    deadline = time.monotonic() + timeout
    while (now := server_ms(client)) <= target:
        assert time.monotonic() < deadline, f"the server clock never passed {moment}"
        time.sleep(_POLL)
    return datetime.fromtimestamp(now / 1000, UTC)


async def await_past(
    client: Any, moment: datetime | float, timeout: float = CLOCK_TIMEOUT
) -> datetime:
    """wait_past for an asyncio client."""
    target = to_ms(moment)
    deadline = time.monotonic() + timeout
    while (now := _ms(await client.time())) <= target:
        assert time.monotonic() < deadline, f"the server clock never passed {moment}"
        await asyncio.sleep(_POLL)
    return datetime.fromtimestamp(now / 1000, UTC)


# -- a server clock the test sets ---------------------------------------------
#: the faked clock's file format: an absolute UTC time, frozen (libfaketime).
_FROZEN_FORMAT = "%Y-%m-%d %H:%M:%S"
#: written after the milliseconds (as nanoseconds 000500). libfaketime reads the
#: fraction as a double together with the last digit of the seconds ("1.150")
#: and truncates it to nanoseconds, so ".150" alone is read as 149999999 ns for
#: some seconds: TIME answers ...149999 us and every script's now_ms is one
#: millisecond before the time the test set. Half a microsecond more is read as
#: 150000499 or 150000500 ns, which TIME answers as exactly 150000 us.
_HALF_MICROSECOND = "000500"


def libfaketime_path() -> str | None:
    """The libfaketime.so.1 the ``libfaketime`` wheel ships (a dev dependency),
    found without importing the package (only the library is used)."""
    spec = importlib.util.find_spec("libfaketime")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location) / "vendor" / "libfaketime" / "src" / "libfaketime.so.1"
        if path.is_file():
            return str(path)
    return None


class FrozenClock:
    """The wall clock of one private server, frozen at a time the test sets.

    Why: schedules, delays, leases and retention are measured by the server's
    clock (DESIGN §4), and a reference model that must predict *which* fire
    times make jobs needs that clock under its control, without waiting. The
    server runs with libfaketime preloaded (``environment()``), reading its
    time from a file on every call: ``TIME`` (and so every script's
    ``now_ms``) returns exactly what ``set``/``advance`` wrote, and does not
    move between them. Only the wall clock is faked: the server's monotonic
    clock (its event loop, timeouts) runs as usual. The test's own process is
    never faked. The clock only moves forward, as a real one does.
    """

    def __init__(self, directory: Path, start_ms: int) -> None:
        self.path = directory / "faketime"
        self.now_ms = 0
        #: once set, ``set`` waits until this server reads the new time, to the
        #: millisecond (Valkey 9.1 may answer from a wall time it read a moment
        #: before, for a while)
        self.server: PrivateServer | None = None
        self.set(start_ms)

    def environment(self, library: str) -> dict[str, str]:
        """What the server's process needs: the preload and where to read the time."""
        return {
            "LD_PRELOAD": library,
            "FAKETIME_TIMESTAMP_FILE": str(self.path),
            "FAKETIME_NO_CACHE": "1",  # re-read the file on every clock call
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "TZ": "UTC",
        }

    def set(self, ms: int) -> None:
        """Freeze the server's clock at ``ms`` (epoch ms, never earlier than now)."""
        assert ms >= self.now_ms, f"the clock goes forward only: {ms} < {self.now_ms}"
        moment = datetime.fromtimestamp(ms // 1000, UTC).strftime(_FROZEN_FORMAT)
        text = f"{moment}.{ms % 1000:03d}{_HALF_MICROSECOND}\n"
        temporary = self.path.with_suffix(".new")
        temporary.write_text(text, encoding="ascii")
        os.replace(temporary, self.path)  # a reader sees the old time or the new one
        self.now_ms = ms
        if self.server is not None:
            self._wait_until_read(self.server)

    def set_moment(self, moment: datetime) -> None:
        """``set`` at a timezone-aware datetime."""
        self.set(round(moment.timestamp() * 1000))

    @property
    def now(self) -> datetime:
        return datetime.fromtimestamp(self.now_ms / 1000, UTC)

    def _wait_until_read(self, server: PrivateServer) -> None:
        deadline = time.monotonic() + CLOCK_TIMEOUT
        with server.client() as client:
            while (seen := server_ms(client)) != self.now_ms:
                assert time.monotonic() < deadline, f"the server reads {seen}, not {self.now_ms}"
                time.sleep(_POLL)

    def advance(self, ms: int) -> int:
        """Move the server's clock ``ms`` forward; returns the new time."""
        self.set(self.now_ms + ms)
        return self.now_ms


def frozen_server(kind: str, directory: Path, start: datetime) -> tuple[PrivateServer, FrozenClock]:
    """A started private server of ``kind`` of its own, whose clock reads ``start``
    until the test sets it (the caller stops it)."""
    library = libfaketime_path()
    if library is None:
        missing("libfaketime (the libfaketime wheel's library)", "pip install -e '.[dev]'")
    directory.mkdir(parents=True, exist_ok=True)
    clock = FrozenClock(directory, round(start.timestamp() * 1000))
    server = PrivateServer(kind, directory / "server", env=clock.environment(library))
    server.start()
    clock.server = server
    clock.set(clock.now_ms)
    return server, clock
