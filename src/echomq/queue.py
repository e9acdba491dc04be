"""The asyncio Queue: engine calls handed to the sending layer, nothing more."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, Unpack, cast, overload

from echomq.batches import BatchStart
from echomq.call import Call
from echomq.connection import AsyncClient, check_max_connections
from echomq.engine import AddOptions, Claimed, CompletedAndClaimed, Engine, JobOptions, NewJob, Wake
from echomq.engine.batches import DONE_WAIT
from echomq.errors import EchoMQError, WaitTimeout
from echomq.events import Event
from echomq.flows.coalescing import AddCoalescer
from echomq.flows.events import follow_async, pages_async
from echomq.flows.waiters import AsyncWaits
from echomq.job import Job
from echomq.options import DEFAULT_LEASE
from echomq.sending import AsyncSender
from echomq.shell import QueueShell, sends_async, sends_steps_async
from echomq.tags import JobPage
from echomq.tasks import Task, TaskSettings, task_options
from echomq.urls import restart_embedded

if TYPE_CHECKING:
    from echomq.sync import SyncQueue

P = ParamSpec("P")
R = TypeVar("R")


class Queue(QueueShell[AsyncSender]):
    """A named queue on Valkey or Redis (asyncio).

    ``url=None`` uses ``ECHOMQ_URL``, else the embedded Valkey. Pass ``client``
    to share an existing ``redis.asyncio`` client or cluster client
    (``decode_responses=True``). ``durable=True`` makes every add return only
    once a replica acknowledged it (``WAIT 1``, see echomq.sending.durable).
    Each method's documentation is the engine method's it sends.
    """

    def _make_sender(self, url: str | None, client: Any, greeting: Call[Any]) -> AsyncSender:
        self._adds = AddCoalescer(self._add_batch)
        self._shared_client = client is not None
        self._blocking: SyncQueue | None = None
        sender = AsyncSender(url, client, greeting, self.max_connections)
        self._waits = AsyncWaits(sender, self.engine.keys.done_channel)
        return sender

    async def client(self) -> AsyncClient:
        """The redis client, connecting (and starting the embedded server) on first use."""
        return await self.sender.client()

    def ensure_connections(self, count: int) -> None:
        """Let this queue hold at least ``count`` connections at once (its
        ``max_connections`` grows to it, never shrinks): a worker asks for its
        concurrency plus its own few, so handlers that call the queue never wait
        for a connection. Not for a Queue given ``client=``."""
        self.sender.ensure_connections(check_max_connections(count))
        self.max_connections = self.sender.max_connections

    async def add(self, name: str, data: Any = None, **options: Unpack[AddOptions]) -> str:
        """Add one job; returns its id (or the id of the live job holding ``key``).

        ``durable`` (default: the queue's) waits for a replica before returning.
        Adds issued while another add is in flight share one call, each with
        its own outcome (echomq.flows.coalescing)."""
        durable = options.pop("durable", None)
        job = self.engine.new_job(name, data, **cast(JobOptions, options))
        # alone: a bad dependency or a closed batch refuses only it
        if options.get("depends_on") is not None or options.get("batch") is not None:
            return (await self._add_batch([job], durable))[0]
        return await self._adds.submit(job, durable)

    async def _add_batch(self, jobs: Sequence[NewJob], durable: bool | None) -> list[str]:
        return await self.sender.send(self.engine.add_jobs(jobs, durable=durable))

    add_many = sends_async(Engine.add_many)

    async def claim(
        self, n: int = 1, lease: float = DEFAULT_LEASE, *, worker: str | None = None
    ) -> Claimed:
        """Lease up to ``n`` waiting jobs for ``lease`` seconds (Engine.claim); each
        knows this queue (``job.queue``)."""
        return self._own(await self.sender.send(self.engine.claim(n, lease, worker=worker)))

    async def complete_and_claim(
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
        done = await self.sender.send(call)
        self._own(done.claimed)
        return done

    def _own(self, jobs: Claimed) -> Claimed:
        loop = asyncio.get_running_loop()
        for job in jobs:
            job._queue, job._loop = self, loop
        return jobs

    def blocking(self) -> SyncQueue:
        """A :class:`~echomq.SyncQueue` of this queue (same name, server and
        options), made on first use and closed with this queue: how blocking code
        reaches it (``task.enqueue_sync``). Not for a Queue given ``client=``."""
        if self._blocking is None:
            from echomq.sync import SyncQueue

            if self._shared_client:
                raise EchoMQError(
                    f"queue {self.name!r} was given a client: blocking code needs a "
                    "SyncQueue of its own (or a Queue made with a url)"
                )
            self._blocking = SyncQueue(
                self.name,
                self.url,
                durable=self.durable,
                durable_timeout=self.durable_timeout,
                max_connections=self.max_connections,
                **self.options.settings(),
            )
        return self._blocking

    complete = sends_async(Engine.complete)
    complete_many = sends_async(Engine.complete_many)
    fail = sends_async(Engine.fail)
    extend = sends_async(Engine.extend)
    extend_many = sends_async(Engine.extend_many)
    release = sends_async(Engine.release)
    progress = sends_async(Engine.progress)
    remove = sends_async(Engine.remove)
    get = sends_async(Engine.get)
    peek = sends_async(Engine.peek)
    read_field = sends_async(Engine.read_field)

    @overload
    async def jobs(
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
    async def jobs(
        self,
        state: str,
        *,
        offset: int = 0,
        count: int = 100,
        group: str | None = None,
        summary: bool = False,
        cursor: str,
    ) -> JobPage: ...
    async def jobs(self, state: str, **options: Any) -> list[Job] | JobPage:
        """A page of jobs in one state: see Engine.jobs (a ``cursor`` gives a JobPage)."""
        page: list[Job] | JobPage = await self.sender.send(self.engine.jobs(state, **options))
        return page

    find = sends_async(Engine.find)
    names = sends_async(Engine.names)
    job_events = sends_async(Engine.job_events)
    dead = sends_async(Engine.dead)
    retry_dead = sends_steps_async(Engine.retry_dead)
    purge_dead = sends_async(Engine.purge_dead)
    set_weight = sends_async(Engine.set_weight)
    set_lane = sends_async(Engine.set_lane)
    throttle = sends_async(Engine.throttle)
    change = sends_async(Engine.change)
    weights = sends_async(Engine.weights)
    lanes = sends_steps_async(Engine.lanes)
    waiting_tiers = sends_async(Engine.waiting_tiers)
    position = sends_async(Engine.position)
    stats = sends_steps_async(Engine.stats)
    pause = sends_async(Engine.pause)
    resume = sends_async(Engine.resume)
    maintain = sends_steps_async(Engine.maintain)
    schedule = sends_steps_async(Engine.schedule)
    schedules = sends_async(Engine.schedules)
    unschedule = sends_async(Engine.unschedule)
    pause_schedule = sends_async(Engine.pause_schedule)
    resume_schedule = sends_steps_async(Engine.resume_schedule)
    exists = sends_async(Engine.exists)
    ring = sends_async(Engine.ring)
    ring_stop_bell = sends_async(Engine.ring_stop_bell)
    cancel = sends_async(Engine.cancel)
    dependency_results = sends_async(Engine.dependency_results)
    dependents = sends_async(Engine.dependents)
    read_events = sends_async(Engine.read_events)
    logs = sends_async(Engine.logs)
    workers = sends_async(Engine.workers)
    worker_beat = sends_async(Engine.worker_beat)
    metrics = sends_async(Engine.metrics)
    oldest_waiting = sends_async(Engine.oldest_waiting)

    def events(self, after: str | None = None) -> AsyncIterator[Event]:
        """The queue's events as they happen (``async for event in q.events()``):
        from now on, or after event id ``after`` (exclusive; an id already
        trimmed resumes at the oldest retained event, after an Event of kind
        ``missed``). See echomq.events and docs/lifecycle.md."""
        return follow_async(self.sender, self.engine, after)

    def event_pages(self, after: str | None = None) -> AsyncIterator[list[Event]]:
        """The queue's events a read at a time (see ``events``): each list is one
        read's events, an empty one each time a few seconds passed with nothing
        new (the dashboard's live stream sends those as keep-alives)."""
        return pages_async(self.sender, self.engine, after)

    def batch(
        self, *, on_success: Any = None, on_complete: Any = None, on_death: Any = None
    ) -> BatchStart:
        """A new batch (echomq.batches): ``b = await q.batch(...)`` or ``async with
        q.batch(...) as b:`` (closed on exit). Each callback is a job spec (a dict
        with name, data and add's options priority, group, delay, max_attempts,
        headers; or ``task.prepare(...)``), checked now: InvalidOption."""
        call = self.engine.create_batch(
            on_success=on_success, on_complete=on_complete, on_death=on_death
        )
        return BatchStart(self, call)

    create_batch = sends_async(Engine.create_batch)
    close_batch = sends_async(Engine.close_batch)
    batch_status = sends_async(Engine.batch_status)
    peek_batch = sends_async(Engine.peek_batch)
    batches = sends_async(Engine.batches)
    cancel_batch = sends_steps_async(Engine.cancel_batch)

    async def as_completed(self, batch_id: str, after: int = 0) -> AsyncIterator[Job]:
        """Each child of the batch as it finishes (completed or dead), once, in the
        order they finished, pushed by the server (one subscription per event loop,
        as ``wait``); ends when the batch is closed (or cancelled) and every child
        has finished. ``after=k`` resumes after the first k children it gave."""
        self.engine.batch_done(batch_id, after)  # checks the input before anything is sent
        place = after
        while True:
            try:
                page = await self._waits.wait(
                    batch_id, DONE_WAIT, partial(self.engine.batch_done, batch_id, place)
                )
            except WaitTimeout:
                continue  # nothing finished for a while: register again
            if not page:
                return
            for item in page:
                place = item.place
                yield item.job

    configure = sends_async(Engine.configure)
    settings = sends_async(Engine.settings)

    async def wait(self, job_id: str, timeout: float = 30.0) -> Job:
        """The job as soon as it is completed or dead (at once if it already is),
        woken by the server, not by polling (echomq.flows.waiters). Raises
        WaitTimeout (also a TimeoutError) after ``timeout`` seconds, JobNotFound
        for an unknown id or a job deleted while waited on. Concurrent waits of
        one event loop share one subscription connection. A job it waited on
        stays readable for 10 s after it finished, whatever the retention
        (docs/lifecycle.md, "Waiting for a job")."""
        self.engine.watch(job_id, timeout)  # checks the input before anything is sent
        return await self._waits.wait(job_id, timeout, lambda left: self.engine.watch(job_id, left))

    @overload
    def task(self, fn: Callable[P, R], /) -> Task[P, R]: ...
    @overload
    def task(
        self, /, **settings: Unpack[TaskSettings]
    ) -> Callable[[Callable[P, R]], Task[P, R]]: ...
    def task(self, fn: Any = None, /, **settings: Unpack[TaskSettings]) -> Any:
        """Make ``fn`` a task of this queue (``@q.task`` or ``@q.task(name=…, …)``;
        see echomq.tasks): callable as before, enqueued with ``await t.enqueue(...)``."""
        if fn is None:
            return lambda f: Task(self, f, task_options(f, settings))
        return Task(self, fn, task_options(fn, settings))

    async def wait_and_claim(
        self, worker_id: str, timeout: float, n: int, lease: float
    ) -> tuple[Wake, Claimed]:
        """Block up to ``timeout`` seconds on the doorbell and worker ``worker_id``'s
        stop bell, then claim up to ``n`` jobs for that worker (one round trip on a
        single server):
        what woke the wait (None: the timeout), and the claimed jobs (with
        ``retry_in`` when none could be claimed yet: engine.Claimed)."""
        await self.client()
        wait = self.engine.wait_for_ring(worker_id, timeout, self.sender.longest_block())
        claim = self.engine.claim(n, lease, worker=worker_id)
        woke, jobs = await self.sender.send_after(wait, claim)
        return woke, self._own(jobs)

    @property
    def eviction_policy(self) -> str | None:
        """The server's maxmemory-policy when it may evict keys (None: it may not, or
        this queue has not connected yet): read once, at the first connect, which
        logs a warning then (the dashboard shows it)."""
        return self.sender.eviction_policy

    async def restart_embedded(self) -> bool:
        """Start the embedded server again if this queue uses it (made without a
        ``client``, its url unset or the embedded socket) and it is not running;
        True if it was started (the worker's way back after ``echomq server
        stop`` or a reboot). Blocks a thread up to the start timeout; ServerError
        if it cannot start."""
        if not self.sender.owns_client:
            return False
        return await asyncio.to_thread(restart_embedded, self.url)

    async def drop(self) -> None:
        """Delete every key of this queue, a page per call (not atomic: stop its
        producers and workers first). The demo drops its private queue this way."""
        cursor = await self.sender.send(self.engine.drop_page(0))
        while cursor:
            cursor = await self.sender.send(self.engine.drop_page(cursor))

    async def close(self) -> None:
        if self._blocking is not None:
            self._blocking.close()
        await self._waits.close()
        await self.sender.close()

    async def __aenter__(self) -> Queue:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
