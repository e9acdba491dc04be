"""Running a sync task in a process of its own (``isolation="process"``).

Python cannot stop a thread, so a sync handler past its timeout on a thread
keeps running while its retry starts elsewhere. A process can be stopped: the
job's process is started (forkserver on Linux, spawn elsewhere), finds the
task again by module and qualified name, runs it and sends back the result or
the exception. When the attempt is cut short (its timeout, ``cancel()``, a
lost lease, shutdown) the process is killed and reaped *before* the attempt's
failure is recorded, so the job's retry never overlaps it.

The child gets a copy of the job (``current_job()`` works; progress does not:
it has no connection). Arguments and results cross as pickles of JSON values.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import multiprocessing
import sys
import traceback
from concurrent.futures import Future
from functools import partial
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from echomq.control import Retry, Unrecoverable, set_current_job
from echomq.job import Job
from echomq.tasks import AnyTask
from echomq.worker.threads import DaemonThreads

#: how the job's process is started.
START_METHOD = "forkserver" if sys.platform == "linux" else "spawn"
#: the longest wait for a killed process to be reaped (it takes milliseconds).
REAP_TIMEOUT = 5.0


class IsolatedFailure(Exception):
    """The task raised in its process; ``error`` and ``child_traceback`` are the child's."""

    def __init__(self, error: str, child_traceback: str) -> None:
        super().__init__(error)
        self.error = error
        self.child_traceback = child_traceback


async def run_in_process(
    task: AnyTask, job: Job, threads: DaemonThreads, loop: asyncio.AbstractEventLoop
) -> Any:
    """Run ``task`` with ``job``'s arguments in a new process; kill it if cancelled."""
    fn = task.fn
    ctx = multiprocessing.get_context(START_METHOD)
    receiver, sender = ctx.Pipe(duplex=False)
    copy = Job(**{name: getattr(job, name) for name in _JOB_FIELDS})
    process = ctx.Process(  # type: ignore[attr-defined]
        target=_child,
        args=(fn.__module__, fn.__qualname__, copy, sender),
        name=f"echomq-job-{job.id}",
        daemon=True,
    )
    try:
        await asyncio.wrap_future(threads.submit(process.start), loop=loop)
    except BaseException:
        receiver.close()
        _kill(process, None)
        raise
    finally:
        sender.close()
    # the thread owns the receiver from here on, and is the one that reaps the process
    waiting = threads.submit(partial(_result, process, receiver))
    try:
        kind, value = await asyncio.wrap_future(waiting, loop=loop)
    except BaseException:  # cut short: the process dies before the attempt is recorded
        _kill(process, waiting)
        raise
    if kind == "ok":
        return value
    if kind == "retry":
        raise Retry(value[0], value[1])
    if kind == "unrecoverable":
        raise Unrecoverable(value)
    raise IsolatedFailure(value[0], value[1])


_JOB_FIELDS = tuple(
    name
    for name in Job.__dataclass_fields__
    if not name.startswith("_")  # no progress sink
)


def _kill(process: BaseProcess, waiting: Future[Any] | None) -> None:
    """Kill the job's process and wait (briefly, on the loop) until it is reaped."""
    if process.pid is None:  # never started
        return
    process.kill()
    if waiting is None:
        process.join(REAP_TIMEOUT)
        return
    with contextlib.suppress(Exception):  # the thread reaps it; its reply no longer matters
        waiting.result(REAP_TIMEOUT)


def _result(process: BaseProcess, receiver: Connection) -> tuple[str, Any]:
    """The child's message, once the child is reaped (runs on a thread)."""
    try:
        message: tuple[str, Any] = receiver.recv()
    except EOFError:
        message = ("error", ("the job's process ended without a reply", ""))
    finally:
        receiver.close()
    process.join()
    if message[0] == "error" and process.exitcode not in (0, None):
        message = ("error", (f"{message[1][0]}; exit code {process.exitcode}", message[1][1]))
    return message


def _child(module: str, qualname: str, job: Job, sender: Connection) -> None:
    try:
        target: Any = importlib.import_module(module)
        for part in qualname.split("."):
            target = getattr(target, part)
        set_current_job(job)
        run = target.run_job if hasattr(target, "run_job") else target
        sender.send(("ok", run(job)))
    except Retry as exc:
        sender.send(("retry", (exc.delay, exc.reason)))
    except Unrecoverable as exc:
        sender.send(("unrecoverable", str(exc)))
    except BaseException as exc:
        sender.send(
            ("error", (f"{type(exc).__name__}: {exc}", "".join(traceback.format_exception(exc))))
        )
    finally:
        sender.close()
