"""Following a queue's event stream: ``Queue.events`` and ``SyncQueue.events``.

A reader keeps a cursor (the last event id it has) and reads pages after it
with ``readEvents`` (a page after the cursor, and whether a gap was trimmed
before it, in one snapshot). Once it has caught up it waits for the queue's
**event bell**: one blocking ``XREAD`` (at most EVENT_BLOCK seconds a time)
per queue object and event loop (asyncio) or per SyncQueue (a daemon thread),
shared by every reader, as every ``wait()`` shares one subscription. So 1,000
open ``events()`` iterators, or dashboard streams of one queue, hold one
blocking connection between them, not 1,000: the pool stays free for
``add``/``stats`` (echomq.connection bounds it).

The bell keeps the stream's last id it knows (``last``) and a ``generation``
that grows each time it learns of newer events (and when it starts or
recovers from an error: it may have missed some then). A reader notes the
generation *before* each read and, caught up, sleeps until the generation
passes what it noted, then reads again. Nothing slips between the two: an
event newer than the reader's read is newer than ``last`` unless the bell
learned of it (and moved the generation) after the reader noted it. A reader
that hears nothing for EVENT_BLOCK seconds gets an empty page (the
dashboard's keep-alive tick). The bell runs while it has readers and stops
within EVENT_BLOCK seconds after the last one leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from dataclasses import dataclass, field

from echomq.call import Call
from echomq.engine import Engine
from echomq.events import Event, EventPage
from echomq.sending.sender import AsyncSender, SyncSender

#: seconds one blocking read of the stream waits before it is sent again.
EVENT_BLOCK = 1.0
#: seconds the bell pauses after a failed read before it reads again.
BELL_PAUSE = 0.25


@dataclass(slots=True)
class _LoopBell:
    """One event loop's bell of one queue."""

    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    generation: int = 0
    readers: int = 0
    task: asyncio.Task[None] | None = None
    closer: AsyncGenerator[None, None] | None = None

    def serving(self) -> bool:
        """Whether the bell has readers (it stops when it has none)."""
        return self.readers > 0

    async def bump(self) -> None:
        """Tell every reader that newer events may be there."""
        async with self.changed:
            self.generation += 1
            self.changed.notify_all()


class AsyncBell:
    """The event bell of one asyncio Queue (per event loop)."""

    def __init__(self, sender: AsyncSender, engine: Engine) -> None:
        self._sender = sender
        self._engine = engine
        self._states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopBell] = (
            weakref.WeakKeyDictionary()
        )

    async def state(self) -> _LoopBell:
        loop = asyncio.get_running_loop()
        state = self._states.get(loop)
        if state is None:
            state = self._states[loop] = _LoopBell()
            state.closer = self._close_with_loop(state)
            await anext(state.closer)
        return state

    @contextlib.asynccontextmanager
    async def following(self) -> AsyncIterator[_LoopBell]:
        """Be one of the bell's readers (it runs while it has any)."""
        state = await self.state()
        state.readers += 1
        if state.task is None or state.task.done():
            state.task = asyncio.get_running_loop().create_task(
                self._ring(state), name="echomq-event-bell"
            )
        try:
            yield state
        finally:
            state.readers -= 1

    async def after(self, state: _LoopBell, generation: int) -> bool:
        """Wait up to EVENT_BLOCK seconds for the generation to pass ``generation``."""
        async with state.changed:
            try:
                async with asyncio.timeout(EVENT_BLOCK):
                    await state.changed.wait_for(lambda: state.generation > generation)
            except TimeoutError:
                return False
        return True

    async def _ring(self, state: _LoopBell) -> None:
        last: str | None = None
        while state.serving():
            try:
                if last is not None:
                    wait = self._engine.wait_for_events(
                        last, EVENT_BLOCK, self._sender.longest_block()
                    )
                    if not await self._sender.send(wait):
                        continue
                # the first read, again after an error, or something came: the newest id
                page = await self._sender.send(self._engine.read_events(None))
                last = page.cursor
                await state.bump()
            except Exception:  # the read failed (server gone, pool busy): again, later
                last = None
                await asyncio.sleep(BELL_PAUSE)

    async def _close_with_loop(self, state: _LoopBell) -> AsyncGenerator[None, None]:
        """Suspended until its loop finalises it: then stops the bell."""
        try:
            yield
        finally:
            if state.task is not None:
                state.task.cancel()


#: each asyncio sender's bell (one per queue object)
_async_bells: weakref.WeakKeyDictionary[AsyncSender, AsyncBell] = weakref.WeakKeyDictionary()


def _async_bell(sender: AsyncSender, engine: Engine) -> AsyncBell:
    bell = _async_bells.get(sender)
    if bell is None:
        bell = _async_bells[sender] = AsyncBell(sender, engine)
    return bell


def follow_async(sender: AsyncSender, engine: Engine, after: str | None) -> AsyncIterator[Event]:
    """The events after ``after`` (None: from now on, the moment of the first
    ``anext``: an async call cannot read the server before it is awaited), as
    they come (asyncio)."""
    return _events_of(pages_async(sender, engine, after))


async def _events_of(pages: AsyncIterator[list[Event]]) -> AsyncIterator[Event]:
    async for page in pages:
        for event in page:
            yield event


def pages_async(
    sender: AsyncSender, engine: Engine, after: str | None
) -> AsyncIterator[list[Event]]:
    """The events after ``after`` a read at a time: each list is one read's events
    (after a ``missed`` notice when there was a gap), an empty list each time
    EVENT_BLOCK seconds passed with nothing new (the dashboard's keep-alive tick)."""
    first = engine.read_events(after)  # checks ``after`` now, not at the first read
    return _pages_async(sender, engine, first, after)


async def _pages_async(
    sender: AsyncSender, engine: Engine, first: Call[EventPage], after: str | None
) -> AsyncIterator[list[Event]]:
    bell = _async_bell(sender, engine)
    async with bell.following() as state:
        seen = state.generation  # before the read: see the module's documentation
        page = await sender.send(first)
        async for events in _read_on_async(sender, engine, bell, state, seen, page, after):
            yield events


async def _read_on_async(
    sender: AsyncSender,
    engine: Engine,
    bell: AsyncBell,
    state: _LoopBell,
    seen: int,
    page: EventPage,
    after: str | None,
) -> AsyncIterator[list[Event]]:
    """The pages from ``page`` (read after the bell's generation was ``seen``) on."""
    cursor = page.cursor
    if after is not None and (page.events or page.missed):
        yield page.with_notice(after)
    caught_up = not page.full
    while True:
        if caught_up and not await bell.after(state, seen):
            yield []
            continue
        seen = state.generation
        page = await sender.send(engine.read_events(cursor))
        if page.events or page.missed:
            yield page.with_notice(cursor)
        cursor, caught_up = page.cursor, not page.full


class SyncBell:
    """The event bell of one SyncQueue: a daemon thread while it has readers. It is
    its own state (the asyncio bell keeps one per event loop)."""

    def __init__(self, sender: SyncSender, engine: Engine) -> None:
        self._sender = sender
        self._engine = engine
        self._changed = threading.Condition()
        self.generation = 0
        self._readers = 0
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def following(self) -> Iterator[SyncBell]:
        """Be one of the bell's readers (it runs while it has any)."""
        with self._changed:
            self._readers += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._ring, args=(self,), name="echomq-event-bell", daemon=True
                )
                self._thread.start()
        try:
            yield self
        finally:
            with self._changed:
                self._readers -= 1

    def after(self, state: SyncBell, generation: int) -> bool:
        """Wait up to EVENT_BLOCK seconds for the generation to pass ``generation``."""
        with self._changed:
            return self._changed.wait_for(lambda: self.generation > generation, EVENT_BLOCK)

    def serving(self) -> bool:
        """Whether the bell has readers; the thread that asks ends when it has none."""
        with self._changed:
            if self._readers <= 0:
                self._thread = None
                return False
            return True

    def bump(self) -> None:
        """Tell every reader that newer events may be there."""
        with self._changed:
            self.generation += 1
            self._changed.notify_all()

    # generated from AsyncBell._ring by tools/unasync.py: edit that, then run it
    def _ring(self, state: SyncBell) -> None:
        last: str | None = None
        while state.serving():
            try:
                if last is not None:
                    wait = self._engine.wait_for_events(
                        last, EVENT_BLOCK, self._sender.longest_block()
                    )
                    if not self._sender.send(wait):
                        continue
                # the first read, again after an error, or something came: the newest id
                page = self._sender.send(self._engine.read_events(None))
                last = page.cursor
                state.bump()
            except Exception:  # the read failed (server gone, pool busy): again, later
                last = None
                time.sleep(BELL_PAUSE)

    # end generated


#: each blocking sender's bell (one per SyncQueue)
_sync_bells: weakref.WeakKeyDictionary[SyncSender, SyncBell] = weakref.WeakKeyDictionary()
_sync_bells_lock = threading.Lock()


def _sync_bell(sender: SyncSender, engine: Engine) -> SyncBell:
    with _sync_bells_lock:
        bell = _sync_bells.get(sender)
        if bell is None:
            bell = _sync_bells[sender] = SyncBell(sender, engine)
        return bell


def follow(sender: SyncSender, engine: Engine, after: str | None) -> Iterator[Event]:
    """The events after ``after`` (None: from now on, the moment of this call), as
    they come (blocking)."""
    bell = _sync_bell(sender, engine)
    seen = bell.generation  # before the read: see the module's documentation
    page = sender.send(engine.read_events(after))
    return _follow(sender, engine, bell, seen, page, after)


def _follow(
    sender: SyncSender,
    engine: Engine,
    bell: SyncBell,
    seen: int,
    page: EventPage,
    after: str | None,
) -> Iterator[Event]:
    with bell.following() as state:
        for events in _read_on(sender, engine, bell, state, seen, page, after):
            yield from events


# generated from _read_on_async by tools/unasync.py: edit that, then run it
def _read_on(
    sender: SyncSender,
    engine: Engine,
    bell: SyncBell,
    state: SyncBell,
    seen: int,
    page: EventPage,
    after: str | None,
) -> Iterator[list[Event]]:
    """The pages from ``page`` (read after the bell's generation was ``seen``) on."""
    cursor = page.cursor
    if after is not None and (page.events or page.missed):
        yield page.with_notice(after)
    caught_up = not page.full
    while True:
        if caught_up and not bell.after(state, seen):
            yield []
            continue
        seen = state.generation
        page = sender.send(engine.read_events(cursor))
        if page.events or page.missed:
            yield page.with_notice(cursor)
        cursor, caught_up = page.cursor, not page.full


# end generated
