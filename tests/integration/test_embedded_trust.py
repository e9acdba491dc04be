"""What the embedded server trusts (issue 14, rows 2 and 3): only its own pid,
its own private data directory, its own socket; files it writes are private.

Each test plants what another user or a stale run could leave behind and checks
that nothing of it is followed, signalled or used.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from echomq.embedded import EmbeddedServer
from echomq.errors import ServerError
from prerequisites import missing
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


#: the check of a socket owned by another uid, run as a child process (its docstring)
FOREIGN_SOCKET_CHECK = Path(__file__).with_name("foreign_socket.py")
#: a user namespace with a second uid mapped (newuidmap, a range in /etc/subuid)
SECOND_UID_NAMESPACE = ("unshare", "--user", "--map-root-user", "--map-auto")


def _runner_that_may_own_another_uid() -> list[str] | None:
    """How to start a process that may give a file to a uid it is not: as it is
    when root; else in a user namespace that maps a second uid; None if neither."""
    if os.geteuid() == 0:
        return []
    if shutil.which("unshare") is None or shutil.which("newuidmap") is None:
        return None
    probe = subprocess.run([*SECOND_UID_NAMESPACE, "true"], capture_output=True, timeout=10)
    return list(SECOND_UID_NAMESPACE) if probe.returncode == 0 else None


def test_a_socket_owned_by_another_uid_is_never_used() -> None:
    """Runs as root (CI) and as any user whose system maps it a subordinate uid
    range; planting a socket that really belongs to another uid needs one of them."""
    runner = _runner_that_may_own_another_uid()
    if runner is None:
        missing(
            "a second uid to plant a socket as (root, or a user namespace mapping one)",
            "run as root, or apt-get install uidmap and give this user a range in /etc/subuid",
        )
    result = subprocess.run(
        [*runner, sys.executable, str(FOREIGN_SOCKET_CHECK)],
        capture_output=True,
        text=True,
        timeout=60,  # subprocess.run kills the child if it runs longer
    )
    assert result.returncode == 0, result.stdout + result.stderr
