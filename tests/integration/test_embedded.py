"""The embedded Valkey (DESIGN §6): started once, shared, detached, persistent.

Every test runs in its own temporary ECHOMQ_HOME (the ``embedded`` fixture),
never the user's data directory, and the fixture stops the server afterwards.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from echomq.embedded import EmbeddedServer
from echomq.errors import ServerError

# a separate interpreter that starts (or finds) the server and prints its pid
STARTER = (
    "import sys; from echomq.embedded import EmbeddedServer; "
    "s = EmbeddedServer(sys.argv[1]); s.ensure_running(); print(s.status()['pid'])"
)


def server_pids(socket_path: Path) -> list[int]:
    """Live (non-zombie) processes whose title names this socket: the servers on it."""
    pids = []
    needle = os.fsencode(socket_path)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if needle in cmdline and b"valkey-server" in cmdline and state not in ("Z", "X"):
            pids.append(int(entry.name))
    return pids


def wait_for_exit(pid: int, timeout: float = 10.0) -> None:
    """Bounded poll until ``pid`` is gone or a zombie (nobody may reap the daemon)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.02)
    raise AssertionError(f"pid {pid} still alive after {timeout}s")


def client_for(server: EmbeddedServer) -> redis.Redis:
    return redis.Redis.from_url(server.url, decode_responses=True)


def test_start_gives_a_unix_url_that_answers(embedded: EmbeddedServer) -> None:
    url = embedded.ensure_running()

    assert url == f"unix://{embedded.socket_path}"
    assert embedded.socket_path.parent == embedded.data_dir
    with client_for(embedded) as client:
        assert client.ping()
    assert stat.S_IMODE(embedded.socket_path.stat().st_mode) == 0o700
    assert stat.S_IMODE(embedded.data_dir.stat().st_mode) == 0o700


def test_server_listens_on_no_tcp_port(embedded: EmbeddedServer) -> None:
    embedded.ensure_running()
    with client_for(embedded) as client:
        assert client.config_get("port") == {"port": "0"}
        assert client.config_get("appendonly") == {"appendonly": "yes"}


def test_second_ensure_running_reuses_the_server(embedded: EmbeddedServer) -> None:
    embedded.ensure_running()
    first = embedded.status()["pid"]

    again = EmbeddedServer(embedded.data_dir)  # as another process would see it
    assert again.ensure_running() == embedded.url
    assert again.status()["pid"] == first
    assert server_pids(embedded.socket_path) == [first]


def test_concurrent_starting_threads_end_with_one_server(embedded: EmbeddedServer) -> None:
    urls: list[str] = []
    barrier = threading.Barrier(8)

    def start() -> None:
        barrier.wait()
        urls.append(EmbeddedServer(embedded.data_dir).ensure_running())

    threads = [threading.Thread(target=start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert urls == [embedded.url] * 8
    assert len(server_pids(embedded.socket_path)) == 1


def test_concurrent_starting_processes_end_with_one_server(embedded: EmbeddedServer) -> None:
    starters = [
        subprocess.Popen(
            [sys.executable, "-c", STARTER, str(embedded.data_dir)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    pids = {int(starter.communicate(timeout=30)[0]) for starter in starters}

    assert all(starter.returncode == 0 for starter in starters)
    assert len(pids) == 1
    assert server_pids(embedded.socket_path) == list(pids)


def test_server_outlives_the_process_that_started_it(embedded: EmbeddedServer) -> None:
    done = subprocess.run(
        [sys.executable, "-c", STARTER, str(embedded.data_dir)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )

    assert embedded.is_running()
    assert embedded.status()["pid"] == int(done.stdout)


def test_status_reports_the_running_server(embedded: EmbeddedServer) -> None:
    embedded.ensure_running()

    status = embedded.status()

    assert status["running"] is True
    assert status["pid"] == server_pids(embedded.socket_path)[0]
    assert status["url"] == embedded.url
    assert status["socket"] == str(embedded.socket_path)
    assert status["data_dir"] == str(embedded.data_dir)
    assert status["log"] == str(embedded.log_path)
    assert Path(status["log"]).is_file()
    assert status["version"] is not None and status["version"].startswith("8.1.")
    assert status["used_memory"] is not None and status["used_memory"] > 0
    assert status["used_memory_human"]
    assert status["uptime_seconds"] is not None and status["uptime_seconds"] >= 0


def test_status_of_a_stopped_server(embedded: EmbeddedServer) -> None:
    status = embedded.status()

    assert status["running"] is False
    assert status["pid"] is None
    assert status["version"] is None
    assert status["used_memory"] is None
    assert status["data_dir"] == str(embedded.data_dir)


def test_stop_shuts_the_server_down(embedded: EmbeddedServer) -> None:
    embedded.ensure_running()
    pid = embedded.status()["pid"]
    assert pid is not None

    assert embedded.stop() is True

    wait_for_exit(pid, timeout=1.0)  # stop() returned only after the exit
    assert not embedded.is_running()
    assert not embedded.socket_path.exists()
    assert not embedded.pid_path.exists()
    assert embedded.stop() is False


def test_data_persists_across_stop_and_start(embedded: EmbeddedServer) -> None:
    embedded.ensure_running()
    first_pid = embedded.status()["pid"]
    with client_for(embedded) as client:
        client.set("persisted", "across restarts")

    embedded.stop()
    embedded.ensure_running()

    assert embedded.status()["pid"] != first_pid
    with client_for(embedded) as client:
        assert client.get("persisted") == "across restarts"


def test_a_crashed_server_is_replaced(embedded: EmbeddedServer) -> None:
    embedded.ensure_running()
    dead = embedded.status()["pid"]
    assert dead is not None
    os.kill(dead, signal.SIGKILL)
    wait_for_exit(dead)
    assert embedded.socket_path.exists() and embedded.pid_path.exists()  # left behind

    embedded.ensure_running()

    assert embedded.status()["pid"] not in (None, dead)
    assert server_pids(embedded.socket_path) == [embedded.status()["pid"]]


@pytest.mark.parametrize("content", ["not a pid\n", f"{os.getpid()}\n", "999999999\n"])
def test_a_stale_pid_file_is_ignored(embedded: EmbeddedServer, content: str) -> None:
    # garbage, a live process that is not valkey (this test!), and a pid that never existed
    embedded.data_dir.mkdir(parents=True, exist_ok=True)
    embedded.pid_path.write_text(content)

    embedded.ensure_running()

    assert embedded.status()["pid"] not in (None, os.getpid())


@pytest.fixture
def deep_home() -> Iterator[EmbeddedServer]:
    """A data dir too deep for an AF_UNIX socket path."""
    with tempfile.TemporaryDirectory(prefix="emq-") as root:
        server = EmbeddedServer(Path(root, "d" * 60, "e" * 60))
        try:
            yield server
        finally:
            server.stop()


def test_a_deep_data_dir_gets_a_short_socket_path(deep_home: EmbeddedServer) -> None:
    deep_home.ensure_running()

    assert deep_home.socket_path.parent == Path(f"/tmp/echomq-{os.getuid()}")
    assert len(os.fsencode(deep_home.socket_path)) < 104
    assert EmbeddedServer(deep_home.data_dir).socket_path == deep_home.socket_path
    with client_for(deep_home) as client:
        assert client.ping()


def test_a_server_that_cannot_start_raises_with_the_log_tail(tmp_path: Path) -> None:
    home = tmp_path / "home"
    server = EmbeddedServer(home, start_timeout=5.0)
    server.socket_path.mkdir(parents=True)  # a directory where the socket must go

    try:
        with pytest.raises(ServerError) as caught:
            server.ensure_running()
    finally:
        server.stop()

    message = str(caught.value)
    assert str(home) in message
    assert "last lines of" in message
    assert "socket" in message.lower()


def test_an_unusable_data_dir_raises_server_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")

    with pytest.raises(ServerError, match="data dir"):
        EmbeddedServer(blocker / "home").ensure_running()


def test_a_silent_server_is_reported_and_can_still_be_stopped(embedded: EmbeddedServer) -> None:
    embedded.start_timeout = 1.0
    embedded.ensure_running()
    pid = embedded.status()["pid"]
    assert pid is not None
    embedded.socket_path.unlink()  # the server lives on, but nobody can reach it

    with pytest.raises(ServerError, match=f"pid {pid} is alive but silent"):
        embedded.ensure_running()
    status = embedded.status()
    assert status["running"] is False and status["pid"] == pid  # known by its pid file

    assert embedded.stop() is True  # no socket for SHUTDOWN: SIGTERM
    wait_for_exit(pid, timeout=1.0)
