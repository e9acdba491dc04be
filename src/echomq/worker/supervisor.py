"""The process supervisor behind ``echomq worker --processes N``.

It starts N worker processes (each its own session, so Ctrl-C reaches only the
supervisor), restarts one that exits (with backoff if it keeps dying at
start), and turns SIGINT/SIGTERM into one graceful stop of each: a SIGTERM,
then a kill for any process still running after ``drain_timeout`` seconds.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import FrameType

log = logging.getLogger("echomq.cli.worker")

#: a process that dies sooner than this (seconds) is restarted with backoff …
QUICK_DEATH = 2.0
#: … after 1 s, 2 s, 4 s, … up to this.
RESTART_BACKOFF_MAX = 30.0


@dataclass(slots=True)
class Slot:
    """One supervised worker process and its restart history."""

    index: int
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    quick_deaths: int = 0
    restart_at: float = 0.0
    restarts: int = 0


class Supervisor:
    """Keeps N worker processes running; turns SIGINT/SIGTERM into one graceful stop of each."""

    def __init__(
        self, command: list[str], env: Mapping[str, str], processes: int, drain_timeout: float
    ) -> None:
        self.command = command
        self.env = dict(env)
        self.slots = [Slot(i) for i in range(processes)]
        self.drain_timeout = drain_timeout
        self.stop_signal: int | None = None

    def _spawn(self, slot: Slot) -> None:
        # A session of its own: Ctrl-C reaches only the supervisor, which sends one SIGTERM
        # (a worker takes a second signal as "stop at once").
        slot.process = subprocess.Popen(self.command, env=self.env, start_new_session=True)
        slot.started = time.monotonic()
        log.info("worker process %d started (pid %d)", slot.index, slot.process.pid)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stop_signal = self.stop_signal or signum

    def _check(self, slot: Slot, now: float) -> None:
        """Restart a process that exited; back off if it keeps dying at start."""
        process = slot.process
        if process is None:
            if now >= slot.restart_at:
                self._spawn(slot)
            return
        code = process.poll()
        if code is None:
            return
        lived = now - slot.started
        slot.quick_deaths = slot.quick_deaths + 1 if lived < QUICK_DEATH else 0
        delay = min(RESTART_BACKOFF_MAX, 0.5 * 2**slot.quick_deaths) if slot.quick_deaths else 0
        log.warning(
            "worker process %d (pid %d) exited with %s after %.1f s; restarting in %.1f s",
            slot.index,
            process.pid,
            code,
            lived,
            delay,
        )
        slot.process, slot.restart_at = None, now + delay
        slot.restarts += 1

    def _drain(self) -> int:
        """Stop every process gracefully; kill the ones still running after the grace period."""
        assert self.stop_signal is not None
        log.info(
            "%s: stopping %d worker processes gracefully",
            signal.Signals(self.stop_signal).name,
            len(self.slots),
        )
        live = [slot.process for slot in self.slots if slot.process is not None]
        for process in live:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.drain_timeout
        worst = 0
        for process in live:
            try:
                code = process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error(
                    "killing worker pid %d: still running after the grace period", process.pid
                )
                process.kill()
                code = process.wait()
            worst = max(worst, 0 if code in (0, -signal.SIGTERM) else 1)
        return worst

    def run(self, on_tick: Callable[[], None] | None = None) -> int:
        """Supervise until SIGINT/SIGTERM; returns the exit status (0 if all drained cleanly)."""
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            next_tick = time.monotonic() + 1.0
            while self.stop_signal is None:
                now = time.monotonic()
                for slot in self.slots:
                    self._check(slot, now)
                if on_tick is not None and now >= next_tick:
                    on_tick()
                    next_tick = now + 1.0
                time.sleep(0.1)
            code = self._drain()
            if on_tick is not None:
                on_tick()  # the last status line, after every process has stopped
            return code
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
