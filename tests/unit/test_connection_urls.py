"""Url resolution and validation (DESIGN §6), none of which needs a server."""

from __future__ import annotations

from pathlib import Path

import pytest

from echomq.connection import URL_ENV, is_cluster_url, normalize_url, resolve_url
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


@pytest.mark.parametrize("url", ["redis+cluster://h:7000", "valkey+cluster://h:7000"])
def test_cluster_urls_are_recognised_and_refused_for_now(url: str) -> None:
    assert is_cluster_url(url)
    with pytest.raises(ServerError, match="cluster urls are not supported yet"):
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
