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
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from echomq import connection
from echomq.cli.common import CONTEXT_SETTINGS, fail, open_queue, queue_options
from echomq.options import DEFAULT_CONCURRENCY, DEFAULT_GRACE, DEFAULT_LEASE, MAX_CLAIM
from echomq.queue import Queue
from echomq.reports import QueueStats
from echomq.worker.supervisor import Supervisor

if TYPE_CHECKING:  # the runtime import waits until a worker runs: it keeps `echomq` quick
    from echomq.worker import Worker

log = logging.getLogger("echomq.cli.worker")

#: set in a supervised worker process: the supervisor's pid (the child stops if it is gone).
SUPERVISOR_ENV = "ECHOMQ_SUPERVISOR_PID"
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMAT = "%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s"
#: seconds beyond --grace a stopping worker process gets to release leases and exit.
RELEASE_MARGIN = 10.0


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
    if not isinstance(value, Mapping | list | tuple) and not callable(value):
        fail(
            f"worker target {spec!r} is a {type(value).__name__}: expected a list of "
            "tasks, a dict of job name → handler, or a factory taking the Queue"
        )
    return value


def build_worker(target: Any, queue: Queue, settings: WorkerSettings) -> Worker:
    """A Worker from a handlers mapping, or from a factory called with the queue.

    A factory may return a mapping of handlers (the command-line options then
    apply) or a ready Worker (its own options apply).
    """
    from echomq.tasks import BaseTask
    from echomq.worker import Worker

    made = target(queue) if callable(target) and not isinstance(target, Mapping) else target
    if isinstance(made, Worker):
        return made
    tasks = isinstance(made, list | tuple) and made and all(isinstance(t, BaseTask) for t in made)
    if not tasks and (not isinstance(made, Mapping) or not made):
        fail(
            f"worker target {settings.target!r} gave {type(made).__name__}: expected a "
            "list of tasks, a non-empty dict of job name → handler, or a Worker"
        )
    for name, handler in made.items() if not tasks else ():
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


def supervise(settings: WorkerSettings, processes: int) -> int:
    """Run ``processes`` worker processes on the queue until SIGINT/SIGTERM."""
    url = connection.resolve_url(settings.url)
    with open_queue(settings.queue, url) as q:
        q.stats()  # fail fast, once, if the server cannot be reached
        command = [sys.executable, "-m", "echomq.cli", "worker", *settings.child_args()]
        env = {**os.environ, connection.URL_ENV: url, SUPERVISOR_ENV: str(os.getpid())}
        supervisor = Supervisor(command, env, processes, settings.grace + RELEASE_MARGIN)
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
    type=click.IntRange(1, MAX_CLAIM),
    default=DEFAULT_CONCURRENCY,
    show_default=True,
    help="Jobs run at once per process.",
)
@click.option(
    "--lease",
    type=click.FloatRange(min=0.1),
    default=DEFAULT_LEASE,
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
    default=DEFAULT_GRACE,
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
