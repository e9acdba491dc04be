"""The Worker: claims jobs, runs their handlers, and shuts down gracefully.

One ``run()`` is a session of four cooperating parts:

- the fetch loop (:mod:`.fetcher`): claims batches sized to the free slots
  and sleeps on the queue's doorbell when there is no work;
- one :class:`~echomq.worker.executor.Execution` per claimed job;
- the heartbeat (:mod:`.leases`): renews all in-flight leases in one call;
- maintenance (:mod:`echomq.worker.maintenance`): promote, reap, prune.

Shutdown (SIGINT/SIGTERM or ``stop()``): stop claiming, let running jobs
finish for up to ``grace`` seconds (their leases still renewed), then cancel
the rest and release their leases, so other workers can claim them at once
instead of waiting for the leases to expire. A second signal (or
``stop(immediate=True)``) skips what is left of the grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
import time
import uuid
from collections.abc import Awaitable, Iterable, Sequence
from typing import Any, TypeVar

from echomq.errors import EchoMQError, InvalidOption, JobNotFound, LeaseLost
from echomq.job import Job, running_loop
from echomq.joblogs import check_level
from echomq.options import (
    DEFAULT_CONCURRENCY,
    DEFAULT_GRACE,
    DEFAULT_LEASE,
    MAX_CLAIM,
    MAX_LEASE,
    check_int,
    check_seconds,
    check_weight,
)
from echomq.queue import Queue
from echomq.worker.completions import CompletionBatcher
from echomq.worker.executor import CANCEL_GRACE, Execution, Hook, Hooks, Runtime
from echomq.worker.fetcher import Fetcher
from echomq.worker.handlers import (
    DEFAULT_UNKNOWN_DEAD_AFTER,
    DEFAULT_UNKNOWN_DELAY,
    Handlers,
    Middleware,
    UnknownNames,
    build_specs,
    check_middleware,
)
from echomq.worker.isolation import check_not_in_job_process
from echomq.worker.leases import Heartbeat
from echomq.worker.logcapture import start_capture, stop_capture
from echomq.worker.maintenance import Maintenance
from echomq.worker.registration import Registration
from echomq.worker.relaying import RelayThread, check_relay
from echomq.worker.resilience import TRANSIENT, Pauses
from echomq.worker.slots import SlotPool
from echomq.worker.threads import DaemonThreads

T = TypeVar("T")
log = logging.getLogger("echomq.worker")

#: the longest time spent releasing unfinished jobs' leases at shutdown.
RELEASE_TIMEOUT = 5.0
#: seconds between two tries of a worker to start the embedded server it lost.
RESTART_EVERY = 2.0
#: how long a stopping worker waits for its interrupted doorbell wait to return.
INTERRUPT_TIMEOUT = 2.0
#: default maintenance period: the lease, but at most this many seconds.
MAX_DEFAULT_MAINTENANCE = 5.0


class Worker:
    """Runs the jobs of one queue, or several, with async or sync handlers (docs/worker.md).

    ``handlers`` is a list of tasks (``@q.task``) or a mapping of job names to
    callables taking a :class:`Job`; ``async def`` handlers run on the event
    loop, others on threads (or a process: a task's ``isolation``). A
    handler's return value is the job's result; an exception fails the
    attempt (retried with the task's or queue's backoff until
    ``max_attempts``, then dead, with its traceback kept; ``Retry`` and
    ``Unrecoverable`` decide otherwise). ``middleware`` wraps every handler
    call, the first listed outermost (echomq.worker.handlers.Middleware).

    A job whose name no handler here knows is released for ``unknown_delay``
    seconds (logged once per name), and dead once it is ``unknown_dead_after``
    seconds old: a worker of an older release does not kill a new job type.

    ``queue`` may be a list of queues, each with its own claims, heartbeat and
    maintenance: each is guaranteed a share of ``concurrency`` by
    ``weights`` (one int per queue, default equal; at least one slot each),
    and a queue without backlog lends its unused share (echomq.worker.slots).

    ``lease`` seconds is the lease of each claimed job, renewed every
    ``heartbeat`` seconds (default lease/3) while its handler runs;
    ``timeout`` (default none) bounds each handler; ``grace`` is how long
    shutdown waits for running jobs before releasing them;
    ``maintenance_interval`` (default min(lease, 5 s)) is how often the worker
    promotes due jobs, returns expired leases and prunes. Each finished job
    is logged in one INFO line (id, name, duration, outcome; every job-derived
    value escaped); ``log_jobs=False`` drops those of completed jobs, for high
    rates (failures are still logged).

    ``relay`` (an ``echomq.outbox.Outbox`` or ``Relay``) also runs that
    outbox's relay while the worker runs, on a thread of its own, adding to
    the first queue's server (docs/outbox.md).
    A handler's ``job.log(message)`` and its ``logging`` records at or above
    ``job_log_level`` (default INFO) go to its job's log (``q.logs``; echomq.joblogs),
    sent with the heartbeats and the outcome. The worker registers itself in
    each queue (``q.workers()``, echomq.registry) under ``id``, refreshed every
    heartbeat; each job it claims records it (``job.worker``).
    """

    def __init__(
        self,
        queue: Queue | Sequence[Queue],
        handlers: Handlers,
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        lease: float = DEFAULT_LEASE,
        timeout: float | None = None,
        grace: float = DEFAULT_GRACE,
        heartbeat: float | None = None,
        on_completed: Hook | None = None,
        on_failed: Hook | None = None,
        on_retried: Hook | None = None,
        on_dead: Hook | None = None,
        on_stalled: Hook | None = None,
        maintenance_interval: float | None = None,
        middleware: Iterable[Middleware] = (),
        unknown_delay: float = DEFAULT_UNKNOWN_DELAY,
        unknown_dead_after: float = DEFAULT_UNKNOWN_DEAD_AFTER,
        weights: Sequence[int] | None = None,
        log_jobs: bool = True,
        relay: Any = None,
        job_log_level: str | int = "INFO",
    ) -> None:
        self.queues = _check_queues(queue)
        self.queue = self.queues[0]
        self.concurrency = check_int("concurrency", concurrency, 1, MAX_CLAIM)
        self.shares = _shares(self.concurrency, self.queues, weights)
        for served in self.queues:  # every handler may call any queue at once (set_progress)
            served.ensure_connections(min(self.concurrency + OWN_CONNECTIONS, MAX_CLAIM))
        self.lease = check_seconds("lease", lease, 0.0, MAX_LEASE, open_low=True)
        self.timeout = (
            None
            if timeout is None
            else check_seconds("timeout", timeout, 0.0, MAX_LEASE, open_low=True)
        )
        self.grace = check_seconds("grace", grace, 0.0, MAX_LEASE, open_low=False)
        self.heartbeat = (
            self.lease / 3
            if heartbeat is None
            else check_seconds("heartbeat", heartbeat, 0.0, self.lease, open_low=True)
        )
        self.maintenance_interval = (
            min(self.lease, MAX_DEFAULT_MAINTENANCE)
            if maintenance_interval is None
            else check_seconds(
                "maintenance_interval", maintenance_interval, 0.0, self.lease, open_low=True
            )
        )
        self.specs = build_specs(handlers, self.timeout)
        self.handlers = {name: spec.call for name, spec in self.specs.items()}
        self.middleware = check_middleware(middleware)
        self.unknown = UnknownNames(unknown_delay, unknown_dead_after)
        self.hooks = Hooks(on_completed, on_failed, on_retried, on_dead, on_stalled)
        if not isinstance(log_jobs, bool):
            raise InvalidOption(f"log_jobs {log_jobs!r} is not a bool; allowed True or False")
        self.log_jobs = log_jobs
        self.relay = check_relay(relay)
        self.job_log_level = check_level(job_log_level)
        #: this worker's id in the workers registry and in the jobs it runs (job.worker)
        self.id = uuid.uuid4().hex[:12]
        self._sessions: list[_Session] = []
        self._stop_early: bool | None = None  # stop() before run(): None, or immediate?

    @property
    def _session(self) -> _Session | None:
        return self._sessions[0] if self._sessions else None

    @property
    def running(self) -> bool:
        return bool(self._sessions)

    @property
    def idle(self) -> bool:
        """True while the worker is blocked on the doorbell of every queue, waiting for work."""
        return bool(self._sessions) and all(s.fetcher.idle for s in self._sessions)

    @property
    def in_flight(self) -> int:
        """How many jobs this worker holds right now: running, or finished and
        being recorded (at most ``2 × concurrency``; at most ``concurrency``
        handlers run at once)."""
        return sum(len(s.executions) for s in self._sessions)

    def stop(self, *, immediate: bool = False) -> None:
        """Ask ``run()`` to stop: gracefully, or ``immediate`` (skip the grace period).

        Safe to call from any thread; before ``run()`` starts, the next run
        stops as soon as it has started.
        """
        sessions = list(self._sessions)
        if not sessions:
            self._stop_early = immediate or bool(self._stop_early)
            return
        loop = sessions[0].loop
        on_loop = running_loop() is loop
        for session in sessions:
            if on_loop:
                session.request_stop(immediate)
            else:
                loop.call_soon_threadsafe(session.request_stop, immediate)

    async def run(self, *, install_signals: bool = True) -> None:
        """Serve the queue until stopped (SIGINT/SIGTERM when ``install_signals``, or stop())."""
        if self._sessions:
            raise RuntimeError("this Worker is already running")
        check_not_in_job_process()
        loop = asyncio.get_running_loop()
        for queue in self.queues:  # connect (and maybe start the embedded server) first
            await self._connect(queue)
        self._sessions = [
            _Session(self, queue, share, loop)
            for queue, share in zip(self.queues, self.shares, strict=True)
        ]
        if self._stop_early is not None:
            for session in self._sessions:
                session.request_stop(self._stop_early)
            self._stop_early = None
        signals = self._install_signals(loop) if install_signals else []
        relaying = None if self.relay is None else RelayThread(self.relay, self.queue.url)
        if relaying is not None:
            relaying.start()
        start_capture(self.job_log_level)
        names = ", ".join(q.name for q in self.queues)
        log.info(
            "worker on queue %s: concurrency %d, lease %.1f s, handlers %s",
            names,
            self.concurrency,
            self.lease,
            ", ".join(sorted(self.handlers)),
        )
        try:
            await _serve_all(self._sessions)
        finally:
            if relaying is not None:
                await relaying.stop()
            stop_capture(self.job_log_level)
            for sig in signals:
                loop.remove_signal_handler(sig)
            self._sessions = []
        log.info("worker on queue %s stopped", names)

    async def _connect(self, queue: Queue) -> None:
        """Connect (maybe starting the embedded server) and greet the server first.

        A server that cannot be reached yet is a transient error like any later
        one: retried with capped pauses until it answers or the worker is stopped.
        """
        pauses = Pauses()
        while self._stop_early is None:
            try:
                await queue.client()
                return
            except TRANSIENT as exc:
                pause = pauses.next()
                log.warning("queue %s: %s; retrying in %.2f s", queue.name, exc, pause)
                await asyncio.sleep(pause)

    def _install_signals(self, loop: asyncio.AbstractEventLoop) -> list[int]:
        if threading.current_thread() is not threading.main_thread():
            log.debug("not in the main thread: no signal handlers installed")
            return []
        installed: list[int] = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self._on_signal, sig)
                installed.append(sig)
        return installed

    def _on_signal(self, sig: int) -> None:
        session = self._session
        again = session is not None and session.stopping.is_set()
        log.warning(
            "%s: %s",
            signal.Signals(sig).name,
            "stopping at once" if again else "stopping (send again to stop at once)",
        )
        self.stop(immediate=again)


def _check_queues(queue: Queue | Sequence[Queue]) -> list[Queue]:
    queues = [queue] if isinstance(queue, Queue) else list(queue)
    if not queues or not all(isinstance(q, Queue) for q in queues):
        raise InvalidOption("queue must be a Queue or a non-empty list of Queue objects")
    names = [q.name for q in queues]
    if len(set(names)) != len(names):
        raise InvalidOption(f"queues {names} repeat a name; give each queue once")
    return queues


#: the largest concurrency at which a completed job's call also claims the job
#: for the slot it frees (Queue.complete_and_claim: one round trip for both).
#: Above it, completions are coalesced (CompletionBatcher) and claims go apart,
#: which measured faster there (benchmarks/complete_claim.py, RESULTS.md).
COMPLETE_AND_CLAIM_UP_TO = 1

#: connections a worker uses besides its handlers' calls: the doorbell wait, claims,
#: heartbeats, completions, maintenance, the waits' subscription, a few to spare.
OWN_CONNECTIONS = 8


def _shares(concurrency: int, queues: list[Queue], weights: Sequence[int] | None) -> list[int]:
    """Each queue's slots: ``concurrency`` split by weight, at least one each."""
    if weights is None:
        weights = [1] * len(queues)
    weights = [check_weight(w) for w in weights]
    if len(weights) != len(queues):
        raise InvalidOption(f"weights: {len(weights)} given for {len(queues)} queue(s)")
    if concurrency < len(queues):
        raise InvalidOption(
            f"concurrency {concurrency} is below the number of queues ({len(queues)}): "
            "each queue needs a slot"
        )
    total = sum(weights)
    shares = [max(1, concurrency * w // total) for w in weights]
    for i in sorted(range(len(shares)), key=lambda i: -weights[i]):  # the rest, heaviest first
        if sum(shares) >= concurrency:
            break
        shares[i] += 1
    while sum(shares) > concurrency:  # the at-least-one rule overshot: take from the largest
        shares[shares.index(max(shares))] -= 1
    return shares


async def _serve_all(sessions: list[_Session]) -> None:
    """Serve every queue's session until all have stopped. One failing stops the
    others gracefully; ``run()`` cancelled cancels them all (an immediate stop)."""
    if len(sessions) == 1:
        await sessions[0].serve()
        return
    pool = SlotPool(sessions[0].worker.concurrency, sessions, sessions[0].worker.shares)
    for session in sessions:
        session.pool = pool
    tasks = [asyncio.ensure_future(s.serve()) for s in sessions]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    except asyncio.CancelledError:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
        raise
    for session in sessions:
        session.request_stop(immediate=False)
    await asyncio.wait(tasks)
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]


class _Session:
    """One queue of one call of ``Worker.run``: the jobs it holds and the loops that serve them."""

    def __init__(
        self, worker: Worker, queue: Queue, concurrency: int, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.worker = worker
        self.queue = queue
        self.concurrency = concurrency
        self.loop = loop
        self.stopping = asyncio.Event()
        self.immediate = asyncio.Event()
        self.executions: dict[str, Execution] = {}
        self.handling = 0  # executions whose handler has not finished
        self.reserved = 0  # slots the claim in flight may fill
        self.pool: SlotPool | None = None  # slots shared with other queues (Worker([q1, q2]))
        self.slot_freed = asyncio.Event()
        self.maintenance = Maintenance(queue, worker.maintenance_interval)
        self.fetcher = Fetcher(
            queue, lease=worker.lease, maintenance=self.maintenance, worker_id=worker.id
        )
        self.registration = Registration(
            queue,
            worker.id,
            queues=[q.name for q in worker.queues],
            concurrency=concurrency,
            interval=worker.heartbeat,
            running=lambda: list(self.executions),
        )
        self._short = False  # the last claim left slots free: wait for work next
        self._restarted_at = float("-inf")  # the last try to start the embedded server
        self.heartbeat = Heartbeat(
            queue, lease=worker.lease, interval=worker.heartbeat, on_lost=self._lease_lost
        )
        self.threads = DaemonThreads(keep=concurrency)
        self.completions = CompletionBatcher(queue)
        self.runtime = Runtime(
            queue,
            worker.specs,
            worker.middleware,
            worker.unknown,
            worker.lease,
            worker.hooks,
            self.heartbeat,
            self.completions,
            self.threads,
            loop,
            self._handler_done,
            worker.log_jobs,
            worker.job_log_level,
            self,
        )

    def request_stop(self, immediate: bool) -> None:
        self.stopping.set()
        if immediate:
            self.immediate.set()

    async def serve(self) -> None:
        background = [
            self.loop.create_task(self.heartbeat.run(), name="echomq-heartbeat"),
            self.loop.create_task(self.maintenance.run_periodically(), name="echomq-maintenance"),
            self.loop.create_task(self.registration.run(), name="echomq-registration"),
        ]
        try:
            await self._serve_until_stopped()
        except asyncio.CancelledError:  # run() itself was cancelled: an immediate stop
            await self._abandon(list(self.executions.values()))
            raise
        finally:
            for task in background:
                task.cancel()
            await asyncio.wait(background, timeout=CANCEL_GRACE)  # bounded, whatever they do
            await self.completions.close()
            await self.registration.leave()
            self.threads.close()

    async def _serve_until_stopped(self) -> None:
        try:
            await self._fetch_until_stopped()
        except Exception:  # not a server hiccup (those are retried): stop, but cleanly
            log.exception("queue %s: claiming failed; the worker stops", self.queue.name)
            self.request_stop(immediate=False)
            await self._drain()
            raise
        await self._drain()

    # -- fetching ------------------------------------------------------------
    async def _fetch_until_stopped(self) -> None:
        pauses = Pauses()
        while not self.stopping.is_set():
            try:
                await self._fetch_once()
                pauses.reset()
            except TRANSIENT as exc:
                if await self._restart_embedded():
                    continue
                pause = pauses.next()
                log.warning("queue %s: %s; retrying in %.2f s", self.queue.name, exc, pause)
                await _until(asyncio.sleep(pause), self.stopping)

    async def _restart_embedded(self) -> bool:
        """A worker on the embedded server starts it again when it went away (at
        most once per RESTART_EVERY seconds); True if it did. Each queue asks
        through its own connection (Queue.restart_embedded)."""
        now = time.monotonic()
        if now - self._restarted_at < RESTART_EVERY:
            return False
        self._restarted_at = now
        try:
            started = await self.queue.restart_embedded()
        except EchoMQError as exc:
            log.warning("queue %s: the embedded server cannot start: %s", self.queue.name, exc)
            return False
        if started:
            log.warning(
                "queue %s: the embedded Valkey was not running; started it again "
                "(stop the workers before `echomq server stop` to keep it stopped)",
                self.queue.name,
            )
        return started

    async def _fetch_once(self) -> None:
        # a slot is a running handler: a job whose outcome is still being
        # recorded holds none, so the next claim overlaps that round trip (at
        # most `concurrency` such jobs wait on top, so nothing piles up)
        pool = self.pool
        if pool is None:
            free = self.concurrency - self.handling
            if len(self.executions) >= 2 * self.concurrency:
                free = 0
        else:
            free = pool.free_for(self)
        if free <= 0:
            self.slot_freed.clear()
            await _until(self.slot_freed.wait(), self.stopping)
            return
        # a claim is not interrupted by a graceful stop: its jobs would be leased
        # to nobody until their leases expired
        if self._short:
            # sharing slots with other queues, an idle queue holds one in reserve
            free = free if pool is None else 1
            self.reserved = free
            try:
                jobs = await self._wait_and_claim(free)
            finally:
                self.reserved = 0
        else:
            self.reserved = free
            try:
                jobs = await _until(self.fetcher.claim(free), self.immediate)
            finally:
                self.reserved = 0
        if jobs is None:
            return
        if self.stopping.is_set():  # claimed as the stop came: give them back at once
            await asyncio.gather(*(self._release(job) for job in jobs))
            return
        for job in jobs:
            self._start(job)
        lent_before = self._short
        self._short = len(jobs) < free
        if pool is not None and self._short and not lent_before:
            pool.notify()  # this queue has no backlog: its unused slots may be borrowed

    async def _wait_and_claim(self, free: int) -> list[Job] | None:
        """The fetcher's wait; a stop rings this worker's own stop bell to end it
        (cancelling it could lose track of jobs its pipelined claim took)."""
        wait = asyncio.ensure_future(self.fetcher.wait_and_claim(free))
        stop = asyncio.ensure_future(self.stopping.wait())
        try:
            await asyncio.wait({wait, stop}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # run() itself was cancelled: nothing is left to run the jobs
            wait.cancel()
            raise
        finally:
            stop.cancel()
        if not wait.done():
            try:
                await self.fetcher.interrupt()
            except TRANSIENT as exc:
                log.warning("queue %s: could not end the wait: %s", self.queue.name, exc)
            await asyncio.wait({wait}, timeout=INTERRUPT_TIMEOUT)
            if not wait.done():  # the server does not answer: give up on the wait (a
                wait.cancel()  # job its claim took, if any, returns when its lease ends)
                return None
        return wait.result()

    def _start(self, job: Job) -> None:
        self.handling += 1
        execution = Execution(self.runtime, job)
        self.executions[job.id] = execution
        execution.task.add_done_callback(lambda task: self._finished(job.id, task))

    # -- a completion's call that claims for the slot it frees (executor.HandOver) --
    @property
    def worker_id(self) -> str:
        return self.worker.id

    def wanted(self) -> bool:
        """A completed job's call claims the job for its slot when the fetch loop
        would claim exactly that slot's job next: a lone queue at a concurrency of
        at most COMPLETE_AND_CLAIM_UP_TO, with backlog at its last claim, not
        stopping, every other slot busy."""
        return (
            self.pool is None
            and self.concurrency <= COMPLETE_AND_CLAIM_UP_TO
            and not self._short
            and not self.stopping.is_set()
            and self.handling == self.concurrency
            and self.reserved == 0
        )

    async def claimed(self, jobs: list[Job]) -> None:
        """Start the jobs a completion's call claimed (its slot is still held); a
        short claim means no backlog: the fetch loop waits on the doorbell next."""
        self.fetcher.note(jobs)
        if self.stopping.is_set():  # claimed as the stop came: give them back at once
            # (awaited by the completed job's execution, which shutdown waits for)
            await asyncio.gather(*(self._release(job) for job in jobs))
            return
        for job in jobs:
            self._start(job)
        if not jobs:
            self._short = True

    @property
    def lends(self) -> bool:
        """No backlog here (the last claim came back short): other queues of this
        worker may borrow the unused slots (echomq.worker.slots)."""
        return self._short

    def _handler_done(self) -> None:
        self.handling -= 1
        self._slot_freed()

    def _slot_freed(self) -> None:
        if self.pool is None:
            self.slot_freed.set()
        else:
            self.pool.notify()

    def _finished(self, job_id: str, task: asyncio.Task[None]) -> None:
        execution = self.executions.pop(job_id, None)
        if execution is not None:
            execution.free_slot()  # a task cancelled before its handler began
        self._slot_freed()
        if not task.cancelled() and task.exception() is not None:
            log.error("job %s: unexpected error in the worker", job_id, exc_info=task.exception())

    def _lease_lost(self, job: Job) -> None:
        execution = self.executions.get(job.id)
        if execution is not None:
            execution.lose_lease()

    # -- shutting down -------------------------------------------------------
    async def _drain(self) -> None:
        tasks = [e.task for e in self.executions.values()]
        if tasks and not self.immediate.is_set():
            log.info("waiting up to %.1f s for %d running job(s)", self.worker.grace, len(tasks))
            await _until(asyncio.wait(tasks, timeout=self.worker.grace), self.immediate)
        await self._abandon([e for e in self.executions.values() if not e.task.done()])

    async def _abandon(self, left: list[Execution]) -> None:
        """Cancel unfinished jobs and release their leases: claimable again at once."""
        if not left:
            return
        log.warning(
            "releasing %d unfinished job(s): %s", len(left), ", ".join(e.job.id for e in left)
        )
        for execution in left:
            execution.abandon()
        releasing = asyncio.ensure_future(asyncio.gather(*(self._release(e.job) for e in left)))
        _, late = await asyncio.wait({releasing}, timeout=RELEASE_TIMEOUT)
        if late:
            releasing.cancel()
            log.warning("releasing timed out; those jobs return when their leases expire")
        await asyncio.wait([e.task for e in left], timeout=CANCEL_GRACE)

    async def _release(self, job: Job) -> None:
        try:
            await self.queue.release(job)
        except (LeaseLost, JobNotFound):
            pass  # finished, expired or removed meanwhile: nothing to give back
        except TRANSIENT as exc:
            log.warning("job %s not released (%s): it returns when its lease expires", job.id, exc)


async def _until(aw: Awaitable[T], event: asyncio.Event) -> T | None:
    """Await ``aw`` unless ``event`` is set first (then cancel it and return None)."""
    task = asyncio.ensure_future(aw)
    if event.is_set():
        task.cancel()
    else:
        waiter = asyncio.ensure_future(event.wait())
        try:
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            if not task.done():
                task.cancel()
    try:
        return await task
    except asyncio.CancelledError:
        if task.cancelled() and event.is_set():
            return None
        raise
