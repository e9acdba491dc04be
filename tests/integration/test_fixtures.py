"""The test servers themselves: real, private, of the right kind, and controllable."""

from __future__ import annotations

import os

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from echomq.keys import check_name
from servers import (
    KINDS,
    PrivateServer,
    ServerFactory,
    ServerPool,
    require_server,
)

SYSTEM_PORT = 6379


@pytest.mark.no_cluster("a cluster has six ports (tests/cluster/ checks them)")
def test_backend_answers_on_a_private_port(backend: PrivateServer, backend_url: str) -> None:
    assert backend.ping()
    assert backend_url == f"redis://127.0.0.1:{backend.port}/0"
    assert backend.port != SYSTEM_PORT
    assert backend.pid is not None and backend.pid != os.getpid()


def test_backend_runs_the_expected_version(backend: PrivateServer) -> None:
    expected = {"valkey": "8.1.", "redis": "7.", "valkey9": "9.1.", "cluster": "8.1."}[backend.kind]
    assert backend.version().startswith(expected)
    with backend.client() as client:
        assert ("valkey_version" in client.info("server")) == (backend.kind != "redis")


def test_backend_persists_nothing_by_default(redis_client: redis.Redis) -> None:
    assert redis_client.config_get("save") == {"save": ""}
    assert redis_client.config_get("appendonly") == {"appendonly": "no"}


def test_the_two_backends_are_different_processes(_server_pool: ServerPool) -> None:
    require_server("redis")
    valkey, redis_server = (_server_pool.get(kind) for kind in KINDS)

    assert valkey.pid != redis_server.pid
    assert valkey.port != redis_server.port
    assert valkey.version() != redis_server.version()


@pytest.mark.no_cluster("a cluster has six pids (tests/cluster/ checks them)")
def test_redis_client_decodes_and_sees_the_backend(
    redis_client: redis.Redis, backend: PrivateServer, queue_name: str
) -> None:
    redis_client.set(queue_name, "ü")
    assert redis_client.get(queue_name) == "ü"
    assert redis_client.info("server")["process_id"] == backend.pid
    redis_client.delete(queue_name)


def test_queue_name_is_a_valid_queue_name(queue_name: str) -> None:
    assert check_name("queue", queue_name) == queue_name
    assert queue_name.startswith("t-test_queue_name_is_a_valid_queue_name-")


@pytest.mark.parametrize("label", ["x" * 300, "a b/c[d]{e}é"])
def test_queue_name_is_sanitised_and_bounded(queue_name: str, label: str) -> None:
    assert check_name("queue", queue_name) == queue_name
    assert len(queue_name) <= 128


@pytest.mark.parametrize("kind", KINDS)
def test_kill_and_restart_keep_the_port_and_lose_unpersisted_data(
    server_factory: ServerFactory, kind: str
) -> None:
    server = server_factory(kind)
    port, first_pid = server.port, server.pid
    with server.client() as client:
        client.set("k", "v")

    server.kill()
    assert server.pid is None and not server.ping()
    server.restart()

    assert server.port == port and server.pid not in (None, first_pid)
    with server.client() as client:
        assert client.get("k") is None  # save "" and appendonly no


@pytest.mark.parametrize("kind", KINDS)
def test_aof_can_be_enabled_to_survive_a_kill(server_factory: ServerFactory, kind: str) -> None:
    server = server_factory(kind, {"appendonly": "yes", "appendfsync": "always"})
    with server.client() as client:
        client.set("k", "kept")

    server.kill()
    server.start()

    with server.client() as client:
        assert client.get("k") == "kept"


def test_stop_is_graceful_and_restart_reuses_the_directory(server_factory: ServerFactory) -> None:
    server = server_factory("valkey", {"appendonly": "yes"})
    with server.client() as client:
        client.set("k", "flushed on shutdown")

    server.restart()

    with server.client() as client:
        assert client.get("k") == "flushed on shutdown"


def test_pause_makes_the_server_silent_until_resume(server_factory: ServerFactory) -> None:
    server = server_factory("valkey")
    impatient = redis.Redis.from_url(server.url, socket_timeout=0.3, retry=Retry(NoBackoff(), 0))
    try:
        assert impatient.ping()
        server.pause()
        with pytest.raises(redis.TimeoutError):
            impatient.ping()
        server.resume()
        assert server.ping()
    finally:
        impatient.close()
