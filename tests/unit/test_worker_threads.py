"""The worker's daemon threads for sync handlers and its retry pauses (no server)."""

from __future__ import annotations

import contextvars
import threading
import time

import pytest

from echomq.worker.resilience import Pauses
from echomq.worker.threads import DaemonThreads

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


def test_idle_threads_are_reused_and_calls_see_the_callers_context() -> None:
    threads = DaemonThreads(keep=2)
    try:
        first = threads.submit(lambda: threading.current_thread()).result(5)
        request_id.set("r-1")
        second, seen = threads.submit(
            lambda: (threading.current_thread(), request_id.get())
        ).result(5)
    finally:
        threads.close()
    assert first is second and first.daemon
    assert seen == "r-1"


def test_a_stuck_call_does_not_hold_up_the_next_one() -> None:
    gate = threading.Event()
    threads = DaemonThreads(keep=1)
    try:
        stuck = threads.submit(lambda: gate.wait(10))
        started = time.monotonic()
        assert threads.submit(lambda: "next").result(5) == "next"
        assert time.monotonic() - started < 1.0 and not stuck.done()
    finally:
        gate.set()
        threads.close()
    assert stuck.result(5) is True


def test_exceptions_reach_the_caller_and_close_refuses_new_work() -> None:
    threads = DaemonThreads(keep=1)

    def boom() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        threads.submit(boom).result(5)
    threads.close()
    with pytest.raises(RuntimeError, match="closed"):
        threads.submit(lambda: None)


def test_pauses_double_up_to_the_cap_and_reset() -> None:
    pauses = Pauses(first=0.1, cap=0.5)
    assert [pauses.next() for _ in range(5)] == [0.1, 0.2, 0.4, 0.5, 0.5]
    pauses.reset()
    assert pauses.next() == 0.1
