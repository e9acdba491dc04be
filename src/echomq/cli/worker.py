"""``echomq worker module:handlers``: run handlers, in one process or under a supervisor.

One process runs one asyncio :class:`echomq.worker.Worker`; sync handlers run
in its threads, which the GIL limits to one CPU. For CPU-bound handlers
``--processes N`` starts N such worker processes under a supervisor that
restarts a process that dies and forwards SIGINT/SIGTERM, so Ctrl-C (or a
service manager's stop) drains every process gracefully.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

from echomq import connection
from echomq.cli.common import CONTEXT_SETTINGS, fail, open_queue, queue_options
from echomq.engine import QueueStats
from echomq.queue import Queue

if TYPE_CHECKING:  # the runtime import waits until a worker runs: it keeps `echomq` quick
    from echomq.worker import Worker

log = logging.getLogger("echomq.cli.worker")

#: set in a supervised worker process: the supervisor's pid (the child stops if it is gone).
SUPERVISOR_ENV = "ECHOMQ_SUPERVISOR_PID"
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMAT = "%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s"
#: seconds beyond --grace a stopping worker process gets to release leases and exit.
RELEASE_MARGIN = 10.0
_QUICK_DEATH = 2.0  # a process that dies sooner than this is restarted with backoff …
_RESTART_BACKOFF_MAX = 30.0  # … after 1 s, 2 s, 4 s, … up to this


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    """The options a worker process is started with (also passed on to supervised ones)."""

    target: str
    queue: str
    url: str | None
    concurrency: int
    lease: float
    timeout: float | None
    grace: float
    progress: bool
    log_level: str = "info"

    def child_args(self) -> list[str]:
        """Command-line arguments of one supervised process (the url goes by environment)."""
        args = [
            self.target,
            "--queue",
            self.queue,
            "--concurrency",
            str(self.concurrency),
            "--lease",
            repr(self.lease),
            "--grace",
            repr(self.grace),
            "--processes",
            "1",
            "--log-level",
            self.log_level,
        ]
        if self.timeout is not None:
            args += ["--timeout", repr(self.timeout)]
        return args


# -- loading the handlers -------------------------------------------------------


def load_target(spec: str) -> Any:
    """Import ``package.module:attribute`` (attribute defaults to ``handlers``).

    The current directory is importable, as with ``python -m``, so
    ``echomq worker tasks:handlers`` finds ``./tasks.py``.
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name:
        fail(f"worker target {spec!r} is not of the form package.module:handlers")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        fail(f"cannot import {module_name!r} for worker target {spec!r}: {exc}")
    value: Any = module
    for part in (attribute or "handlers").split("."):
        if not hasattr(value, part):
            fail(f"module {module_name!r} has no attribute {attribute or 'handlers'!r}")
        value = getattr(value, part)
    if not isinstance(value, Mapping) and not callable(value):
        fail(
            f"worker target {spec!r} is a {type(value).__name__}: expected a dict of "
            "job name → handler, or a factory taking the Queue"
        )
    return value


def build_worker(target: Any, queue: Queue, settings: WorkerSettings) -> Worker:
    """A Worker from a handlers mapping, or from a factory called with the queue.

    A factory may return a mapping of handlers (the command-line options then
    apply) or a ready Worker (its own options apply).
    """
    from echomq.worker import Worker

    made = target(queue) if callable(target) and not isinstance(target, Mapping) else target
    if isinstance(made, Worker):
        return made
    if not isinstance(made, Mapping) or not made:
        fail(
            f"worker target {settings.target!r} gave {type(made).__name__}: expected a "
            "non-empty dict of job name → handler, or a Worker"
        )
    for name, handler in made.items():
        if not callable(handler):
            fail(f"handler for {name!r} in {settings.target!r} is not callable")
    return Worker(
        queue,
        made,
        concurrency=settings.concurrency,
        lease=settings.lease,
        timeout=settings.timeout,
        grace=settings.grace,
    )


# -- one worker process ---------------------------------------------------------


class ProgressLine:
    """One status line per call: completions per second and the queue's counts."""

    def __init__(self) -> None:
        self._last: tuple[float, int, int] | None = None

    def line(self, stats: QueueStats, label: str) -> str:
        now = time.monotonic()
        done, failed = stats.totals.get("completed", 0), stats.totals.get("failed", 0)
        rate = ""
        if self._last is not None:
            then, done_before, _ = self._last
            rate = f" ({(done - done_before) / max(now - then, 1e-6):.0f}/s)"
        self._last = (now, done, failed)
        c = stats.counts
        return (
            f"{datetime.now():%H:%M:%S} {label} queue {stats.queue}: "
            f"completed {done}{rate} · failed attempts {failed} · active {c['active']} · "
            f"waiting {c['waiting']} · delayed {c['delayed'] + c['failed']} · dead {c['dead']}"
        )


async def _report_progress(queue: Queue, label: str, stopped: asyncio.Event) -> None:
    """A status line every second, and a last one once the worker has stopped."""
    progress = ProgressLine()
    while True:
        try:
            click.echo(progress.line(await queue.stats(), label), err=True)
        except Exception as exc:  # a status line must never stop the worker
            log.warning("status unavailable: %s", exc)
        if stopped.is_set():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopped.wait(), 1.0)


async def _watch_supervisor(worker: Worker, supervisor_pid: int) -> None:
    """Stop when the supervisor is gone (killed without forwarding a signal)."""
    while os.getppid() == supervisor_pid:
        await asyncio.sleep(1.0)
    worker.stop()


async def run_one(settings: WorkerSettings, target: Any) -> None:
    """Run one Worker until SIGINT/SIGTERM (or its supervisor disappears)."""
    queue = Queue(settings.queue, settings.url)
    try:
        await queue.stats()  # an unreachable server is a one-line error, before any work
        worker = build_worker(target, queue, settings)
        stopped = asyncio.Event()
        helpers: list[asyncio.Task[None]] = []
        supervisor = os.environ.get(SUPERVISOR_ENV)
        if supervisor:
            helpers.append(asyncio.create_task(_watch_supervisor(worker, int(supervisor))))
        reporter = None
        if settings.progress:
            label = f"worker {os.getpid()}"
            reporter = asyncio.create_task(_report_progress(queue, label, stopped))
        try:
            await worker.run(install_signals=True)
        finally:
            stopped.set()
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            if reporter is not None:
                await reporter
    finally:
        await queue.close()


# -- the supervisor -------------------------------------------------------------


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

    def __init__(self, settings: WorkerSettings, processes: int, url: str) -> None:
        self.settings = settings
        self.slots = [Slot(i) for i in range(processes)]
        self.command = [sys.executable, "-m", "echomq.cli", "worker", *settings.child_args()]
        self.env = {**os.environ, connection.URL_ENV: url, SUPERVISOR_ENV: str(os.getpid())}
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
        slot.quick_deaths = slot.quick_deaths + 1 if lived < _QUICK_DEATH else 0
        delay = min(_RESTART_BACKOFF_MAX, 0.5 * 2**slot.quick_deaths) if slot.quick_deaths else 0
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
        deadline = time.monotonic() + self.settings.grace + RELEASE_MARGIN
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


def supervise(settings: WorkerSettings, processes: int) -> int:
    """Run ``processes`` worker processes on the queue until SIGINT/SIGTERM."""
    url = connection.resolve_url(settings.url)
    with open_queue(settings.queue, url) as q:
        q.stats()  # fail fast, once, if the server cannot be reached
        supervisor = Supervisor(settings, processes, url)
        progress = ProgressLine()

        def tick() -> None:
            try:
                click.echo(progress.line(q.stats(), f"{processes} processes"), err=True)
            except Exception as exc:  # a status line must never stop the supervisor
                log.warning("status unavailable: %s", exc)

        log.info("supervising %d worker processes on queue %s", processes, settings.queue)
        return supervisor.run(tick if settings.progress else None)


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("target", metavar="MODULE:HANDLERS")
@click.option(
    "--concurrency",
    "-c",
    type=click.IntRange(1, 10_000),
    default=10,
    show_default=True,
    help="Jobs run at once per process.",
)
@click.option(
    "--lease",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="Lease per claimed job; heartbeats renew it.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.001),
    metavar="SECONDS",
    help="Fail a job whose handler runs longer than this.",
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="On shutdown, how long in-flight jobs may still run.",
)
@click.option(
    "--processes",
    "-P",
    type=click.IntRange(1, 1024),
    default=1,
    show_default=True,
    help="Worker processes under one supervisor (for CPU-bound handlers).",
)
@click.option("--progress", is_flag=True, help="Print a one-line status every second (stderr).")
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default="info",
    show_default=True,
    help="Least severe worker log lines shown (stderr).",
)
@queue_options
def worker(
    target: str,
    concurrency: int,
    lease: float,
    timeout: float | None,
    grace: float,
    processes: int,
    progress: bool,
    log_level: str,
    queue: str,
    url: str | None,
) -> None:
    """Run the handlers of MODULE:HANDLERS until Ctrl-C or SIGTERM.

    HANDLERS is a dict of job name → handler (async or sync, taking a Job;
    its return value is the job's result), or a factory called with the
    Queue that returns such a dict or a ready Worker. The current directory
    is importable. Ctrl-C stops claiming, lets in-flight jobs finish (up to
    --grace) and exits 0.

    \b
    Examples:
      echomq worker myapp.tasks:handlers -q mail --concurrency 50
      echomq worker tasks:handlers --processes 4 --progress
      ECHOMQ_URL=redis://10.0.0.5:6379/0 echomq worker tasks:handlers
    """
    logging.basicConfig(level=log_level.upper(), format=LOG_FORMAT, stream=sys.stderr)
    settings = WorkerSettings(
        target, queue, url, concurrency, lease, timeout, grace, progress, log_level.lower()
    )
    loaded = load_target(target)
    if processes > 1:
        sys.exit(supervise(settings, processes))
    asyncio.run(run_one(settings, loaded))
