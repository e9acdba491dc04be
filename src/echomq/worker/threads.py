"""Daemon threads for sync handlers, reused while idle.

Why not ``ThreadPoolExecutor``: its threads are joined at interpreter exit,
so one sync handler stuck past its timeout (Python cannot stop a thread)
would keep a worker process from exiting after SIGTERM; and in a fixed-size
pool such a thread would take the place of the next job. Here a thread that
overruns is simply left behind: the next job gets another thread, and the
process can exit while it still runs.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

_Work = tuple[Callable[[], Any], "Future[Any]"] | None


class DaemonThreads:
    """Runs blocking calls on daemon threads; keeps up to ``keep`` idle ones for reuse."""

    def __init__(self, keep: int, name: str = "echomq-handler") -> None:
        self._keep = keep
        self._name = name
        self._work: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for work, not yet promised to a call
        self._threads = 0
        self._closed = False

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run ``fn()`` (in a copy of the caller's context) on a daemon thread."""
        future: Future[Any] = Future()
        run = contextvars.copy_context().run
        with self._lock:
            if self._closed:
                raise RuntimeError("DaemonThreads is closed")
            spawn = self._idle == 0
            if spawn:
                self._threads += 1
            else:
                self._idle -= 1  # that thread will take this call
        self._work.put((lambda: run(fn), future))
        if spawn:
            number = self._threads
            threading.Thread(target=self._serve, name=f"{self._name}-{number}", daemon=True).start()
        return future

    def close(self) -> None:
        """Let the idle threads end; threads still running end when their call returns."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, 0
        for _ in range(idle):
            self._work.put(None)

    def _serve(self) -> None:
        while True:
            work = self._work.get()
            if work is None:
                return
            fn, future = work
            result: Any = None
            error: BaseException | None = None
            if future.set_running_or_notify_cancel():
                try:
                    result = fn()
                except BaseException as exc:  # handed to the awaiting side
                    error = exc
            # counted idle before the caller learns the result, so its next call reuses us
            stay = self._back_to_idle()
            if error is not None:
                future.set_exception(error)
            elif future.running():
                future.set_result(result)
            del work, fn, future, result, error
            if not stay:
                return

    def _back_to_idle(self) -> bool:
        with self._lock:
            if self._closed or self._threads > self._keep:
                self._threads -= 1
                return False
            self._idle += 1
            return True
