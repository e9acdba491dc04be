"""Clients built by echomq.connection reach the server the url resolution names."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis.asyncio

from echomq.connection import (
    HEALTH_CHECK_INTERVAL,
    SOCKET_TIMEOUT,
    URL_ENV,
    async_client,
    is_cluster_url,
    resolve_url,
    socket_timeout_of,
    sync_client,
)
from echomq.embedded import HOME_ENV, EmbeddedServer


def test_clients_have_bounded_timeouts_and_health_checks(backend_url: str) -> None:
    with sync_client(backend_url) as client:
        options = client.get_connection_kwargs()
        assert socket_timeout_of(client) == SOCKET_TIMEOUT
    assert options["socket_timeout"] == SOCKET_TIMEOUT
    assert options["socket_connect_timeout"] is not None
    if not is_cluster_url(backend_url):  # a cluster client reconnects on error instead
        assert options["health_check_interval"] == HEALTH_CHECK_INTERVAL
    with sync_client(backend_url, socket_timeout=60.0) as patient:
        assert patient.get_connection_kwargs()["socket_timeout"] == 60.0


async def test_async_clients_have_bounded_timeouts(backend_url: str) -> None:
    client = async_client(backend_url, socket_timeout=7.0)
    try:
        assert await client.ping()
        assert socket_timeout_of(client) == 7.0
    finally:
        await client.aclose()


def test_sync_client_decodes_replies(backend_url: str, queue_name: str) -> None:
    with sync_client(backend_url) as client:
        client.set(queue_name, "é")
        assert client.get(queue_name) == "é"
        client.delete(queue_name)


async def test_async_client_decodes_replies(backend_url: str, queue_name: str) -> None:
    client = async_client(backend_url)
    try:
        await client.set(queue_name, "é")
        assert await client.get(queue_name) == "é"
        await client.delete(queue_name)
    finally:
        await client.aclose()


def test_echomq_url_is_used_when_no_url_is_given(
    monkeypatch: pytest.MonkeyPatch, backend_url: str, queue_name: str
) -> None:
    monkeypatch.setenv(URL_ENV, backend_url)

    with sync_client() as client:
        client.set(queue_name, "via env")
    with sync_client(backend_url) as direct:
        assert direct.getdel(queue_name) == "via env"


def test_valkey_scheme_alias_connects(backend_url: str) -> None:
    with sync_client(backend_url.replace("redis://", "valkey://", 1)) as client:
        assert client.ping()


async def test_without_url_the_embedded_server_is_started(
    monkeypatch: pytest.MonkeyPatch, embedded: EmbeddedServer
) -> None:
    monkeypatch.setenv(HOME_ENV, str(embedded.data_dir))
    monkeypatch.delenv(URL_ENV, raising=False)
    assert not embedded.is_running()

    assert resolve_url(None) == embedded.url
    client = async_client()
    try:
        assert await client.ping()
        info = await client.info("server")
        assert info["process_id"] == embedded.status()["pid"]
    finally:
        await client.aclose()


async def test_a_pooled_connection_closed_by_the_server_is_replaced(
    backend_url: str, queue_name: str
) -> None:
    from echomq import Queue, transport

    if is_cluster_url(backend_url):
        pytest.skip("the server-side kill below addresses one server")
    queue = Queue(queue_name, backend_url)
    try:
        await queue.add("j")
        client = await queue.client()
        assert isinstance(client, redis.asyncio.Redis)
        own_id = await client.client_id()  # the one pooled connection, idle afterwards
        [conn] = client.connection_pool._available_connections
        assert isinstance(conn, transport.Connection | transport.UnixDomainSocketConnection)
        with sync_client(backend_url) as admin:
            assert admin.client_kill_filter(_id=own_id) == 1
        await wait_until_closed(conn)  # the close reached the idle connection's transport
        assert await queue.add("j")  # no TypeError/AttributeError: a new connection
        assert (await queue.stats()).counts["waiting"] == 2
    finally:
        await queue.close()


async def wait_until_closed(conn: object, timeout: float = 10.0) -> None:
    """Bounded poll until the server's close of an idle pooled connection has arrived."""
    deadline = time.monotonic() + timeout
    while True:
        reader, writer = getattr(conn, "_reader", None), getattr(conn, "_writer", None)
        if (reader is not None and reader.at_eof()) or (
            writer is not None and writer.transport.is_closing()
        ):
            return
        assert time.monotonic() < deadline, "the server's close never reached the connection"
        await asyncio.sleep(0.005)
