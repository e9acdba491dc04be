"""``wait()``: woken by the server, with one subscription per queue and event loop.

A script that makes a waited-on job final (completed, dead) or deletes it
publishes the job's id on the queue's done channel (``QueueKeys.done_channel``,
includes/retention.lua "Waiters"). The channel is a shard channel (SSUBSCRIBE,
Redis 7+ / Valkey 7+): it carries the queue's hash tag, so on a cluster the
message stays on the queue's shard and the subscription follows the slot.

:class:`AsyncWaits` keeps ONE subscription connection per Queue and event
loop, shared by every concurrent wait of that loop: a web server with 1,000
waits holds one subscription, and at most MAX_WATCHING register calls at once
(so the client's pool does not grow with the number of waits). A wait:

1. makes sure the loop's subscription is confirmed by the server;
2. sends the register call (``Engine.watch``, wait.lua), which answers the
   job at once if it is final, else records the wait on the server. As the
   subscription came first, a final transition after the register call is
   always heard; one before it is answered by the call itself;
3. sleeps until its job's id arrives, then sends the register call again
   (which now returns the job, or JobNotFound if it was deleted).

A wait therefore costs a fixed number of server calls however long it
lasts: no polling. A wait rides out a server restart or a dropped connection
until its own timeout: a register call that meets one
(``errors.TRANSIENT_ERRORS``: refused, reset, ``LOADING``…) is sent again
after a pause (REGISTER_PAUSE doubling up to REGISTER_PAUSE_CAP), and the
wait ends with WaitTimeout, not the server's error, if its time runs out first.
If the subscription's connection drops, messages may have been lost: once
it is subscribed again, every wait of the loop reads its job again. State
is per event loop (like the sender's client and the add batcher), so a
Queue can wait from one ``asyncio.run`` after another; a
loop's subscription is closed when that loop shuts down or by ``close()``.

:class:`SyncWaits` is the same for blocking code: one subscription per
SyncQueue, read by one daemon thread, shared by the waits of every thread
(a threaded web server's waits hold one connection too).
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from echomq.call import Call
from echomq.errors import TRANSIENT_ERRORS, WaitTimeout
from echomq.sending.sender import AsyncSender, SyncSender
from echomq.sending.subscriptions import AsyncShardSubscription, SyncShardSubscription

#: most register calls one loop's waits send at once (bounds the client's pool).
MAX_WATCHING = 16
#: seconds one read of the subscription blocks before it looks again (client-side only).
LISTEN_BLOCK = 5.0
#: the same for the blocking listener thread, which also looks for close() this often.
SYNC_LISTEN_BLOCK = 0.5
#: a listener being stopped is cancelled up to STOP_TRIES times, STOP_PAUSE seconds apart.
STOP_TRIES = 20
STOP_PAUSE = 0.1
#: seconds before subscribing again after the subscription's connection failed.
RESUBSCRIBE_PAUSE = 0.25

#: first pause before a register call that met a transient error is sent again
#: (seconds; doubling after each failure up to REGISTER_PAUSE_CAP).
REGISTER_PAUSE = 0.05
REGISTER_PAUSE_CAP = 1.0

#: builds the register call for the seconds left of a wait: its reply is what the
#: wait returns, or None (registered: sleep until the id is published). The id
#: is a job's (wait) or a batch's (as_completed).
W = TypeVar("W")
Watch = Callable[[float], Call[W | None]]


@dataclass(slots=True)
class _LoopWaits:
    """One event loop's subscription and the waits it serves (job id → their events)."""

    waiters: dict[str, set[asyncio.Event]] = field(default_factory=dict)
    subscribed: asyncio.Event = field(default_factory=asyncio.Event)
    gate: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(MAX_WATCHING))
    subscription: AsyncShardSubscription | None = None
    listener: asyncio.Task[None] | None = None
    closer: AsyncGenerator[None, None] | None = None


class AsyncWaits:
    """The waits of one asyncio Queue: ``await wait(job_id, timeout, watch)``."""

    def __init__(self, sender: AsyncSender, channel: str) -> None:
        self._sender = sender
        self._channel = channel
        self._states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopWaits] = (
            weakref.WeakKeyDictionary()
        )

    async def wait(self, job_id: str, timeout: float, watch: Watch[W]) -> W:
        """The job once it is completed or dead; WaitTimeout after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout  # the clock of asyncio's loop
        state = await self._state(asyncio.get_running_loop())
        event = asyncio.Event()
        state.waiters.setdefault(job_id, set()).add(event)
        try:
            subscribed = await _woken_async(state.subscribed, deadline)
            return await _registered_async(
                self._sender,
                state.gate,
                watch,
                _Waiting(job_id, timeout, deadline),
                event,
                subscribed,
            )
        finally:
            _forget(state.waiters, job_id, event)

    async def _state(self, loop: asyncio.AbstractEventLoop) -> _LoopWaits:
        state = self._states.get(loop)
        if state is None:
            state = self._states[loop] = _LoopWaits()
            state.listener = loop.create_task(self._listen(state), name="echomq-waits")
            state.closer = self._close_with_loop(state)
            await anext(state.closer)
        return state

    async def _listen(self, state: _LoopWaits) -> None:
        """Subscribe, then hand each published id to the waits on it, for good."""
        while True:
            try:
                if state.subscription is None:
                    client = await self._sender.client()
                    state.subscription = await AsyncShardSubscription.open(client, self._channel)
                message = await state.subscription.read(LISTEN_BLOCK)
            except Exception:  # the connection failed: subscribe again (asyncio errors too)
                await _close_subscription(state)
                await asyncio.sleep(RESUBSCRIBE_PAUSE)
                continue
            if message is not None and message["type"] == "sunsubscribe":
                await _close_subscription(state)  # the server ended it (the slot moved): again
            elif message is not None:
                _deliver(message, state.waiters, state.subscribed)

    async def _close_with_loop(self, state: _LoopWaits) -> AsyncGenerator[None, None]:
        """Suspended until its loop finalises it (or close() does): then unsubscribes."""
        try:
            yield
        finally:
            if state.listener is not None:  # stopped before its subscription is closed
                await _stop(state.listener)
            await _close_subscription(state)

    async def close(self) -> None:
        """Close the running loop's subscription (its waits then time out)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        state = self._states.pop(loop, None)
        if state is not None and state.closer is not None:
            await state.closer.aclose()

    def connections(self) -> int:
        """How many subscription connections this queue holds (one per live loop)."""
        return sum(1 for state in self._states.values() if state.subscription is not None)


async def _stop(listener: asyncio.Task[None]) -> None:
    """Cancel ``listener`` and wait until it ends. Cancelled again until it does:
    redis-py 5 can swallow a cancellation that lands while it connects."""
    for _ in range(STOP_TRIES):
        listener.cancel()
        await asyncio.wait([listener], timeout=STOP_PAUSE)
        if listener.done():
            return


async def _close_subscription(state: _LoopWaits) -> None:
    subscription, state.subscription = state.subscription, None
    if subscription is not None:
        await subscription.close()


@dataclass(frozen=True, slots=True)
class _Waiting:
    """One wait: its job, its timeout (seconds) and its deadline (time.monotonic)."""

    job_id: str
    timeout: float
    deadline: float

    def left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def timed_out(self) -> WaitTimeout:
        return WaitTimeout(f"job {self.job_id} did not finish within {self.timeout:g} s")


async def _woken_async(event: asyncio.Event, deadline: float) -> bool:
    """Whether ``event`` is set by ``deadline`` (time.monotonic)."""
    try:
        async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
            await event.wait()
    except TimeoutError:
        return False
    return True


def _woken(event: threading.Event, deadline: float) -> bool:
    """Whether ``event`` is set by ``deadline`` (time.monotonic)."""
    return event.wait(max(0.0, deadline - time.monotonic()))


async def _registered_async(
    sender: AsyncSender,
    gate: asyncio.Semaphore,
    watch: Watch[W],
    waiting: _Waiting,
    event: asyncio.Event,
    subscribed: bool,
) -> W:
    """Send the register call until it answers (the job, or what ``watch``
    returns): again each time ``event`` is set (its id was published), after a
    pause on a transient error; WaitTimeout at the deadline. ``subscribed``:
    whether the subscription was confirmed in time (without it no id can be
    heard: one call decides)."""
    pause = REGISTER_PAUSE
    while True:
        event.clear()
        try:
            async with gate:
                job = await sender.send(watch(waiting.left()))
        except TRANSIENT_ERRORS:  # the server restarts, or the connection dropped
            if time.monotonic() + pause >= waiting.deadline:
                raise waiting.timed_out() from None
            await asyncio.sleep(pause)
            pause = min(REGISTER_PAUSE_CAP, pause * 2)
            continue
        pause = REGISTER_PAUSE
        if job is not None:
            return job
        if not subscribed or not await _woken_async(event, waiting.deadline):
            raise waiting.timed_out()


# generated from _registered_async by tools/unasync.py: edit that, then run it
def _registered(
    sender: SyncSender,
    gate: threading.Semaphore,
    watch: Watch[W],
    waiting: _Waiting,
    event: threading.Event,
    subscribed: bool,
) -> W:
    """Send the register call until it answers (the job, or what ``watch``
    returns): again each time ``event`` is set (its id was published), after a
    pause on a transient error; WaitTimeout at the deadline. ``subscribed``:
    whether the subscription was confirmed in time (without it no id can be
    heard: one call decides)."""
    pause = REGISTER_PAUSE
    while True:
        event.clear()
        try:
            with gate:
                job = sender.send(watch(waiting.left()))
        except TRANSIENT_ERRORS:  # the server restarts, or the connection dropped
            if time.monotonic() + pause >= waiting.deadline:
                raise waiting.timed_out() from None
            time.sleep(pause)
            pause = min(REGISTER_PAUSE_CAP, pause * 2)
            continue
        pause = REGISTER_PAUSE
        if job is not None:
            return job
        if not subscribed or not _woken(event, waiting.deadline):
            raise waiting.timed_out()


# end generated


class _Flag(Protocol):
    """An asyncio.Event or a threading.Event."""

    def set(self) -> None: ...
    def is_set(self) -> bool: ...


def _deliver(
    message: dict[str, Any], waiters: Mapping[str, Iterable[_Flag]], subscribed: _Flag
) -> None:
    """Hand one message of the subscription to the waits: a published id wakes the
    waits on it; a subscription confirmed again (messages may have been lost
    meanwhile) wakes every wait, to read its job again."""
    kind = message["type"]
    if kind == "smessage":
        for event in waiters.get(message["data"], ()):
            event.set()
    elif kind == "ssubscribe":
        if subscribed.is_set():
            for events in waiters.values():
                for event in events:
                    event.set()
        subscribed.set()


def _forget(waiters: dict[str, set[Any]], job_id: str, event: Any) -> None:
    """Take a wait's event off ``waiters`` (and its job id, with its last event)."""
    events = waiters.get(job_id)
    if events is not None:
        events.discard(event)
        if not events:
            del waiters[job_id]


@dataclass(slots=True)
class _SyncListener:
    """One listener thread's subscription state (a new one after close())."""

    stop: threading.Event = field(default_factory=threading.Event)
    subscribed: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None


class SyncWaits:
    """The waits of one SyncQueue: ``wait(job_id, timeout, watch)`` from any thread.

    The subscription is opened on the first wait and read by one daemon thread
    until ``close()``; register calls go through the queue's own client, at
    most MAX_WATCHING at once."""

    def __init__(self, sender: SyncSender, channel: str) -> None:
        self._sender = sender
        self._channel = channel
        self._lock = threading.Lock()
        self._waiters: dict[str, set[threading.Event]] = {}
        self._gate: threading.Semaphore = threading.BoundedSemaphore(MAX_WATCHING)
        self._listener: _SyncListener | None = None

    def wait(self, job_id: str, timeout: float, watch: Watch[W]) -> W:
        """The job once it is completed or dead; WaitTimeout after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        event = threading.Event()
        with self._lock:
            listener = self._start()
            self._waiters.setdefault(job_id, set()).add(event)
        try:
            subscribed = _woken(listener.subscribed, deadline)
            return _registered(
                self._sender,
                self._gate,
                watch,
                _Waiting(job_id, timeout, deadline),
                event,
                subscribed,
            )
        finally:
            with self._lock:
                _forget(self._waiters, job_id, event)

    def _start(self) -> _SyncListener:
        """The running listener, started if there is none (the caller holds the lock)."""
        listener = self._listener
        if listener is None or listener.thread is None or not listener.thread.is_alive():
            listener = self._listener = _SyncListener()
            listener.thread = threading.Thread(
                target=self._listen, args=(listener,), name="echomq-waits", daemon=True
            )
            listener.thread.start()
        return listener

    def _listen(self, listener: _SyncListener) -> None:
        """Subscribe, then hand each published id to the waits on it, until close()."""
        subscription: SyncShardSubscription | None = None
        try:
            while not listener.stop.is_set():
                try:
                    if subscription is None:
                        client = self._sender.client()
                        subscription = SyncShardSubscription.open(client, self._channel)
                    message = subscription.read(SYNC_LISTEN_BLOCK)
                except Exception:  # the connection failed: subscribe again
                    if subscription is not None:
                        subscription.close()
                    subscription = None
                    listener.stop.wait(RESUBSCRIBE_PAUSE)
                    continue
                if message is not None and message["type"] == "sunsubscribe":
                    subscription.close()  # the server ended it (the slot moved): again
                    subscription = None
                elif message is not None:
                    with self._lock:
                        _deliver(message, self._waiters, listener.subscribed)
        finally:
            if subscription is not None:
                subscription.close()

    def connections(self) -> int:
        """How many subscription connections this queue holds (0 or 1)."""
        listener = self._listener
        return int(
            listener is not None and listener.thread is not None and listener.thread.is_alive()
        )

    def close(self) -> None:
        """Stop the listener; it closes its subscription within SYNC_LISTEN_BLOCK."""
        with self._lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            listener.stop.set()
