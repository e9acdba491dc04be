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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from echomq import urls
from echomq.cli.common import CONTEXT_SETTINGS, fail, open_queue, queue_options
from echomq.options import (
    DEFAULT_CONCURRENCY,
    DEFAULT_GRACE,
    DEFAULT_LEASE,
    MAX_CLAIM,
    QueueOptions,
)
from echomq.queue import Queue
from echomq.reports import QueueStats
from echomq.worker.supervisor import Supervisor

if TYPE_CHECKING:  # the runtime import waits until a worker runs: it keeps `echomq` quick
    from echomq.tasks import AnyTask
    from echomq.worker import Worker

log = logging.getLogger("echomq.cli.worker")

#: set in a supervised worker process: the supervisor's pid (the child stops if it is gone).
SUPERVISOR_ENV = "ECHOMQ_SUPERVISOR_PID"
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMAT = "%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s"
#: the queue served when neither --queue nor the tasks name one.
DEFAULT_QUEUE = "default"
#: seconds beyond --grace a stopping worker process gets to release leases and exit.
RELEASE_MARGIN = 10.0


#: the levels of --job-log-level (echomq.joblogs.LEVELS, lower case).
JOB_LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    """The options a worker process is started with (also passed on to supervised ones)."""

    target: str
    queue: str | None  # None: not given (the tasks' queues, else "default")
    url: str | None
    concurrency: int
    lease: float
    timeout: float | None
    grace: float
    progress: bool
    log_level: str = "info"
    log_jobs: bool = True
    job_log_level: str = "info"

    def child_args(self) -> list[str]:
        """Command-line arguments of one supervised process (the url goes by environment)."""
        args = [
            self.target,
            *(["--queue", self.queue] if self.queue is not None else []),
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
        if not self.log_jobs:
            args.append("--quiet-jobs")
        if self.job_log_level != "info":
            args += ["--job-log-level", self.job_log_level]
        return args


@dataclass(frozen=True, slots=True)
class QueuePlan:
    """One queue the worker serves: its name, url and constructor options (those of
    the tasks' own Queue object, when the handlers are tasks)."""

    name: str
    url: str | None
    options: dict[str, Any]
    source: str = ""  # where the options come from, for the start log

    def open(self) -> Queue:
        return Queue(self.name, self.url, **self.options)

    def differences(self) -> str:
        """The options that are not the defaults, as ``name=value`` (for the start log)."""
        defaults = QueueOptions().settings()
        given = {k: v for k, v in self.options.items() if k in defaults}
        changed = [f"{k}={v!r}" for k, v in given.items() if defaults.get(k) != v]
        if self.options.get("durable"):
            changed.append("durable=True")
        return ", ".join(changed)


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


def tasks_in(target: Any) -> list[AnyTask]:
    """The tasks among the handlers (a list of tasks, or a mapping's task values)."""
    from echomq.tasks import BaseTask

    values = target.values() if isinstance(target, Mapping) else target
    if not isinstance(values, Iterable) or isinstance(values, str | bytes):
        return []
    return [t for t in values if isinstance(t, BaseTask)]


def plan_queues(target: Any, settings: WorkerSettings) -> list[QueuePlan]:
    """The queues to serve: ``--queue`` if given, else the queue(s) the tasks are
    bound to, else ``default``. A queue the tasks are bound to gets their Queue
    object's url and options; another (``--queue`` elsewhere, or handlers that
    are no tasks) the defaults, said in a warning when tasks were given."""
    owners: dict[str, Any] = {}
    for task in tasks_in(target):
        home = getattr(task, "queue", None)
        if home is not None:
            owners.setdefault(home.name, home)
    if not owners:
        return [QueuePlan(settings.queue or DEFAULT_QUEUE, settings.url, {})]
    if settings.queue is not None and settings.queue not in owners:
        log.warning(
            "queue %s (--queue): the tasks of %s are bound to queue %s; serving %s as "
            "asked, with the default queue options (leave --queue out to serve the "
            "tasks' queues)",
            settings.queue,
            settings.target,
            ", ".join(owners),
            settings.queue,
        )
        return [QueuePlan(settings.queue, settings.url, {})]
    if settings.queue is not None:
        owners = {settings.queue: owners[settings.queue]}
    return [
        QueuePlan(
            name,
            settings.url or home.url,
            {
                **home.options.settings(),
                "durable": home.durable,
                "durable_timeout": home.durable_timeout,
            },
            source=settings.target,
        )
        for name, home in owners.items()
    ]


def log_plan(plans: list[QueuePlan]) -> None:
    """Say where each queue's options come from (a Queue made in the tasks module
    applies; stored settings, ``echomq config``, are stronger)."""
    for plan in plans:
        if not plan.source:
            continue
        log.info(
            "queue %s: the options of the tasks' Queue object in %s apply (%s); "
            "stored settings (echomq config %s --set …) take precedence",
            plan.name,
            plan.source,
            plan.differences() or "all defaults",
            plan.name,
        )


def build_worker(target: Any, queue: Queue | list[Queue], settings: WorkerSettings) -> Worker:
    """A Worker from a handlers mapping, or from a factory called with the queue.

    A factory may return a mapping of handlers (the command-line options then
    apply) or a ready Worker (its own options apply).
    """
    from echomq.tasks import BaseTask
    from echomq.worker import Worker

    queues = queue if isinstance(queue, list) else [queue]
    factory = callable(target) and not isinstance(target, Mapping)
    made = target(queues[0]) if factory else target
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
        queues if len(queues) > 1 else queues[0],
        made,
        concurrency=max(settings.concurrency, len(queues)),
        lease=settings.lease,
        timeout=settings.timeout,
        grace=settings.grace,
        log_jobs=settings.log_jobs,
        job_log_level=settings.job_log_level.upper(),
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
    plans = plan_queues(target, settings)
    queues = [plan.open() for plan in plans]
    queue = queues[0]
    try:
        for each in queues:  # an unreachable server is a one-line error, before any work
            await each.stats()
        log_plan(plans)
        worker = build_worker(target, queues, settings)
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
        for each in queues:
            await each.close()


def supervise(settings: WorkerSettings, processes: int, target: Any) -> int:
    """Run ``processes`` worker processes on the queue(s) until SIGINT/SIGTERM."""
    plan = plan_queues(target, settings)[0]
    url = urls.resolve_url(plan.url)
    with open_queue(plan.name, url) as q:
        q.stats()  # fail fast, once, if the server cannot be reached
        command = [sys.executable, "-m", "echomq.cli", "worker", *settings.child_args()]
        env = {**os.environ, urls.URL_ENV: url, SUPERVISOR_ENV: str(os.getpid())}
        supervisor = Supervisor(command, env, processes, settings.grace + RELEASE_MARGIN)
        progress = ProgressLine()

        def tick() -> None:
            try:
                click.echo(progress.line(q.stats(), f"{processes} processes"), err=True)
            except Exception as exc:  # a status line must never stop the supervisor
                log.warning("status unavailable: %s", exc)

        log.info("supervising %d worker processes on queue %s", processes, plan.name)
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
    "--quiet-jobs",
    is_flag=True,
    help="No log line per completed job (for high rates; failures are still logged).",
)
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default="info",
    show_default=True,
    help="Least severe worker log lines shown (stderr).",
)
@click.option(
    "--job-log-level",
    type=click.Choice(JOB_LOG_LEVELS, case_sensitive=False),
    default="info",
    show_default=True,
    help="Least severe of a handler's logging records kept in its job's log (echomq logs JOB).",
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
    quiet_jobs: bool,
    log_level: str,
    job_log_level: str,
    queue: str,
    url: str | None,
) -> None:
    """Run the handlers of MODULE:HANDLERS until Ctrl-C or SIGTERM.

    HANDLERS is a list of tasks (recommended, docs/tasks.md: tasks = [send,
    report]): the worker serves the queue(s) the tasks are bound to, with
    their Queue's options (--queue may only pick one of those). It may also
    be a dict of job name → handler (async or sync, taking a Job; its return
    value is the job's result), served on --queue, or a factory called with
    the Queue that returns such a dict or a ready Worker. The current
    directory is importable. One INFO line per finished job (--quiet-jobs
    drops those of completed jobs); what a handler logs at or above
    --job-log-level goes to its job's log (echomq logs JOB). Ctrl-C stops
    claiming, lets in-flight jobs finish (up to --grace) and exits 0.

    \b
    Examples:
      echomq worker myapp.tasks:tasks --concurrency 50
      echomq worker myapp.tasks:handlers -q mail
      echomq worker tasks:tasks --processes 4 --progress
      ECHOMQ_URL=redis://10.0.0.5:6379/0 echomq worker tasks:tasks
    """
    logging.basicConfig(level=log_level.upper(), format=LOG_FORMAT, stream=sys.stderr)
    given = click.get_current_context().get_parameter_source("queue")
    settings = WorkerSettings(
        target,
        None if given is click.core.ParameterSource.DEFAULT else queue,
        url,
        concurrency,
        lease,
        timeout,
        grace,
        progress,
        log_level.lower(),
        log_jobs=not quiet_jobs,
        job_log_level=job_log_level.lower(),
    )
    loaded = load_target(target)
    if processes > 1:
        sys.exit(supervise(settings, processes, loaded))
    asyncio.run(run_one(settings, loaded))
