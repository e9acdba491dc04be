"""Operations of more than one round trip: a reply that asks for another call.

An engine method whose parser returns :class:`Next` has not finished: the
queue sends ``Next.call`` and goes on with its reply, until a parser returns
a plain value. Used where the client must compute between two scripts from
what the first one read, e.g. a schedule's next fire time from the server's
clock (echomq.schedules): read, compute, then a compare-and-set that hands
back the read again if someone else wrote first. Each call is still one
atomic script; the steps are bounded by MAX_STEPS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from echomq.call import Call
from echomq.errors import EchoMQError

T = TypeVar("T")

#: the most calls one operation may take (a compare-and-set that keeps losing gives up).
MAX_STEPS = 16


@dataclass(frozen=True, slots=True)
class Next(Generic[T]):
    """The next call of an operation in progress."""

    call: Call[T | Next[T]]
    #: the most calls the operation may take: MAX_STEPS for a compare-and-set,
    #: more for one that works through a bounded set in pages (retry_dead)
    most: int = 0


def next_call(value: Any, steps: int, what: str) -> Call[Any] | None:
    """The call to send after a reply parsed to ``value`` (None: ``value`` is the result)."""
    if not isinstance(value, Next):
        return None
    most = value.most or MAX_STEPS
    if steps >= most:
        raise EchoMQError(f"{what}: gave up after {most} calls (concurrent changes)")
    return value.call
