"""Every exception echomq raises, and the map from script return codes to them.

The tree::

    EchoMQError
    ├── InvalidInput (also a ValueError): bad input, nothing was written
    │   ├── InvalidName        queue or group name outside docs/design.md §6
    │   ├── InvalidPriority    tier not an int in 0 … 2^21−1
    │   ├── InvalidWeight      weight not an int in 1 … 1000
    │   ├── InvalidScore       score / counter outside the codec's range
    │   ├── InvalidId          not a branded id
    │   ├── InvalidDelay       negative delay, naive or past-bound run_at
    │   ├── InvalidOption      other option out of range (claim n, lease, …)
    │   └── PayloadError       payload not JSON-serialisable or too large
    ├── LeaseLost              complete/fail/extend by a worker that no longer holds the lease
    │   └── JobCancelled       the lease was taken by cancel() (the handler is stopped)
    ├── JobNotFound            no job with that id (or it was pruned)
    ├── BatchNotFound          no batch with that id in this queue (or it expired)
    ├── WaitTimeout            wait() ran out of time (also a TimeoutError)
    ├── OrderingMismatch       queue opened with another ordering than it was created with
    ├── FormatTooNew           queue stored in a newer format than this client knows
    ├── ServerError            the server could not be started or reached
    ├── PoolTimeout            every connection of the queue's pool stayed in use too long
    ├── NotReplicated          a durable add was written but no replica acknowledged it in time
    └── OutboxError            the outbox table is missing or of another shape, or its
                               database is not one the outbox supports (echomq.outbox)

Each message names the offending value and the allowed range.
"""

from __future__ import annotations

from collections.abc import Iterable

import redis.exceptions


class EchoMQError(Exception):
    """Base class of every echomq error."""


class InvalidInput(EchoMQError, ValueError):
    """Bad input: the operation was refused before anything was written."""


class InvalidName(InvalidInput):
    """A queue or group name outside 1–128 characters of ``A–Z a–z 0–9 . _ - :``."""


class InvalidPriority(InvalidInput):
    """A tier that is not an integer in 0 … 2^21−1."""


class InvalidWeight(InvalidInput):
    """A lane weight that is not an integer in 1 … 1000."""


class InvalidScore(InvalidInput):
    """A score or counter outside what the composite-score codec can carry."""


class InvalidId(InvalidInput):
    """A string that is not a branded job id."""


class InvalidDelay(InvalidInput):
    """A negative delay, or a run_at that is naive or not a datetime."""


class InvalidOption(InvalidInput):
    """Another option outside its allowed range (claim size, lease, retention, …)."""


class InvalidDependency(InvalidInput):
    """A ``depends_on`` that is malformed, too long, or names a job that does not
    exist in the queue (never added, or pruned) or is dead."""


class DependencyFailed(EchoMQError):
    """A dependency that did not complete (it died, or was removed or pruned), as
    ``dependency_results`` reports it to a job added with
    ``on_dependency_failure="run"`` (a value in the mapping, not raised)."""


class InvalidSchedule(InvalidInput):
    """A schedule's cron expression, time zone or interval is not valid."""


class PayloadError(InvalidInput):
    """A payload that is not JSON-serialisable or exceeds the size limit."""


class LeaseLost(EchoMQError):
    """The caller no longer holds the job's lease (expired, or claimed by another worker)."""


class JobCancelled(LeaseLost):
    """``cancel()`` took a running job from its lease holder; the worker stops its handler."""


class JobNotFound(EchoMQError):
    """No job with that id exists (never added, removed, or pruned by retention)."""


class BatchNotFound(EchoMQError):
    """No batch with that id in this queue (never made here, or gone with its retention)."""


class WaitTimeout(EchoMQError, TimeoutError):
    """``wait()`` ran out of time before the job was completed or dead."""


class OrderingMismatch(EchoMQError):
    """The queue exists with a different ordering than the one it was opened with."""


class FormatTooNew(EchoMQError):
    """The queue was written in a newer stored format than this client knows."""


class LaneFull(EchoMQError):
    """An add (or a ``change`` into a lane) would make the lane hold more waiting +
    delayed jobs than its ``max_waiting``; nothing was written."""


class InvalidState(EchoMQError):
    """The job is in a state the operation does not apply to (e.g. ``change`` of an
    active job)."""


class ServerError(EchoMQError):
    """The server could not be started or reached."""


class PoolTimeout(EchoMQError):
    """No connection of the queue's bounded pool came free in time (all
    ``max_connections`` were in use for ``connection.POOL_TIMEOUT`` seconds);
    the call was not sent."""


class OutboxError(EchoMQError):
    """The outbox table (echomq.outbox) is missing or has another shape than the
    one ``Outbox.create_table`` makes, or its database is not PostgreSQL or SQLite."""


class NotReplicated(EchoMQError):
    """A durable add was written on the primary, but fewer replicas than asked
    acknowledged it within the timeout: it may be lost if the primary fails now.

    ``ids`` are the jobs that were written (they exist on the primary).
    """

    def __init__(self, ids: Iterable[str], replicas: int, timeout: float) -> None:
        self.ids = list(ids)
        self.replicas = replicas
        self.timeout = timeout
        super().__init__(
            f"{len(self.ids)} job(s) written but not acknowledged by {replicas} replica(s) "
            f"within {timeout:g}s (does the primary have a replica?): {', '.join(self.ids[:3])}"
        )


# The negative integers scripts return, by the names includes/fixed.lua gives them.
E_NOT_FOUND, E_LEASE_LOST, E_ORDERING, E_CANCELLED = -1, -2, -3, -4
E_LANE_FULL, E_INVALID_STATE = -5, -6
#: a schedule's compare-and-set lost: it changed since it was read (read again).
E_SCHEDULE_CHANGED = -10
#: the queue holds its most schedules already.
E_SCHEDULE_LIMIT = -11

# Negative integers returned by scripts → the exception they stand for.
SCRIPT_ERRORS: dict[int, type[EchoMQError]] = {
    E_NOT_FOUND: JobNotFound,
    E_LEASE_LOST: LeaseLost,
    E_ORDERING: OrderingMismatch,
    E_CANCELLED: JobCancelled,
    E_LANE_FULL: LaneFull,
    E_INVALID_STATE: InvalidState,
    E_SCHEDULE_LIMIT: InvalidSchedule,
}


def raise_for_code(code: int, detail: str) -> None:
    """Raise the exception a negative script return code stands for."""
    exc = SCRIPT_ERRORS.get(code)
    if exc is None:
        raise EchoMQError(f"unexpected script return code {code}: {detail}")
    raise exc(detail)


#: errors of the server's client (redis-py) that mean "the server cannot serve
#: us just now", worth trying again: it is unreachable or restarting (a dropped
#: connection; ``LOADING`` while it reads its data back is BusyLoadingError, a
#: ConnectionError), a replica during a failover (READONLY), a cluster
#: re-sharding or failing over, a socket error (builtin TimeoutError, raised by
#: asyncio.timeout, is an OSError). The worker's loops and wait() retry on them.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.SlotNotCoveredError,
    OSError,
)
