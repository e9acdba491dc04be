"""Following a queue's event stream: ``Queue.events`` and ``SyncQueue.events``.

A reader keeps a cursor (the last event id it has) and alternates two calls:
``readEvents`` (a page after the cursor, and whether a gap was trimmed before
it, in one snapshot) and, once it has caught up, a blocking ``XREAD`` of at
most EVENT_BLOCK seconds that returns as soon as the stream has something
after the cursor. The blocking read borrows one pooled connection of the
queue's client (on a cluster, of the node that holds the queue) for at most
EVENT_BLOCK seconds, so an iterator that is dropped or closed gives it back
within that time; between reads the iterator holds no connection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

from echomq.call import Call
from echomq.engine import Engine
from echomq.events import Event, EventPage
from echomq.sending.sender import AsyncSender, SyncSender

#: seconds one blocking read of the stream waits before it is sent again.
EVENT_BLOCK = 1.0


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
    (after a ``missed`` notice when there was a gap), an empty list each time a
    blocking read ran out with nothing new (the dashboard's keep-alive tick)."""
    first = engine.read_events(after)  # checks ``after`` now, not at the first read
    return _pages_async(sender, engine, first, after)


async def _pages_async(
    sender: AsyncSender, engine: Engine, first: Call[EventPage], after: str | None
) -> AsyncIterator[list[Event]]:
    page = await sender.send(first)
    cursor = page.cursor
    if after is not None and (page.events or page.missed):
        yield page.with_notice(after)
    caught_up = not page.full
    while True:
        if caught_up:
            wait = engine.wait_for_events(cursor, EVENT_BLOCK, sender.longest_block())
            if not await sender.send(wait):
                yield []
                continue
        page = await sender.send(engine.read_events(cursor))
        if page.events or page.missed:
            yield page.with_notice(cursor)
        cursor, caught_up = page.cursor, not page.full


def follow(sender: SyncSender, engine: Engine, after: str | None) -> Iterator[Event]:
    """The events after ``after`` (None: from now on, the moment of this call), as
    they come (blocking)."""
    page = sender.send(engine.read_events(after))
    return _follow(sender, engine, page, after)


def _follow(
    sender: SyncSender, engine: Engine, page: EventPage, after: str | None
) -> Iterator[Event]:
    cursor = page.cursor
    if after is not None:
        yield from page.with_notice(after)
    caught_up = not page.full
    while True:
        if caught_up:
            sender.send(engine.wait_for_events(cursor, EVENT_BLOCK, sender.longest_block()))
        page = sender.send(engine.read_events(cursor))
        yield from page.with_notice(cursor)
        cursor, caught_up = page.cursor, not page.full
