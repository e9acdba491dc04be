"""A watchdog that stops a private server when the process that started it dies.

The testing kit's Valkey is a daemon (it outlives the process that starts
it), so a test run that is killed (``kill -9``, a CI timeout) would leave it
running. ``watch(server)`` starts this module as a small process of its own
session; it polls its parent's pid and, once the parent is gone (the watchdog
was re-parented), stops the server (SIGTERM, then SIGKILL) and deletes the
server's directory. It also ends by itself when the server stops first.

``python -m echomq.watchdog PARENT_PID SERVER_PID DIRECTORY``
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

#: how often the watchdog looks at its parent (seconds).
POLL = 0.2
#: how long a SIGTERM'd server may take before SIGKILL (seconds).
TERM_GRACE = 5.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stop(pid: int) -> None:
    with_signal = signal.SIGTERM
    deadline = time.monotonic() + TERM_GRACE
    while _alive(pid):
        try:
            os.kill(pid, with_signal)
        except ProcessLookupError:
            return
        if time.monotonic() > deadline:
            with_signal = signal.SIGKILL
        time.sleep(0.05)


def run(parent: int, server: int, directory: str) -> None:
    """Wait while ``parent`` lives; then stop ``server`` and delete ``directory``."""
    while os.getppid() == parent:
        if not _alive(server):
            return  # stopped by its owner: nothing to do
        time.sleep(POLL)
    _stop(server)
    shutil.rmtree(directory, ignore_errors=True)


def watch(server_pid: int, directory: str) -> subprocess.Popen[bytes]:
    """Start a watchdog for ``server_pid`` on behalf of this process; the caller
    terminates it (``proc.terminate(); proc.wait()``) once it stopped the server."""
    return subprocess.Popen(
        [sys.executable, "-m", "echomq.watchdog", str(os.getpid()), str(server_pid), directory],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C to the test run's group is not its end
    )


if __name__ == "__main__":
    run(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
