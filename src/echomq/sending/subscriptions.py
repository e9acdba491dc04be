"""Shard subscriptions: one connection SSUBSCRIBEd to one shard channel.

``wait()`` (echomq.flows.waiters) listens on a queue's done channel, a shard
channel (SSUBSCRIBE, Redis 7+ / Valkey 7+) that carries the queue's hash tag,
so on a cluster its messages stay on the shard that serves the queue's slot.
This module hides how each redis-py version subscribes:

- redis-py 8+: the client's ``pubsub()`` (a cluster's ``ClusterPubSub`` routes
  to the slot's primary itself);
- a blocking cluster client: its ``ClusterPubSub`` (redis-py 5+);
- an asyncio cluster client before redis-py 8 has no ``pubsub()``: echomq opens
  a plain asyncio connection to the primary that serves the channel's slot
  (``get_node_from_key``, with the cluster's own connection settings) and
  subscribes there. If that primary fails or the slot moves (the server then
  ends the subscription: ``sunsubscribe``), the listener opens the
  subscription again and resolves the node again from the client's slot map;
- an asyncio PubSub without ``ssubscribe`` (redis-py 5-7): echomq sends
  SSUBSCRIBE itself, and, as that PubSub reconnects silently after a dropped
  connection (resubscribing only the channels it knows), sends it again on
  each reconnect; the server's confirmation then tells the listener that
  messages may have been lost.

A subscription's messages are redis-py's dicts (``type``: ``ssubscribe``,
``smessage``, ``sunsubscribe``; ``data``).
"""

from __future__ import annotations

import contextlib
from typing import Any

import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

from echomq.connection import AsyncClient, SyncClient

#: redis-py's asyncio cluster subscription (redis-py 8+; None before)
_AsyncClusterPubSub: Any = getattr(redis.asyncio.cluster, "ClusterPubSub", None)


class _Resubscriber:
    """Sends SSUBSCRIBE again each time a redis-py 5-7 PubSub reconnects."""

    def __init__(self, channel: str) -> None:
        self.channel = channel

    async def on_connect(self, conn: Any) -> None:
        await conn.send_command("SSUBSCRIBE", self.channel)


class AsyncShardSubscription:
    """One asyncio connection subscribed to ``channel``: :meth:`open`, :meth:`read`,
    :meth:`close`."""

    def __init__(self, pubsub: Any, node_client: redis.asyncio.Redis | None) -> None:
        self._pubsub = pubsub
        #: the plain client to a cluster's primary this subscription opened (closed with it)
        self._node_client = node_client
        #: held here: redis-py keeps only a weak reference to a connect callback
        self._resubscriber: _Resubscriber | None = None

    @classmethod
    async def open(cls, client: AsyncClient, channel: str) -> AsyncShardSubscription:
        """Subscribe to ``channel`` (the server's confirmation is the first message)."""
        node_client = None
        if isinstance(client, redis.asyncio.cluster.RedisCluster) and not hasattr(client, "pubsub"):
            node_client = await _primary_client(client, channel)
            pubsub: Any = node_client.pubsub()
        else:
            pubsub = client.pubsub()
        subscription = cls(pubsub, node_client)
        try:
            await subscription._subscribe(channel)
        except BaseException:
            await subscription.close()
            raise
        return subscription

    async def _subscribe(self, channel: str) -> None:
        if hasattr(self._pubsub, "ssubscribe"):
            await self._pubsub.ssubscribe(channel)
            return
        await self._pubsub.execute_command("SSUBSCRIBE", channel)
        self._resubscriber = _Resubscriber(channel)
        self._pubsub.connection.register_connect_callback(self._resubscriber.on_connect)

    async def read(self, timeout: float) -> dict[str, Any] | None:
        """The next message, or None after ``timeout`` seconds without one."""
        if _AsyncClusterPubSub is not None and isinstance(self._pubsub, _AsyncClusterPubSub):
            message: dict[str, Any] | None = await self._pubsub.get_sharded_message(timeout=timeout)
            return message
        return await self._pubsub.get_message(timeout=timeout)  # type: ignore[no-any-return]

    async def close(self) -> None:
        with contextlib.suppress(Exception):  # a broken connection: nothing left to do
            await self._pubsub.aclose()
        if self._node_client is not None:  # its one connection, wherever it got to
            with contextlib.suppress(Exception):
                await self._node_client.connection_pool.disconnect()


async def _primary_client(
    cluster: redis.asyncio.cluster.RedisCluster, channel: str
) -> redis.asyncio.Redis:
    """A plain client of one connection to the primary serving ``channel``'s slot,
    made with the cluster client's connection settings (password, TLS, decoding)."""
    try:
        node = cluster.get_node_from_key(channel)
    except redis.exceptions.RedisError:  # no slot map yet
        await cluster.initialize()
        node = cluster.get_node_from_key(channel)
    if node is None:
        raise redis.exceptions.ConnectionError(f"no primary serves the slot of {channel!r}")
    settings = {k: v for k, v in node.connection_kwargs.items() if k != "redis_connect_func"}
    pool = redis.asyncio.ConnectionPool(
        connection_class=node.connection_class, max_connections=1, **settings
    )
    return redis.asyncio.Redis(connection_pool=pool)


class SyncShardSubscription:
    """One blocking connection subscribed to ``channel`` (see AsyncShardSubscription)."""

    def __init__(self, pubsub: Any) -> None:
        self._pubsub = pubsub

    @classmethod
    def open(cls, client: SyncClient, channel: str) -> SyncShardSubscription:
        subscription = cls(client.pubsub())
        try:
            subscription._pubsub.ssubscribe(channel)
        except BaseException:
            subscription.close()
            raise
        return subscription

    def read(self, timeout: float) -> dict[str, Any] | None:
        """The next message, or None after ``timeout`` seconds without one."""
        if isinstance(self._pubsub, redis.cluster.ClusterPubSub):
            return self._pubsub.get_sharded_message(timeout=timeout)  # type: ignore[no-any-return,no-untyped-call]
        return self._pubsub.get_message(timeout=timeout)  # type: ignore[no-any-return]

    def close(self) -> None:
        with contextlib.suppress(Exception):  # a broken connection: nothing left to do
            self._pubsub.close()
