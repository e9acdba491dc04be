"""The asyncio Queue: a thin shell that sends the engine's calls."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from redis.exceptions import NoScriptError

from echomq import connection, replication
from echomq.engine import (
    Call,
    LaneInfo,
    MaintenanceReport,
    QueuePage,
    QueueStats,
    TierCounts,
)
from echomq.errors import EchoMQError
from echomq.job import Job, State
from echomq.shell import QueueShell

T = TypeVar("T")


class Queue(QueueShell[connection.AsyncClient]):
    """A named queue on Valkey or Redis (asyncio).

    ``url=None`` uses ``ECHOMQ_URL``, else the embedded Valkey. Pass ``client``
    to share an existing ``redis.asyncio`` client or cluster client
    (``decode_responses=True``). ``durable=True`` makes every add return only
    once a replica acknowledged it (``WAIT 1``, see echomq.replication).
    """

    async def client(self) -> connection.AsyncClient:
        """The redis client, connecting (and starting the embedded server) on first use."""
        if self._client is None:
            made = await asyncio.to_thread(connection.async_client, self.url)
            if self._client is None:
                self._client = made
            else:  # another task's first use won the race; keep one pool
                await made.aclose()
        return self._client

    async def _send(self, call: Call[T]) -> T:
        client = await self.client()
        try:
            reply = await client.execute_command(*call.wire())
        except NoScriptError:  # first use on this server, or after a restart or failover
            reply = await client.execute_command(*call.wire(by_sha=False))
        return call.parse(reply)

    async def _send_add(self, call: Call[list[str]], durable: bool | None) -> list[str]:
        """Send an add; a durable one also waits for a replica (NotReplicated if none acked)."""
        if not (self.durable if durable is None else durable):
            return await self._send(call)
        client = await self.client()
        reply, acked = await replication.send_and_wait(client, call, self.durable_timeout)
        return replication.checked(call.parse(reply), acked, self.durable_timeout)

    async def add(
        self,
        name: str,
        data: Any = None,
        *,
        priority: int = 0,
        group: str | None = None,
        delay: float | None = None,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        key: str | None = None,
        durable: bool | None = None,
    ) -> str:
        """Add one job; returns its id (or the id of the live job holding ``key``).

        ``durable`` (default: the queue's) waits for a replica before returning."""
        job = self.engine.new_job(
            name,
            data,
            priority=priority,
            group=group,
            delay=delay,
            run_at=run_at,
            max_attempts=max_attempts,
            key=key,
        )
        return (await self._send_add(self.engine.add_jobs([job]), durable))[0]

    async def add_many(
        self, items: Iterable[Mapping[str, Any]], *, durable: bool | None = None
    ) -> list[str]:
        """Add many jobs in one round trip; each item has ``name`` and add's keywords."""
        return await self._send_add(self.engine.add_many(items), durable)

    async def claim(self, n: int = 1, lease: float = 30.0) -> list[Job]:
        """Lease up to ``n`` jobs in rotation order; never blocks, may return []."""
        return await self._send(self.engine.claim(n, lease))

    async def complete(self, job: Job, result: Any = None) -> datetime | None:
        """Record the result; raises LeaseLost if this caller no longer holds the lease."""
        return await self._send(self.engine.complete(job, result))

    async def complete_many(self, items: Sequence[tuple[Job, Any]]) -> list[EchoMQError | None]:
        """Complete several jobs in one round trip: per job None when recorded, else
        the LeaseLost/JobNotFound error for that job (nothing is raised)."""
        return await self._send(self.engine.complete_many(items))

    async def fail(
        self,
        job: Job,
        error: str,
        traceback: str | None = None,
        *,
        retry: bool = True,
        retry_delay: float | None = None,
    ) -> State:
        """Record a failed attempt; returns FAILED (retry scheduled) or DEAD."""
        return await self._send(
            self.engine.fail(job, error, traceback, retry=retry, retry_delay=retry_delay)
        )

    async def extend(self, job: Job, lease: float = 30.0) -> datetime | None:
        """Renew the lease for ``lease`` seconds from now; returns the new deadline."""
        deadline = await self._send(self.engine.extend(job, lease))
        job.lease_deadline = deadline
        return deadline

    async def extend_many(self, jobs: Sequence[Job], lease: float = 30.0) -> list[datetime | None]:
        """Renew several leases in one round trip; per job the new deadline, None if lost."""
        deadlines = await self._send(self.engine.extend_many(jobs, lease))
        for job, deadline in zip(jobs, deadlines, strict=True):
            if deadline is not None:
                job.lease_deadline = deadline
        return deadlines

    async def release(self, job: Job) -> None:
        """Give a claimed job back unfinished: waiting again at once, at its old place,
        with no stall and no attempt counted (LeaseLost if no longer the holder)."""
        await self._send(self.engine.release(job))
        job.lease_token = job.lease_deadline = None
        job.state = State.WAITING

    async def progress(self, job: Job, value: Any) -> None:
        """Store a running job's progress (JSON); get() returns it as Job.progress."""
        await self._send(self.engine.progress(job, value))
        job.progress = value

    async def remove(self, job_id: str) -> bool:
        """Delete a job for good, whatever its state; True if it existed.

        A waiting or delayed job leaves its lane or the delayed set, an active
        one loses its lease (its worker's outcome is then dropped), and its
        idempotency key is released."""
        return await self._send(self.engine.remove(job_id))

    async def get(self, job_id: str) -> Job | None:
        return await self._send(self.engine.get(job_id))

    async def jobs(
        self, state: str, *, offset: int = 0, count: int = 100, group: str | None = None
    ) -> list[Job]:
        """A page of jobs in one state (``waiting`` lists one lane in claim order)."""
        return await self._send(
            self.engine.list_jobs(state, offset=offset, count=count, group=group)
        )

    async def dead(self, *, offset: int = 0, count: int = 100) -> list[Job]:
        """Dead jobs, newest first, with their last error."""
        return await self.jobs("dead", offset=offset, count=count)

    async def retry_dead(
        self, job_ids: Sequence[str] | None = None, limit: int = 1000
    ) -> list[str]:
        """Move dead jobs (given ids, else the oldest ``limit``) back to waiting."""
        return await self._send(self.engine.retry_dead(job_ids, limit))

    async def purge_dead(
        self, job_ids: Sequence[str] | None = None, limit: int = 1000
    ) -> list[str]:
        """Delete dead jobs for good (given ids, else the oldest ``limit``); returns their ids."""
        return await self._send(self.engine.purge_dead(job_ids, limit))

    async def set_weight(self, group: str | None, weight: int) -> None:
        await self._send(self.engine.set_weight(group, weight))

    async def weights(self) -> dict[str | None, int]:
        return await self._send(self.engine.weights())

    async def lanes(self, limit: int = 1000) -> list[LaneInfo]:
        return await self._send(self.engine.lanes(limit))

    async def waiting_tiers(
        self, lane_limit: int = 100, tier_limit: int = 32
    ) -> dict[str | None, TierCounts]:
        """Waiting jobs per lane and tier (read-only, one round trip)."""
        return await self._send(self.engine.waiting_tiers(lane_limit, tier_limit))

    async def stats(self, lane_limit: int = 1000) -> QueueStats:
        return await self._send(self.engine.stats(lane_limit))

    async def scan_queues(self, cursor: int = 0, count: int = 1000) -> QueuePage:
        """One bounded step of a walk over every queue on this server (this one
        included): the names found and the cursor of the next step (0: done)."""
        return await self._send(self.engine.scan_queues(cursor, count))

    async def pause(self) -> None:
        """Stop claims from the whole queue (jobs keep their places; adds go on)."""
        await self._send(self.engine.pause())

    async def resume(self) -> None:
        """Serve the queue again after pause()."""
        await self._send(self.engine.resume())

    async def maintain(self) -> MaintenanceReport:
        """Promote due jobs, return expired leases, prune finished jobs."""
        return await self._send(self.engine.maintain())

    async def close(self) -> None:
        if self._client is not None and self._owns_client:
            await self._client.aclose()
        self._client = None

    async def __aenter__(self) -> Queue:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
