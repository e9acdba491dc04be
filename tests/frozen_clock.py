"""A private server whose clock the test sets: libfaketime preloaded into it.

Why: the server's clock is the queue's only clock (DESIGN §4), so a test that
must see fires on dates of its choosing (a daylight-saving transition) sets
that clock, not the client's. libfaketime (preloaded with ``LD_PRELOAD``)
makes the server's wall clock read the time written in a file; with
``FAKETIME_NO_CACHE`` every read of the clock (``TIME`` in a script) reads
the file again, so each :meth:`FrozenClock.set` takes effect at once and the
clock stands still in between. The monotonic clock is left alone, so the
server's own timers (its event loop, script time limits) run as usual.

The library comes from the ``libfaketime`` wheel (a dev dependency; only its
bundled ``libfaketime.so.1`` is used, the Python package is never imported)
or Debian's ``libfaketime`` package.
"""

from __future__ import annotations

import importlib.util
import time
from datetime import UTC, datetime
from pathlib import Path

from clock import CLOCK_TIMEOUT
from prerequisites import missing
from servers import PrivateServer, require_server

_DEBIAN = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


def libfaketime() -> str | None:
    """The path of libfaketime.so.1 (the wheel's, else Debian's), or None."""
    spec = importlib.util.find_spec("libfaketime")
    for location in (spec.submodule_search_locations or []) if spec else []:
        found = Path(location) / "vendor" / "libfaketime" / "src" / "libfaketime.so.1"
        if found.is_file():
            return str(found)
    return str(_DEBIAN) if _DEBIAN.is_file() else None


class FrozenClock:
    """The time a server with this clock reads, set by the test (whole seconds, UTC)."""

    def __init__(self, path: Path, start: datetime) -> None:
        self.path = path
        self.server: PrivateServer | None = None  # set: set() waits until it reads the time
        self.set(start)

    def set(self, moment: datetime) -> None:
        """Stop the server's clock at ``moment`` (a timezone-aware datetime)."""
        utc = moment.astimezone(UTC)
        assert utc.microsecond == 0, "libfaketime's absolute times are whole seconds"
        text = utc.strftime("%Y-%m-%d %H:%M:%S\n")
        partial = self.path.with_suffix(".new")
        partial.write_text(text, encoding="ascii")
        partial.replace(self.path)  # the server never reads half a line
        self.now = utc
        if self.server is not None:
            self._wait_until_read(self.server)

    def _wait_until_read(self, server: PrivateServer) -> None:
        """Poll the server's TIME until it reads the new time (Valkey 9 may answer
        from a time it read a moment before for a while)."""
        target = int(self.now.timestamp())
        deadline = time.monotonic() + CLOCK_TIMEOUT
        with server.client() as client:
            while (seen := int(client.time()[0])) != target:
                assert time.monotonic() < deadline, f"the server reads {seen}, not {target}"
                time.sleep(0.01)

    def env(self) -> dict[str, str]:
        """The environment a server needs to read this clock."""
        library = libfaketime()
        if library is None:
            missing("libfaketime.so.1", "pip install -e '.[dev]' (the libfaketime wheel)")
        return {
            "LD_PRELOAD": library,
            "FAKETIME_TIMESTAMP_FILE": str(self.path),
            "FAKETIME_NO_CACHE": "1",
            "DONT_FAKE_MONOTONIC": "1",
            "TZ": "UTC",  # the file's times are read in the server's local zone
        }


def frozen_server(kind: str, directory: Path, start: datetime) -> tuple[PrivateServer, FrozenClock]:
    """A started private server of ``kind`` whose clock reads ``start`` until set."""
    directory.mkdir(parents=True, exist_ok=True)
    clock = FrozenClock(directory / "faketime.txt", start)
    binary = require_server(kind)
    server = PrivateServer(kind, directory / "server", binary=binary, env=clock.env())
    server.start()
    clock.server = server
    clock.set(start)
    return server, clock
