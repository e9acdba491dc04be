"""The senders: the only objects that talk to the server.

An :class:`AsyncSender` (asyncio) or :class:`SyncSender` (blocking) owns one
client and sends :class:`~echomq.call.Call` objects over it:

- a script as a function of the library (FCALL), loading the library where
  the server does not have it (first use, a restart, a new primary), or by
  EVALSHA (SCRIPT LOAD after NOSCRIPT) on a server without functions
  (:mod:`.scripts`, the one rule);
- a durable call with ``WAIT`` on the same connection (:mod:`.durable`);
- a blocking wait and the call that follows it in one pipeline
  (:meth:`AsyncSender.send_after`, the worker's doorbell);
- on a cluster, every call goes to the primary of the queue's slot (the
  cluster client routes by the first key).

The first use of a client also sends the queue's greeting call (the stored
format check, :mod:`echomq.storage`; a greeting that answers with a call, the
upgrade of an older stored format, has that call sent next) and checks once whether the server may
evict keys (:mod:`.eviction`: a warning if so).

A client a sender makes holds at most ``max_connections`` connections, from a
blocking pool (echomq.connection); an asyncio cluster client, whose nodes
cannot block, gets the same bound from the sender: at most that many calls
in flight, a call waiting up to POOL_TIMEOUT for its turn. A worker raises the
bound to its concurrency (``ensure_connections``). Whatever the client, a
call that found no free connection in time raises PoolTimeout (an
EchoMQError), not redis-py's MaxConnectionsError.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from typing import Any, Generic, TypeVar

import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
import redis.exceptions

from echomq import connection
from echomq.call import Call
from echomq.connection import AsyncClient, SyncClient
from echomq.sending import durable, eviction, pipelines, scripts

T = TypeVar("T")
U = TypeVar("U")
ClientT = TypeVar("ClientT")

#: a cluster primary to scan, or None for the single server a plain client talks to.
Node = redis.asyncio.cluster.ClusterNode | None
SyncNode = redis.cluster.ClusterNode | None

#: margin between a blocking command's own timeout and the guard around it (seconds).
GUARD = 2.0
#: longest block when the client has no socket timeout.
MAX_BLOCK = 60.0


class _Sender(Generic[ClientT]):
    """What both senders hold: the url, the client (maybe given), the greeting, and
    how scripts go (``scripts.functions``: by FCALL while True, else by EVALSHA)."""

    def __init__(
        self,
        url: str | None,
        client: ClientT | None,
        greeting: Call[Any] | None,
        max_connections: int = connection.DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        self.url = url
        #: connections a client this sender makes may hold at once (a given client: its own)
        self.max_connections = max_connections
        self._client = client
        self._owns_client = client is None
        self._greeting = greeting
        self.scripts = scripts.ScriptForm()
        #: the server's maxmemory-policy when it may evict keys (None: noeviction, or
        #: not known yet): read once, at the client's first use (echomq.sending.eviction)
        self.eviction_policy: str | None = None
        self._eviction_checked = False

    @property
    def owns_client(self) -> bool:
        """True if the sender made its client from ``url`` (no client was given)."""
        return self._owns_client

    def longest_block(self) -> float:
        """The longest block (BLPOP) that ends before the client's socket timeout
        would cut it (the client must exist)."""
        assert self._client is not None, "connect first"
        socket_timeout = connection.socket_timeout_of(self._client)  # type: ignore[arg-type]
        if not socket_timeout:
            return MAX_BLOCK
        return min(MAX_BLOCK, socket_timeout - 1.0 if socket_timeout >= 2.0 else socket_timeout / 2)


@contextlib.contextmanager
def _pool_errors(max_connections: int) -> Iterator[None]:
    """Raise PoolTimeout for redis-py's "no free connection" errors."""
    try:
        yield
    except redis.exceptions.ConnectionError as exc:
        error = connection.pool_timeout_error(exc, max_connections)
        if error is None:
            raise
        raise error from None


class _InFlight:
    """At most ``limit`` calls in flight on one event loop's client (an asyncio
    cluster client, whose node pools cannot block); a call waits up to
    POOL_TIMEOUT for its turn, then PoolTimeout."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._busy = 0
        self._freed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        async with self._freed:
            try:
                async with asyncio.timeout(connection.POOL_TIMEOUT):
                    await self._freed.wait_for(lambda: self._busy < self.limit)
            except TimeoutError:
                raise connection.pool_timeout(self.limit) from None
            self._busy += 1
        try:
            yield
        finally:
            async with self._freed:
                self._busy -= 1
                self._freed.notify()


class AsyncSender(_Sender[AsyncClient]):
    """Sends calls with a ``redis.asyncio`` client or cluster client.

    redis-py's asyncio connections belong to the event loop that opened them,
    so a client the sender made itself is made per event loop: a Queue can be
    used from one ``asyncio.run`` after another. The client of a loop is
    closed when that loop shuts down its async generators (``asyncio.run``
    does, before it closes the loop), or by :meth:`close`.
    """

    def __init__(
        self,
        url: str | None,
        client: AsyncClient | None,
        greeting: Call[Any] | None,
        max_connections: int = connection.DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        super().__init__(url, client, greeting, max_connections)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._first_lock: asyncio.Lock | None = None
        self._first_lock_loop: asyncio.AbstractEventLoop | None = None
        self._closer: AsyncGenerator[None, None] | None = None
        #: the bound on calls in flight of a cluster client this sender made
        self._in_flight: _InFlight | None = None

    def ensure_connections(self, count: int) -> None:
        """Let the client hold at least ``count`` connections at once (a worker of
        concurrency n asks for n plus its own few): the pool of the current
        client grows at once, later clients are made that size. A given client
        keeps its own pool."""
        if count <= self.max_connections:
            return
        self.max_connections = count
        if self._in_flight is not None:
            self._in_flight.limit = count
        if self._owns_client and isinstance(self._client, redis.asyncio.Redis):
            self._client.connection_pool.max_connections = count

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncClient]:
        """The client for one call (or pair): its turn among the calls in flight on
        an asyncio cluster client, redis-py's pool errors raised as PoolTimeout."""
        with _pool_errors(self.max_connections):
            client = await self.client()  # its first use sends the greeting
            if self._in_flight is None:
                yield client
            else:
                async with self._in_flight.turn():
                    yield client

    async def client(self) -> AsyncClient:
        """The client, connecting (and starting the embedded server) on first use."""
        loop = asyncio.get_running_loop()
        if self._owns_client and self._loop is not loop:
            self._client = None  # the last loop's client is closed with that loop
        if self._client is None:
            made = await asyncio.to_thread(
                connection.async_client, self.url, max_connections=self.max_connections
            )
            if self._client is None:
                self._client, self._loop = made, loop
                clustered = isinstance(made, redis.asyncio.cluster.RedisCluster)
                self._in_flight = _InFlight(self.max_connections) if clustered else None
                self._closer = self._close_with_loop(made)
                await anext(self._closer)
            else:  # another task's first use won the race; keep one pool
                await made.aclose()
        if self._greeting is not None or not self._eviction_checked:
            await self._first_use(loop)
        return self._client

    async def _first_use(self, loop: asyncio.AbstractEventLoop) -> None:
        """The greeting and the eviction check, sent once: the calls that arrive
        meanwhile (150 readers at start) wait for them instead of each sending
        them outside the calls in flight."""
        if self._first_lock is None or self._first_lock_loop is not loop:
            self._first_lock, self._first_lock_loop = asyncio.Lock(), loop
        async with self._first_lock:
            assert self._client is not None
            if self._greeting is not None:
                follow_up = await self._execute(self._client, self._greeting)
                if isinstance(follow_up, Call):  # the stored format's upgrade
                    await self._execute(self._client, follow_up)
                self._greeting = None
            if not self._eviction_checked:
                self.eviction_policy = await eviction.check_async(self._client)
                self._eviction_checked = True

    async def _close_with_loop(self, client: AsyncClient) -> AsyncGenerator[None, None]:
        """Suspended until its loop finalises it (or close() does): then closes ``client``."""
        try:
            yield
        finally:
            if self._client is client:
                self._client = None
            await client.aclose()

    async def send(self, call: Call[T]) -> T:
        """Send one call and parse its reply (PoolTimeout if every connection of the
        pool stayed in use for POOL_TIMEOUT seconds)."""
        async with self._connection() as client:
            if call.durable is not None:
                return await durable.send_async(client, self.scripts, call)
            return await self._execute(client, call)

    async def _execute(self, client: AsyncClient, call: Call[T]) -> T:
        if call.script is None:
            return call.parse(await client.execute_command(*call.command))  # type: ignore[no-untyped-call, unused-ignore]
        execute = pipelines.one_by_one_async(client)
        load = pipelines.load_with_async(execute)
        (reply,) = await scripts.send_async(execute, load, self.scripts, [call])
        return call.parse(pipelines.raised(reply))

    async def send_after(self, wait: Call[T], then: Call[U]) -> tuple[T, U]:
        """Send a blocking ``wait`` and, as soon as it returns, ``then``.

        On a single server both go in one pipeline: the server runs ``then``
        the moment the wait ends, which saves a round trip. A cluster client
        sends them one after the other. The pair is bounded by the wait's own
        timeout plus GUARD, so a dropped connection surfaces as an error.
        """
        async with self._connection() as client, asyncio.timeout((wait.blocks or 0.0) + GUARD):
            if isinstance(client, redis.asyncio.Redis):
                on_client = pipelines.on_async_client(client)
                load = pipelines.load_with_async(on_client)
                first, second = await scripts.send_async(
                    on_client, load, self.scripts, [wait, then]
                )
                return wait.parse(pipelines.raised(first)), then.parse(pipelines.raised(second))
            woke = await self._execute(client, wait)
            return woke, await self._execute(client, then)

    async def nodes(self) -> list[Node]:
        """Every primary of a cluster (each holds its own keys), or [None] for one server."""
        client = await self.client()
        if isinstance(client, redis.asyncio.cluster.RedisCluster):
            await client.initialize()  # unasync: async only
            return list(client.get_primaries())  # type: ignore[no-untyped-call, unused-ignore]
        return [None]

    async def scan_page(
        self, node: Node, cursor: int, match: str, count: int
    ) -> tuple[int, list[str]]:
        """One SCAN call on ``node`` (None: the single server): the next cursor
        (0 at the end) and the keys found. The caller bounds the walk."""
        async with self._connection() as client:
            if node is None:
                assert not isinstance(client, redis.asyncio.cluster.RedisCluster)
                next_cursor, keys = await client.scan(cursor, match=match, count=count)
                return int(next_cursor), [str(k) for k in keys]
            # a cluster client answers ({node name: next cursor}, keys)
            reply: Any = await client.scan(cursor, match=match, count=count, target_nodes=node)
        cursors, keys = reply
        return int(next(iter(cursors.values()))), [str(k) for k in keys]

    async def close(self) -> None:
        closer, self._closer = self._closer, None
        if closer is not None:
            await closer.aclose()  # closes the client this sender made
        self._client = None


class SyncSender(_Sender[SyncClient]):
    """Sends calls with a ``redis.Redis`` or ``redis.cluster.RedisCluster`` client."""

    def client(self) -> SyncClient:
        """The client, connecting (and starting the embedded server) on first use."""
        if self._client is None:
            self._client = connection.sync_client(self.url, max_connections=self.max_connections)
        if self._greeting is not None:
            follow_up = self._execute(self._client, self._greeting)
            if isinstance(follow_up, Call):  # the stored format's upgrade
                self._execute(self._client, follow_up)
            self._greeting = None
        if not self._eviction_checked:
            self._eviction_checked = True
            self.eviction_policy = eviction.check(self._client)
        return self._client

    @contextlib.contextmanager
    def _connection(self) -> Iterator[SyncClient]:
        """The client for one call, redis-py's pool errors raised as PoolTimeout."""
        with _pool_errors(self.max_connections):
            yield self.client()  # its first use sends the greeting

    # generated from AsyncSender.send by tools/unasync.py: edit that, then run it
    def send(self, call: Call[T]) -> T:
        """Send one call and parse its reply (PoolTimeout if every connection of the
        pool stayed in use for POOL_TIMEOUT seconds)."""
        with self._connection() as client:
            if call.durable is not None:
                return durable.send(client, self.scripts, call)
            return self._execute(client, call)

    # end generated

    # generated from AsyncSender._execute by tools/unasync.py: edit that, then run it
    def _execute(self, client: SyncClient, call: Call[T]) -> T:
        if call.script is None:
            return call.parse(client.execute_command(*call.command))  # type: ignore[no-untyped-call, unused-ignore]
        execute = pipelines.one_by_one(client)
        load = pipelines.load_with(execute)
        (reply,) = scripts.send(execute, load, self.scripts, [call])
        return call.parse(pipelines.raised(reply))

    # end generated

    # generated from AsyncSender.nodes by tools/unasync.py: edit that, then run it
    def nodes(self) -> list[SyncNode]:
        """Every primary of a cluster (each holds its own keys), or [None] for one server."""
        client = self.client()
        if isinstance(client, redis.cluster.RedisCluster):
            return list(client.get_primaries())  # type: ignore[no-untyped-call, unused-ignore]
        return [None]

    # end generated

    # generated from AsyncSender.scan_page by tools/unasync.py: edit that, then run it
    def scan_page(
        self, node: SyncNode, cursor: int, match: str, count: int
    ) -> tuple[int, list[str]]:
        """One SCAN call on ``node`` (None: the single server): the next cursor
        (0 at the end) and the keys found. The caller bounds the walk."""
        with self._connection() as client:
            if node is None:
                assert not isinstance(client, redis.cluster.RedisCluster)
                next_cursor, keys = client.scan(cursor, match=match, count=count)
                return int(next_cursor), [str(k) for k in keys]
            # a cluster client answers ({node name: next cursor}, keys)
            reply: Any = client.scan(cursor, match=match, count=count, target_nodes=node)
        cursors, keys = reply
        return int(next(iter(cursors.values()))), [str(k) for k in keys]

    # end generated

    def close(self) -> None:
        if self._client is not None and self._owns_client:
            self._client.close()
        self._client = None
