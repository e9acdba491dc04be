"""The server's clock for tests: wait for a moment by ``TIME``, never by a bare sleep.

Why: leases, delays and retention ages are measured by the server's clock
(DESIGN §4), so a test that wants "after the lease ran out" polls the
server's ``TIME`` until it has passed the lease deadline the server itself
handed out. No margin to guess, and a loaded machine only makes it slower.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

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
