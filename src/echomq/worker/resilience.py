"""Riding out a dropped connection: which errors are worth retrying, and for how long.

A worker must survive a server restart or a network blip: every loop of the
runtime catches these errors, pauses (exponentially, capped) and goes on. A
lease that lapses meanwhile is the server's business: the job is returned to
waiting by whoever runs maintenance next.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from echomq.errors import TRANSIENT_ERRORS

T = TypeVar("T")

log = logging.getLogger("echomq.worker")

#: errors that mean "the server cannot serve us just now" (one list: echomq.errors)
TRANSIENT = TRANSIENT_ERRORS


class Pauses:
    """Pauses after consecutive transient errors: ``first`` doubling up to ``cap`` seconds."""

    def __init__(self, first: float = 0.05, cap: float = 2.0) -> None:
        self._first = first
        self._cap = cap
        self._next = first

    def next(self) -> float:
        pause = self._next
        self._next = min(self._cap, self._next * 2)
        return pause

    def reset(self) -> None:
        self._next = self._first


async def persist(op: Callable[[], Awaitable[T]], *, patience: float, what: str) -> T:
    """Run ``op``, retrying transient errors for up to ``patience`` seconds.

    Used to record a job's outcome: giving up early would leave the job to
    stall although its handler finished, so the worker keeps trying for about
    as long as the lease could still be valid.
    """
    deadline = time.monotonic() + patience
    pauses = Pauses()
    while True:
        try:
            return await op()
        except TRANSIENT as exc:
            pause = pauses.next()
            if time.monotonic() + pause > deadline:
                raise
            log.warning("%s: %s; retrying in %.2f s", what, exc, pause)
            await asyncio.sleep(pause)
