"""Url resolution and validation (DESIGN §6), none of which needs a server."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis.asyncio.cluster

from echomq.connection import (
    URL_ENV,
    async_client,
    is_cluster_url,
    normalize_url,
    resolve_url,
    socket_timeout_of,
    sync_client,
)
from echomq.embedded import HOME_ENV, EmbeddedServer, default_home
from echomq.errors import ServerError


def test_the_url_argument_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(URL_ENV, "redis://env:6379/0")

    assert resolve_url("redis://arg:6379/1") == "redis://arg:6379/1"


def test_the_environment_comes_next(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(URL_ENV, " redis://env:6379/0 ")

    assert resolve_url(None) == "redis://env:6379/0"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://h:1/0", "redis://h:1/0"),
        ("rediss://h:1/0", "rediss://h:1/0"),
        ("unix:///tmp/x.sock", "unix:///tmp/x.sock"),
        ("valkey://h:1/2", "redis://h:1/2"),
        ("valkeys://h:1", "rediss://h:1"),
        ("VALKEY://h:1", "redis://h:1"),
    ],
)
def test_normalize_accepts_redis_urls_and_valkey_aliases(url: str, expected: str) -> None:
    assert normalize_url(url) == expected


@pytest.mark.parametrize(
    ("url", "node"),
    [
        ("redis+cluster://h:7000", "redis://h:7000"),
        ("valkey+cluster://h:7000/0", "redis://h:7000/0"),
        ("rediss+cluster://:pw@h:7000", "rediss://:pw@h:7000"),
        ("VALKEYS+cluster://h:7000", "rediss://h:7000"),
    ],
)
def test_cluster_urls_name_one_node_of_the_cluster(url: str, node: str) -> None:
    assert is_cluster_url(url)
    assert normalize_url(url) == node


@pytest.mark.parametrize("url", ["redis://h:7000", "unix:///tmp/x.sock", "valkey://h:1"])
def test_other_urls_are_not_cluster_urls(url: str) -> None:
    assert not is_cluster_url(url)


@pytest.mark.parametrize(
    ("url", "why"),
    [("redis+cluster://h:7000/2", "only database 0"), ("redis+cluster:///tmp/x.sock", "host:port")],
)
def test_cluster_urls_with_a_database_or_no_host_are_refused(url: str, why: str) -> None:
    with pytest.raises(ServerError, match=why):
        normalize_url(url)


@pytest.mark.parametrize("url", ["http://h:1", "localhost:6379", "", "/tmp/x.sock"])
def test_other_urls_are_refused_with_the_allowed_schemes(url: str) -> None:
    with pytest.raises(ServerError, match="redis://"):
        normalize_url(url)


def test_default_home_prefers_echomq_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "emq"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))

    assert default_home() == tmp_path / "emq"


def test_default_home_then_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(HOME_ENV)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))

    assert default_home() == tmp_path / "xdg" / "echomq"


def test_default_home_then_local_share(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(HOME_ENV)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))

    assert default_home() == tmp_path / ".local" / "share" / "echomq"


def test_the_embedded_url_is_percent_encoded(tmp_path: Path) -> None:
    server = EmbeddedServer(tmp_path / "with space")

    assert server.url == f"unix://{tmp_path}/with%20space/valkey.sock"


async def test_an_async_cluster_client_is_made_without_connecting() -> None:
    client = async_client("valkey+cluster://127.0.0.1:1", socket_timeout=3.0)
    assert isinstance(client, redis.asyncio.cluster.RedisCluster)
    assert socket_timeout_of(client) == 3.0  # the worker bounds its BLPOP by it


def test_a_sync_cluster_client_without_a_reachable_node_is_a_server_error() -> None:
    with pytest.raises(ServerError, match="cannot reach the cluster at 'redis\\+cluster://"):
        sync_client("redis+cluster://127.0.0.1:1")
