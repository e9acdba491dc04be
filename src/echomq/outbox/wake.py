"""How an idle relay waits for new rows: LISTEN on PostgreSQL, a poll elsewhere.

PostgreSQL delivers the NOTIFY of ``Outbox.add`` when (and only if) the
writing transaction commits, so a LISTENing relay wakes within milliseconds
of the commit. The listening connection is opened (and LISTEN issued)
before the relay reads the table, so a commit between the read and the wait
is never missed; the poll interval stays as a fallback (a lost connection, a
row written without the NOTIFY).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any, Protocol

from sqlalchemy.engine import Engine

log = logging.getLogger("echomq.outbox")

#: how often a waiting relay looks at its stop flag (seconds)
STOP_CHECK = 0.25


class Waiter(Protocol):
    def arm(self) -> None:
        """Get ready to be woken (before the relay reads the table)."""

    def wait(self, timeout: float, stop: threading.Event) -> None:
        """Return when woken, after ``timeout`` seconds, or soon after ``stop`` is set."""

    def close(self) -> None: ...


class PollWaiter:
    """Sleeps the poll interval (SQLite, or any database without LISTEN)."""

    def arm(self) -> None:
        pass

    def wait(self, timeout: float, stop: threading.Event) -> None:
        stop.wait(timeout)

    def close(self) -> None:
        pass


class ListenWaiter:
    """LISTEN on one autocommit psycopg connection taken out of the engine's pool."""

    def __init__(self, engine: Engine, channel: str) -> None:
        self._engine = engine
        self._channel = channel
        self._conn: Any = None

    def arm(self) -> None:
        if self._conn is not None and not self._conn.closed:
            return
        raw = self._engine.raw_connection()  # the database unreachable: its own error
        conn = raw.driver_connection
        assert conn is not None
        raw.detach()  # ours now: autocommit and LISTEN never go back to the pool
        self._conn = conn
        try:
            conn.autocommit = True
            conn.execute(f'LISTEN "{self._channel}"')
        except Exception as exc:  # psycopg's own errors: the relay waits them out
            self.close()
            raise ConnectionError(f"LISTEN failed: {exc}") from exc

    def wait(self, timeout: float, stop: threading.Event) -> None:
        deadline = time.monotonic() + timeout
        try:
            while not stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                for _ in self._conn.notifies(timeout=min(left, STOP_CHECK), stop_after=1):
                    return
        except Exception:  # the connection was lost (a restart, a terminated backend):
            self.close()  # look at the table now; the next arm() listens again
            log.debug("LISTEN connection lost; listening again", exc_info=True)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()


def waiter_for(engine: Engine, dialect: str, channel: str) -> Waiter:
    return ListenWaiter(engine, channel) if dialect == "postgresql" else PollWaiter()
