"""A private PostgreSQL cluster for the tests: Debian's ``postgresql`` binaries,
``initdb`` in a temporary directory, ``postgres`` on a free 127.0.0.1 port.

Why: the outbox (echomq.outbox) is proven against a real PostgreSQL, as the
queue is proven against real Valkey. The machine's own PostgreSQL (port 5432)
is never touched: the cluster here has its own data directory, its own port
and its socket in its own directory, and is killed when the session ends.

``initdb`` refuses to run as root, so as root the cluster belongs to the
``postgres`` user (``runuser``); anyone else runs it as themselves. Trust
authentication on loopback only: the tests connect as the superuser
``postgres`` with a password all the same, so the relay's url carries one
(and the tests can check that it is never printed).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

#: where Debian puts each major version's server binaries
PG_ROOT = Path("/usr/lib/postgresql")
INSTALL = "Debian: apt-get install postgresql (the service need not run)"
PASSWORD = "s3cret-pg"
START_TIMEOUT = 30.0
_POLL = 0.05


def pg_bin() -> Path | None:
    """The directory holding initdb and postgres (the newest major), or None."""
    found = [
        path / "bin"
        for path in PG_ROOT.glob("*")
        if (path / "bin" / "initdb").exists() and (path / "bin" / "postgres").exists()
    ]
    return max(
        found, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0, default=None
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrivatePostgres:
    """One PostgreSQL cluster in its own temporary directory (``start``/``stop``)."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="emq-pg-"))
        self.data = self.root / "data"
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._as_postgres = os.getuid() == 0

    def _command(self, *args: str) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *args] if self._as_postgres else list(args)

    def start(self) -> None:
        if self._as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
        (self.root / "pw").write_text(PASSWORD + "\n", encoding="utf-8")
        if self._as_postgres:
            shutil.chown(self.root / "pw", "postgres", "postgres")
        subprocess.run(
            self._command(
                str(self.bin_dir / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "--auth=scram-sha-256",
                f"--pwfile={self.root / 'pw'}",
                "-E",
                "UTF8",
                "--no-sync",
            ),
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=120,
        )
        self.port = _free_port()
        log = (self.root / "postgres.log").open("ab")
        self._process = subprocess.Popen(
            self._command(
                str(self.bin_dir / "postgres"),
                "-D",
                str(self.data),
                "-p",
                str(self.port),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                f"unix_socket_directories={self.root}",
                "-c",
                "fsync=off",
                "-c",
                "max_connections=200",
            ),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(f"postgres exited on start:\n{self.log_tail()}")
            ready = subprocess.run(
                [str(self.bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
            )
            if ready.returncode == 0:
                return
            time.sleep(_POLL)
        self.stop()
        raise RuntimeError(f"postgres did not start within {START_TIMEOUT} s")

    @property
    def process_group(self) -> int | None:
        """The process group of the cluster (runuser, postgres and its backends)."""
        return None if self._process is None else self._process.pid

    def url(self, database: str = "postgres") -> str:
        """The SQLAlchemy url (psycopg 3) of ``database``, with the password."""
        return f"postgresql+psycopg://postgres:{PASSWORD}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A fresh database on this cluster; its url."""
        import psycopg

        with psycopg.connect(
            f"host=127.0.0.1 port={self.port} user=postgres password={PASSWORD} dbname=postgres",
            autocommit=True,
        ) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def log_tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError):
            text = (self.root / "postgres.log").read_text(encoding="utf-8", errors="replace")
            return "\n".join(text.splitlines()[-lines:])
        return ""

    def stop(self) -> None:
        """Kill the server (its process group: runuser and postgres's children) and
        remove the directory."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(10)
        shutil.rmtree(self.root, ignore_errors=True)
