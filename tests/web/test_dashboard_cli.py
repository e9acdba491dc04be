"""``echomq dashboard`` as a user runs it: a real process, then its errors in one line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from echomq import SyncQueue
from web.webtools import TOKEN

START_TIMEOUT = 15.0

pytestmark = pytest.mark.parametrize("backend", ["valkey"], indirect=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def dashboard_cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "echomq.cli", "dashboard", *args]


@pytest.fixture
def served(backend_url: str, sq: SyncQueue) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    sq.add("x", group="acme")
    port = free_port()
    env = {**os.environ, "ECHOMQ_DASHBOARD_TOKEN": TOKEN}
    proc = subprocess.Popen(
        dashboard_cli("--url", backend_url, "--port", str(port)),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                httpx.get(base + "/api/info", timeout=1)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
                assert time.monotonic() < deadline, "the dashboard did not start"
                time.sleep(0.05)
        yield base, proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_command_serves_with_the_token_from_the_environment(
    served: tuple[str, subprocess.Popen[str]], sq: SyncQueue
) -> None:
    base, proc = served
    assert httpx.get(base + "/api/info").json()["actions"] is True
    headers = {"X-EchoMQ-Token": TOKEN}
    reply = httpx.post(
        f"{base}/api/queues/{sq.name}/weights", headers=headers, json={"group": "acme", "weight": 2}
    )
    assert reply.status_code == 200
    assert sq.weights() == {"acme": 2}
    # a DNS-rebound host name is refused when bound to loopback
    assert httpx.get(base + "/api/info", headers={"Host": "evil.example"}).status_code == 400
    proc.terminate()
    out, _ = proc.communicate(timeout=10)
    assert "actions enabled" in out and TOKEN not in out  # never echoed (issue 14)
    assert "set_weight" in out  # the audit line on stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--url", "redis://127.0.0.1:1/0"], "cannot reach the server"),
        (["--url", "ftp://nowhere"], "unsupported server url"),
        (["--queue", "no{braces}"], "invalid queue name"),
    ],
)
def test_user_errors_are_one_line_and_exit_1(
    args: list[str], message: str, backend_url: str
) -> None:
    full = ["--url", backend_url, *args] if "--url" not in args else args
    done = subprocess.run(
        dashboard_cli(*full, "--port", str(free_port())), capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 1
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


def test_a_busy_port_is_a_one_line_error(backend_url: str) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            dashboard_cli("--url", backend_url, "--port", str(port)),
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr


def test_the_token_file_enables_actions_and_is_never_printed(
    backend_url: str, sq: SyncQueue, tmp_path: Path
) -> None:
    sq.add("x")  # the queue must exist for its weights to be set
    secret = tmp_path / "token"
    secret.write_text(TOKEN + "\n", encoding="utf-8")
    secret.chmod(0o600)
    port = free_port()
    proc = subprocess.Popen(
        dashboard_cli("--url", backend_url, "--port", str(port), "--token-file", str(secret)),
        env={k: v for k, v in os.environ.items() if k != "ECHOMQ_DASHBOARD_TOKEN"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                info = httpx.get(base + "/api/info", timeout=1).json()
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, "did not start"
                time.sleep(0.05)
        assert info["actions"] is True
        url = f"{base}/api/queues/{sq.name}/weights"
        body = {"group": "acme", "weight": 5}
        assert httpx.post(url, json=body, headers={"X-EchoMQ-Token": TOKEN}).status_code == 200
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    assert "actions enabled" in out and TOKEN not in out


@pytest.mark.parametrize(
    ("mode", "content", "extra", "message"),
    [
        (0o644, TOKEN, [], "is open to other users (mode 0644); make it private: chmod 600"),
        (0o600, "\n", [], "is empty; put the token on its first line"),
        (0o600, TOKEN, ["--token", "other"], "give --token-file or --token"),
    ],
    ids=["readable-by-others", "empty", "both"],
)
def test_bad_token_files_are_one_line_errors(
    backend_url: str, tmp_path: Path, mode: int, content: str, extra: list[str], message: str
) -> None:
    secret = tmp_path / "token"
    secret.write_text(content, encoding="utf-8")
    secret.chmod(mode)
    done = subprocess.run(
        dashboard_cli(
            "--url", backend_url, "--port", str(free_port()), "--token-file", str(secret), *extra
        ),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 1
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert TOKEN not in done.stderr + done.stdout


def test_a_password_in_the_url_is_not_echoed(backend_url: str) -> None:
    done = subprocess.run(
        dashboard_cli("--url", "ftp://user:hunter2@nowhere:1", "--port", str(free_port())),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 1 and "unsupported server url" in done.stderr
    assert "hunter2" not in done.stderr and "user:***@nowhere" in done.stderr


def test_a_token_in_argv_gets_a_warning_and_is_not_echoed(backend_url: str) -> None:
    done = subprocess.run(
        dashboard_cli("--url", "redis://127.0.0.1:1/0", "--token", TOKEN),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 1 and "cannot reach the server" in done.stderr
    assert "warning: --token is visible to every local user (ps)" in done.stderr
    assert TOKEN not in done.stderr + done.stdout
