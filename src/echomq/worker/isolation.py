"""Running a sync task in a process of its own (``isolation="process"``).

Python cannot stop a thread, so a sync handler past its timeout on a thread
keeps running while its retry starts elsewhere. A process can be stopped: the
job's process is started (forkserver on Linux, spawn elsewhere), finds the
task again by module and qualified name, runs it and sends back the result or
the exception. When the attempt is cut short (its timeout, ``cancel()``, a
lost lease, shutdown) the process is killed and reaped *before* the attempt's
failure is recorded, so the job's retry never overlaps it.

The job's process dies with its worker, even one killed with SIGKILL (which
runs no cleanup): otherwise it would run on, unbounded by its timeout, beside
its own retry. Two guards, because either alone has a gap:

- a lifeline: a pipe whose write end only the worker holds; a thread in the
  job's process reads it and kills the process at EOF, which the kernel
  delivers the moment the worker is gone (any platform; a thread, so a C call
  holding the GIL can delay it);
- on Linux, ``PR_SET_PDEATHSIG``: the kernel sends SIGKILL when the job's
  parent dies. Its parent is the forkserver, which exits when the worker does
  (it watches a pipe of its own), so the chain reaches the job's process even
  while it holds the GIL.

The child gets a copy of the job (``current_job()`` works; progress does not:
it has no connection). What the task logs (``job.log``, ``logging`` records at
or above the worker's ``job_log_level``) crosses the pipe as it happens and
joins the job's log in the worker (echomq.worker.logcapture). Arguments and
results cross as pickles of JSON values.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from concurrent.futures import Future
from functools import partial
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from echomq.control import Retry, Unrecoverable, set_current_job
from echomq.errors import EchoMQError
from echomq.job import Job
from echomq.joblogs import JobLog, cut_message
from echomq.tasks import AnyTask
from echomq.worker.logcapture import install_in_job_process
from echomq.worker.threads import DaemonThreads

#: how the job's process is started.
START_METHOD = "forkserver" if sys.platform == "linux" else "spawn"
#: the longest wait for a killed process to be reaped (it takes milliseconds).
REAP_TIMEOUT = 5.0


#: the refusal of a worker started where a job's process (or the forkserver) imports code.
NESTED_WORKER = (
    "Worker.run() refused in a process-isolated job's process, which imports your "
    'script again: start the worker under `if __name__ == "__main__":`'
)

#: the exit code of a job's process that refused to start a worker while bootstrapping
#: (sysexits' EX_CONFIG).
NESTED_EXIT = 78

_in_job_process = False  # set in a job's process before it imports the task's module


class NestedWorker(EchoMQError):
    """A worker was started while a job's process imported the script that starts it."""


def check_not_in_job_process() -> None:
    """Refuse to start a worker inside a job's process, or while multiprocessing
    bootstraps one (it runs the main script again there): a script without a
    main guard would start a worker in every job's process.

    In a job's process this raises :class:`NestedWorker` (the job fails with
    it). While bootstrapping, an exception would reach nobody readable (the
    forkserver prints a long traceback and the job ends without a reply), so
    the process writes the one line to stderr and exits with
    :data:`NESTED_EXIT`, which the worker turns into the job's error.
    """
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        sys.stderr.write(f"echomq: {NESTED_WORKER}\n")
        sys.stderr.flush()
        os._exit(NESTED_EXIT)
    if _in_job_process:
        raise NestedWorker(NESTED_WORKER)


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
    lifeline, held = ctx.Pipe(duplex=False)  # the worker holds `held` until the job ends
    copy = Job(**{name: getattr(job, name) for name in _JOB_FIELDS})
    level = None if job._log is None else job._log.level
    process = ctx.Process(  # type: ignore[attr-defined]
        target=_child,
        args=(fn.__module__, fn.__qualname__, copy, sender, lifeline, level),
        name=f"echomq-job-{job.id}",
        daemon=True,
    )
    try:
        try:
            await asyncio.wrap_future(threads.submit(process.start), loop=loop)
        except BaseException:
            receiver.close()
            _kill(process, None)
            raise
        finally:
            sender.close()
            lifeline.close()
        return await _outcome(process, receiver, threads, loop, job._log)
    finally:
        held.close()


async def _outcome(
    process: BaseProcess,
    receiver: Connection,
    threads: DaemonThreads,
    loop: asyncio.AbstractEventLoop,
    log: JobLog | None,
) -> Any:
    """The started job process's reply, as the task's return value or exception."""
    # the thread owns the receiver from here on, and is the one that reaps the process
    waiting = threads.submit(partial(_result, process, receiver, log))
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


def _result(process: BaseProcess, receiver: Connection, log: JobLog | None) -> tuple[str, Any]:
    """The child's message, once the child is reaped (runs on a thread); the
    lines it logged before (``("log", (at, level, message))``) go to ``log``."""
    try:
        message: tuple[str, Any] = receiver.recv()
        while message[0] == "log":
            if log is not None:
                at, level, text = message[1]
                log.add(level, text, at)
            message = receiver.recv()
    except EOFError:
        message = ("error", ("the job's process ended without a reply", ""))
    finally:
        receiver.close()
    process.join()
    if message[0] == "error" and process.exitcode == NESTED_EXIT:
        return ("error", (f"{NestedWorker.__name__}: {NESTED_WORKER}", ""))
    if message[0] == "error" and process.exitcode not in (0, None):
        message = ("error", (f"{message[1][0]}; exit code {process.exitcode}", message[1][1]))
    return message


def die_with_parent() -> None:
    """Linux: have the kernel SIGKILL this process when its parent, the
    forkserver, dies (``prctl(PR_SET_PDEATHSIG)``); elsewhere, nothing (the
    lifeline remains).

    The forkserver exits once every holder of its "alive" pipe is gone; each
    process it forks inherits a copy, so a running job would keep it alive.
    This process gives its copy up (a process the job itself starts by
    forkserver then gets a forkserver of its own), so the forkserver's life
    is the worker's, and this process's is the forkserver's.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes  # only here: the job's process pays for it, the worker does not
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    alive = getattr(server, "_forkserver_alive_fd", None)
    if isinstance(alive, int):
        with contextlib.suppress(OSError):
            os.close(alive)
        server._forkserver_alive_fd = None  # type: ignore[union-attr]
        server._forkserver_address = None  # type: ignore[union-attr]
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return  # not allowed here (a seccomp filter): the lifeline remains
    if os.getppid() != parent:  # the parent died before the call: no signal will come
        os.kill(os.getpid(), signal.SIGKILL)


#: prctl's option number (linux/prctl.h).
_PR_SET_PDEATHSIG = 1


def watch_lifeline(lifeline: Connection) -> None:
    """Kill this process once ``lifeline`` reaches EOF: the worker that holds its
    other end is gone (a daemon thread, so it never keeps the process alive)."""

    def watch() -> None:
        with contextlib.suppress(EOFError, OSError):
            while True:
                lifeline.recv_bytes()  # nothing is ever sent: this returns at EOF
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="echomq-lifeline", daemon=True).start()


class _PipeLog(JobLog):
    """A job's log in its own process: each line crosses the pipe to the worker at
    once (a local write), which keeps it with the job's other lines."""

    def __init__(self, attempt: int, level: str, sender: Connection) -> None:
        super().__init__(attempt, level)
        self._sender = sender

    def add(self, level: str, message: str, at: float | None = None) -> None:
        line = (time.time() if at is None else at, level, cut_message(message))
        _reply(self._sender, ("log", line))


#: one message at a time on the pipe (a thread of the task may log as it ends).
_SEND_LOCK = threading.Lock()


def _reply(sender: Connection, message: tuple[str, Any]) -> None:
    with _SEND_LOCK:
        sender.send(message)


def _child(
    module: str,
    qualname: str,
    job: Job,
    sender: Connection,
    lifeline: Connection,
    level: str | None = None,
) -> None:
    global _in_job_process
    _in_job_process = True
    die_with_parent()
    watch_lifeline(lifeline)
    if level is not None:  # the records of this process are the job's (logcapture)
        job._log = _PipeLog(job.attempts, level, sender)
        install_in_job_process(job, level)
    try:
        target: Any = importlib.import_module(module)
        for part in qualname.split("."):
            target = getattr(target, part)
        set_current_job(job)
        run = target.run_job if hasattr(target, "run_job") else target
        _reply(sender, ("ok", run(job)))
    except Retry as exc:
        _reply(sender, ("retry", (exc.delay, exc.reason)))
    except Unrecoverable as exc:
        _reply(sender, ("unrecoverable", str(exc)))
    except BaseException as exc:
        _reply(
            sender,
            ("error", (f"{type(exc).__name__}: {exc}", "".join(traceback.format_exception(exc)))),
        )
    finally:
        job._log = None  # (a record logged while the process ends goes nowhere)
        sender.close()
