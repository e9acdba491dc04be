"""SyncQueue: the same queue for blocking code, engine calls handed to the sending layer."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any, ParamSpec, TypeVar, Unpack, overload

from echomq.batches import SyncBatch
from echomq.call import Call
from echomq.connection import SyncClient
from echomq.engine import Claimed, CompletedAndClaimed, Engine
from echomq.engine.batches import DONE_WAIT
from echomq.errors import WaitTimeout
from echomq.events import Event
from echomq.flows.events import follow
from echomq.flows.waiters import SyncWaits
from echomq.job import Job
from echomq.options import DEFAULT_LEASE
from echomq.sending import SyncSender
from echomq.shell import QueueShell, sends, sends_steps
from echomq.tags import JobPage
from echomq.tasks import SyncTask, TaskSettings, task_options

P = ParamSpec("P")
R = TypeVar("R")


class SyncQueue(QueueShell[SyncSender]):
    """A named queue on Valkey or Redis (blocking). Same methods as Queue, no await.

    ``client`` may be a ``redis.Redis`` or ``redis.cluster.RedisCluster``;
    ``durable=True`` makes adds wait for a replica (see echomq.sending.durable)."""

    def _make_sender(self, url: str | None, client: Any, greeting: Call[Any]) -> SyncSender:
        sender = SyncSender(url, client, greeting, self.max_connections)
        self._waits = SyncWaits(sender, self.engine.keys.done_channel)
        return sender

    def client(self) -> SyncClient:
        """The redis client, connecting (and starting the embedded server) on first use."""
        return self.sender.client()

    add = sends(Engine.add)
    add_many = sends(Engine.add_many)

    def claim(
        self, n: int = 1, lease: float = DEFAULT_LEASE, *, worker: str | None = None
    ) -> Claimed:
        """Lease up to ``n`` waiting jobs for ``lease`` seconds (Engine.claim); each
        knows this queue (``job.queue``)."""
        jobs = self.sender.send(self.engine.claim(n, lease, worker=worker))
        for job in jobs:
            job._queue = self
        return jobs

    def complete_and_claim(
        self,
        items: Sequence[tuple[Job, Any]],
        n: int = 1,
        lease: float = DEFAULT_LEASE,
        *,
        worker: str | None = None,
        encoded: bool = False,
    ) -> CompletedAndClaimed:
        """Complete jobs and claim up to ``n`` more in one call (Engine.complete_and_claim);
        each claimed job knows this queue."""
        call = self.engine.complete_and_claim(items, n, lease, worker=worker, encoded=encoded)
        done = self.sender.send(call)
        for job in done.claimed:
            job._queue = self
        return done

    complete = sends(Engine.complete)
    complete_many = sends(Engine.complete_many)
    fail = sends(Engine.fail)
    extend = sends(Engine.extend)
    extend_many = sends(Engine.extend_many)
    release = sends(Engine.release)
    progress = sends(Engine.progress)
    remove = sends(Engine.remove)
    get = sends(Engine.get)
    peek = sends(Engine.peek)
    read_field = sends(Engine.read_field)

    @overload
    def jobs(
        self,
        state: str,
        *,
        offset: int = 0,
        count: int = 100,
        group: str | None = None,
        summary: bool = False,
        cursor: None = None,
    ) -> list[Job]: ...
    @overload
    def jobs(
        self,
        state: str,
        *,
        offset: int = 0,
        count: int = 100,
        group: str | None = None,
        summary: bool = False,
        cursor: str,
    ) -> JobPage: ...
    def jobs(self, state: str, **options: Any) -> list[Job] | JobPage:
        """A page of jobs in one state: see Engine.jobs (a ``cursor`` gives a JobPage)."""
        page: list[Job] | JobPage = self.sender.send(self.engine.jobs(state, **options))
        return page

    find = sends(Engine.find)
    names = sends(Engine.names)
    job_events = sends(Engine.job_events)
    dead = sends(Engine.dead)
    retry_dead = sends_steps(Engine.retry_dead)
    purge_dead = sends(Engine.purge_dead)
    set_weight = sends(Engine.set_weight)
    set_lane = sends(Engine.set_lane)
    throttle = sends(Engine.throttle)
    change = sends(Engine.change)
    weights = sends(Engine.weights)
    lanes = sends_steps(Engine.lanes)
    waiting_tiers = sends(Engine.waiting_tiers)
    position = sends(Engine.position)
    stats = sends_steps(Engine.stats)
    pause = sends(Engine.pause)
    resume = sends(Engine.resume)
    maintain = sends_steps(Engine.maintain)
    schedule = sends_steps(Engine.schedule)
    schedules = sends(Engine.schedules)
    unschedule = sends(Engine.unschedule)
    pause_schedule = sends(Engine.pause_schedule)
    resume_schedule = sends_steps(Engine.resume_schedule)
    exists = sends(Engine.exists)
    cancel = sends(Engine.cancel)
    dependency_results = sends(Engine.dependency_results)
    dependents = sends(Engine.dependents)
    read_events = sends(Engine.read_events)
    logs = sends(Engine.logs)
    workers = sends(Engine.workers)
    worker_beat = sends(Engine.worker_beat)
    metrics = sends(Engine.metrics)
    oldest_waiting = sends(Engine.oldest_waiting)

    def events(self, after: str | None = None) -> Iterator[Event]:
        """The queue's events as they happen (a blocking iterator): from now on, or
        after event id ``after`` (see Queue.events)."""
        return follow(self.sender, self.engine, after)

    def batch(
        self, *, on_success: Any = None, on_complete: Any = None, on_death: Any = None
    ) -> SyncBatch:
        """A new, open batch (see Queue.batch): ``with sq.batch(...) as b:`` closes it
        on exit."""
        return SyncBatch(
            self,
            self.create_batch(on_success=on_success, on_complete=on_complete, on_death=on_death),
        )

    create_batch = sends(Engine.create_batch)
    close_batch = sends(Engine.close_batch)
    batch_status = sends(Engine.batch_status)
    peek_batch = sends(Engine.peek_batch)
    batches = sends(Engine.batches)
    cancel_batch = sends_steps(Engine.cancel_batch)

    def as_completed(self, batch_id: str, after: int = 0) -> Iterator[Job]:
        """Each child of the batch as it finishes (see Queue.as_completed); blocks."""
        self.engine.batch_done(batch_id, after)  # checks the input before anything is sent
        place = after
        while True:
            try:
                page = self._waits.wait(
                    batch_id, DONE_WAIT, partial(self.engine.batch_done, batch_id, place)
                )
            except WaitTimeout:
                continue  # nothing finished for a while: register again
            if not page:
                return
            for item in page:
                place = item.place
                yield item.job

    configure = sends(Engine.configure)
    settings = sends(Engine.settings)

    def wait(self, job_id: str, timeout: float = 30.0) -> Job:
        """The job as soon as it is completed or dead (see Queue.wait); blocks the
        calling thread. The waits of every thread share one subscription."""
        self.engine.watch(job_id, timeout)  # checks the input before anything is sent
        return self._waits.wait(job_id, timeout, lambda left: self.engine.watch(job_id, left))

    @overload
    def task(self, fn: Callable[P, R], /) -> SyncTask[P, R]: ...
    @overload
    def task(
        self, /, **settings: Unpack[TaskSettings]
    ) -> Callable[[Callable[P, R]], SyncTask[P, R]]: ...
    def task(self, fn: Any = None, /, **settings: Unpack[TaskSettings]) -> Any:
        """Make ``fn`` a task of this queue (``@q.task`` or ``@q.task(name=…, …)``;
        see echomq.tasks): callable as before, enqueued with ``t.enqueue(...)``."""
        if fn is None:
            return lambda f: SyncTask(self, f, task_options(f, settings))
        return SyncTask(self, fn, task_options(fn, settings))

    def drop(self) -> None:
        """Delete every key of this queue, a page per call (not atomic: stop its
        producers and workers first)."""
        cursor = self.sender.send(self.engine.drop_page(0))
        while cursor:
            cursor = self.sender.send(self.engine.drop_page(cursor))

    def close(self) -> None:
        self._waits.close()
        self.sender.close()

    def __enter__(self) -> SyncQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
