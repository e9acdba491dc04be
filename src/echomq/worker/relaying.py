"""``Worker(..., relay=ob)``: the outbox relay (echomq.outbox) on a thread of the worker.

The relay's database calls block, so it runs on a daemon thread of its own
for as long as ``Worker.run`` does, sending to the worker's first queue's
server; the worker's stop stops it (bounded wait). SQLAlchemy is imported
only when a relay is given.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from echomq.errors import InvalidOption

log = logging.getLogger("echomq.worker")

#: the longest a stopping worker waits for its relay thread (seconds)
RELAY_STOP_TIMEOUT = 10.0


def check_relay(relay: Any) -> Any:
    """None, an Outbox or a Relay (InvalidOption otherwise)."""
    if relay is None:
        return None
    from echomq.outbox import Outbox, Relay

    if not isinstance(relay, Outbox | Relay):
        raise InvalidOption(f"relay {relay!r:.80} is not an echomq.outbox Outbox or Relay")
    return relay


class RelayThread:
    """One relay running on a daemon thread until ``stop``."""

    def __init__(self, relay: Any, url: str | None) -> None:
        from echomq.outbox import Relay

        self.relay: Relay = relay if isinstance(relay, Relay) else Relay(relay, url)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="echomq-relay", daemon=True)

    def start(self) -> None:
        log.info("relaying outbox table %s", self.relay.outbox.table)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.relay.run(self._stop)
        except Exception:
            log.exception("the outbox relay stopped (the worker goes on without it)")

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.to_thread(self._thread.join, RELAY_STOP_TIMEOUT)
        self.relay.close()
