"""Long-running commands (``--follow``, ``--watch``) handle their own stop signals.

A process started with SIGINT ignored (``nohup``, ``cmd &`` in a
non-interactive shell) inherits that: Ctrl-C, or a supervisor's SIGINT, would
never end it. :func:`stoppable` installs handlers for SIGINT and SIGTERM that
raise ``KeyboardInterrupt`` in the main thread for as long as the command runs,
whatever the process inherited, and puts the previous handlers back after.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

#: the signals that end a following or watching command.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextmanager
def stoppable() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise KeyboardInterrupt (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return
    previous = {sig: signal.signal(sig, _interrupt) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
