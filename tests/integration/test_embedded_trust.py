"""What the embedded server trusts (issue 14, rows 2 and 3): only its own pid,
its own private data directory, its own socket; files it writes are private.

Each test plants what another user or a stale run could leave behind and checks
that nothing of it is followed, signalled or used.
"""

from __future__ import annotations

import os
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from echomq.embedded import EmbeddedServer
from echomq.errors import ServerError
from servers import PrivateServer, ServerFactory


@pytest.fixture
def home() -> Iterator[Path]:
    """A fresh directory (short path: the socket must fit AF_UNIX) for one test."""
    with tempfile.TemporaryDirectory(prefix="emq-") as path:
        yield Path(path)


def test_a_stale_pid_file_naming_another_valkey_is_not_signalled(
    embedded: EmbeddedServer, server_factory: ServerFactory
) -> None:
    other: PrivateServer = server_factory("valkey")
    assert other.pid is not None and other.ping()
    embedded.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    embedded.pid_path.write_text(f"{other.pid}\n", encoding="ascii")
    assert embedded.status()["pid"] is None  # not ours: its command line names another socket
    assert embedded.stop() is False
    assert other.ping(), "stop() shut down a server that is not the embedded one"


def test_the_real_server_is_still_recognised_by_its_pid_file(embedded: EmbeddedServer) -> None:
    embedded.ensure_running()
    pid = embedded.status()["pid"]
    assert pid is not None
    embedded.socket_path.unlink()  # the socket gone: only the pid file names it now
    assert embedded.status()["pid"] == pid
    assert embedded.stop() is True
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702])
def test_a_data_dir_others_may_write_is_refused(home: Path, mode: int) -> None:
    data = home / "shared"
    data.mkdir()
    data.chmod(mode)
    server = EmbeddedServer(data)
    with pytest.raises(ServerError, match="group or others may write to it") as info:
        server.ensure_running()
    assert "\n" not in str(info.value)  # one line for the CLI
    assert not server.config_path.exists() and not server.socket_path.exists()


def test_a_missing_data_dir_is_created_private(home: Path) -> None:
    server = EmbeddedServer(home / "new" / "echomq")
    try:
        server.ensure_running()
        assert stat.S_IMODE(server.data_dir.stat().st_mode) == 0o700
    finally:
        server.stop()


def test_the_server_files_are_private(embedded: EmbeddedServer) -> None:
    aof = embedded.data_dir / "appendonlydir"
    aof.mkdir(mode=0o755, parents=True)  # as an older version left them
    embedded.log_path.write_text("old log\n", encoding="utf-8")
    embedded.log_path.chmod(0o644)
    aof.chmod(0o755)
    embedded.data_dir.chmod(0o700)
    old = os.umask(0o022)  # a usual login umask: files would be 0644 without our own
    try:
        embedded.ensure_running()
    finally:
        os.umask(old)
    files = [embedded.config_path, embedded.log_path, embedded.pid_path]
    files += list((embedded.data_dir / "appendonlydir").iterdir())
    assert len(files) > 3
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, f"{path} is not private"


def test_a_planted_config_symlink_is_replaced_not_followed(embedded: EmbeddedServer) -> None:
    embedded.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    victim = embedded.data_dir.parent / f"{embedded.data_dir.name}-victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    try:
        embedded.config_path.symlink_to(victim)
        embedded.ensure_running()
        assert victim.read_text(encoding="utf-8") == "precious\n"
        assert not embedded.config_path.is_symlink()
        assert "unixsocket" in embedded.config_path.read_text(encoding="utf-8")
    finally:
        victim.unlink()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can plant a socket owned by another uid")
def test_a_socket_owned_by_another_uid_is_never_used(embedded: EmbeddedServer) -> None:
    embedded.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    foreign = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        foreign.bind(str(embedded.socket_path))
        foreign.listen(1)
        os.chown(embedded.socket_path, 4242, -1)
        with pytest.raises(ServerError, match="belongs to uid 4242"):
            embedded.ensure_running()
        with pytest.raises(ServerError, match="belongs to uid 4242"):
            embedded.stop()
        foreign.settimeout(0.5)
        with pytest.raises(TimeoutError):
            foreign.accept()  # nobody connected to it
    finally:
        foreign.close()
        embedded.socket_path.unlink(missing_ok=True)
