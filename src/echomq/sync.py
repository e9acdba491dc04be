"""SyncQueue: the same queue for blocking code, a thin shell over the engine."""

from __future__ import annotations

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


class SyncQueue(QueueShell[connection.SyncClient]):
    """A named queue on Valkey or Redis (blocking). Same methods as Queue, no await.

    ``client`` may be a ``redis.Redis`` or ``redis.cluster.RedisCluster``;
    ``durable=True`` makes adds wait for a replica (see echomq.replication)."""

    def client(self) -> connection.SyncClient:
        if self._client is None:
            self._client = connection.sync_client(self.url)
        return self._client

    def _send(self, call: Call[T]) -> T:
        client = self.client()
        try:
            reply = client.execute_command(*call.wire())  # type: ignore[no-untyped-call]
        except NoScriptError:  # first use on this server, or after a restart or failover
            reply = client.execute_command(*call.wire(by_sha=False))  # type: ignore[no-untyped-call]
        return call.parse(reply)

    def _send_add(self, call: Call[list[str]], durable: bool | None) -> list[str]:
        if not (self.durable if durable is None else durable):
            return self._send(call)
        reply, acked = replication.send_and_wait_sync(self.client(), call, self.durable_timeout)
        return replication.checked(call.parse(reply), acked, self.durable_timeout)

    def add(
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
        return self._send_add(self.engine.add_jobs([job]), durable)[0]

    def add_many(
        self, items: Iterable[Mapping[str, Any]], *, durable: bool | None = None
    ) -> list[str]:
        return self._send_add(self.engine.add_many(items), durable)

    def claim(self, n: int = 1, lease: float = 30.0) -> list[Job]:
        return self._send(self.engine.claim(n, lease))

    def complete(self, job: Job, result: Any = None) -> datetime | None:
        return self._send(self.engine.complete(job, result))

    def complete_many(self, items: Sequence[tuple[Job, Any]]) -> list[EchoMQError | None]:
        """Complete several jobs in one round trip: per job None when recorded, else
        the LeaseLost/JobNotFound error for that job (nothing is raised)."""
        return self._send(self.engine.complete_many(items))

    def fail(
        self,
        job: Job,
        error: str,
        traceback: str | None = None,
        *,
        retry: bool = True,
        retry_delay: float | None = None,
    ) -> State:
        return self._send(
            self.engine.fail(job, error, traceback, retry=retry, retry_delay=retry_delay)
        )

    def extend(self, job: Job, lease: float = 30.0) -> datetime | None:
        deadline = self._send(self.engine.extend(job, lease))
        job.lease_deadline = deadline
        return deadline

    def extend_many(self, jobs: Sequence[Job], lease: float = 30.0) -> list[datetime | None]:
        deadlines = self._send(self.engine.extend_many(jobs, lease))
        for job, deadline in zip(jobs, deadlines, strict=True):
            if deadline is not None:
                job.lease_deadline = deadline
        return deadlines

    def release(self, job: Job) -> None:
        self._send(self.engine.release(job))
        job.lease_token = job.lease_deadline = None
        job.state = State.WAITING

    def progress(self, job: Job, value: Any) -> None:
        self._send(self.engine.progress(job, value))
        job.progress = value

    def remove(self, job_id: str) -> bool:
        """Delete a job for good, whatever its state; True if it existed.

        A waiting or delayed job leaves its lane or the delayed set, an active
        one loses its lease (its worker's outcome is then dropped), and its
        idempotency key is released."""
        return self._send(self.engine.remove(job_id))

    def get(self, job_id: str) -> Job | None:
        return self._send(self.engine.get(job_id))

    def jobs(
        self, state: str, *, offset: int = 0, count: int = 100, group: str | None = None
    ) -> list[Job]:
        return self._send(self.engine.list_jobs(state, offset=offset, count=count, group=group))

    def dead(self, *, offset: int = 0, count: int = 100) -> list[Job]:
        return self.jobs("dead", offset=offset, count=count)

    def retry_dead(self, job_ids: Sequence[str] | None = None, limit: int = 1000) -> list[str]:
        return self._send(self.engine.retry_dead(job_ids, limit))

    def purge_dead(self, job_ids: Sequence[str] | None = None, limit: int = 1000) -> list[str]:
        return self._send(self.engine.purge_dead(job_ids, limit))

    def set_weight(self, group: str | None, weight: int) -> None:
        self._send(self.engine.set_weight(group, weight))

    def weights(self) -> dict[str | None, int]:
        return self._send(self.engine.weights())

    def lanes(self, limit: int = 1000) -> list[LaneInfo]:
        return self._send(self.engine.lanes(limit))

    def waiting_tiers(
        self, lane_limit: int = 100, tier_limit: int = 32
    ) -> dict[str | None, TierCounts]:
        return self._send(self.engine.waiting_tiers(lane_limit, tier_limit))

    def stats(self, lane_limit: int = 1000) -> QueueStats:
        return self._send(self.engine.stats(lane_limit))

    def scan_queues(self, cursor: int = 0, count: int = 1000) -> QueuePage:
        """One bounded step of a walk over every queue on this server (this one
        included): the names found and the cursor of the next step (0: done)."""
        return self._send(self.engine.scan_queues(cursor, count))

    def pause(self) -> None:
        """Stop claims from the whole queue (jobs keep their places; adds go on)."""
        self._send(self.engine.pause())

    def resume(self) -> None:
        """Serve the queue again after pause()."""
        self._send(self.engine.resume())

    def maintain(self) -> MaintenanceReport:
        return self._send(self.engine.maintain())

    def close(self) -> None:
        if self._client is not None and self._owns_client:
            self._client.close()
        self._client = None

    def __enter__(self) -> SyncQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
