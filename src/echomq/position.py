"""Where a waiting job stands: ``q.position(job_id) -> Position``.

position.lua reads, in one read-only call of bounded work, the job's rank in
its lane and the claims the weighted rotation makes before it
(docs/ordering.md "Where a job stands"); this module decodes its reply and
turns the queue's recent completion rate into an estimate of the wait.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from echomq.errors import E_INVALID_STATE, E_NOT_FOUND, InvalidState, JobNotFound

#: queue_ahead is not counted: the job's lane is parked (a pause, a cap, a
#: throttle or a rate keeps it from being served), or the ring holds more
#: lanes than one call reads (position.lua POSITION_LANES).
PARKED, TOO_MANY_LANES = -1, -2


@dataclass(frozen=True, slots=True)
class Position:
    """A waiting job's place.

    ``lane_ahead``: waiting jobs of its lane served before it (exact).
    ``queue_ahead``: claims the rotation makes before it, from the present
    backlogs, weights and turn, assuming no adds and no control binding (exact
    under that assumption); None when its lane is parked or the ring holds
    more than 10,000 lanes. ``eta``: seconds until it is claimed at the
    queue's recent completion rate (the last 100 completions of the last 10
    minutes, over the time from the oldest of them to now, at least a
    second): (queue_ahead + 1) / rate; None without such history (or with
    ``keep_completed=0``, which keeps none) or without queue_ahead.
    """

    lane_ahead: int
    queue_ahead: int | None
    eta: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"lane_ahead": self.lane_ahead, "queue_ahead": self.queue_ahead, "eta": self.eta}


def decode_position(queue: str, job_id: str, reply: Any) -> Position:
    """position.lua's reply: {lane_ahead, queue_ahead, completions, span_ms} or a refusal."""
    if reply == E_NOT_FOUND:
        raise JobNotFound(f"no job {job_id!r} in queue {queue!r}")
    if isinstance(reply, list) and reply and reply[0] == E_INVALID_STATE:
        raise InvalidState(
            f"job {job_id!r} is {reply[1]}: position() is known only for a waiting job"
        )
    lane_ahead, queue_ahead, completions, span_ms = (int(x) for x in reply)
    ahead = None if queue_ahead < 0 else queue_ahead
    eta = None
    if ahead is not None and completions > 0:
        # jobs per second; over at least a second, so one completion a moment
        # ago does not make a rate of thousands
        rate = completions / max(span_ms, 1000) * 1000
        eta = (ahead + 1) / rate
    return Position(lane_ahead, ahead, eta)
