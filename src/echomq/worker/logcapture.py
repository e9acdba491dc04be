"""Routing a handler's ``logging`` records to its job's log (echomq.joblogs).

One handler on the root logger, installed while a worker runs (counted: several
workers of one process share it), sends each record to the log of the job
whose handler emitted it: the job bound to the record's context
(``echomq.control.running_job``, a context variable). Each job's handler runs
in its own context: an async handler in its own task (tasks it starts inherit
it), a sync handler on a thread that runs in a copy of it
(echomq.worker.threads), a process-isolated task in its own process, whose
records cross back over its pipe (echomq.worker.isolation). So the records of
jobs running side by side never mix, and a record emitted outside any handler
goes to no job. The worker's own records (loggers ``echomq.*``) are not the
handler's and stay out; records below the job's level (the worker's
``job_log_level``) too.

A record is only seen if ``logging`` creates it: when the root logger's
level is above the lowest ``job_log_level`` of the running workers, the
capture lowers it while a worker runs, and gives each handler already on the
root logger a filter that passes what it saw before (a record its logger
would have created at the old root level), so what they print does not change.
"""

from __future__ import annotations

import logging
import threading
import traceback

from echomq.control import running_job
from echomq.job import Job
from echomq.joblogs import JobLog, level_number

#: the worker's own loggers: never a job's.
OWN_LOGGERS = "echomq"


def record_text(record: logging.LogRecord) -> str:
    """A record as one log line's message: its message, and its traceback if any."""
    text = record.getMessage()
    if record.exc_info and record.exc_info[1] is not None:
        text += "\n" + "".join(traceback.format_exception(record.exc_info[1])).rstrip()
    elif record.exc_text:
        text += "\n" + record.exc_text
    if record.stack_info:
        text += "\n" + record.stack_info
    return text


class JobLogHandler(logging.Handler):
    """Sends each record emitted inside a handler to its job's log (``job``: every
    record is that job's, in a process-isolated job's process)."""

    def __init__(self, job: Job | None = None) -> None:
        super().__init__()
        self._job = job

    def emit(self, record: logging.LogRecord) -> None:
        name = record.name
        if name == OWN_LOGGERS or name.startswith(OWN_LOGGERS + "."):
            return
        job = self._job or running_job()
        log: JobLog | None = None if job is None else job._log
        if log is None or record.levelno < log.threshold:
            return
        try:
            log.add(_level_name(record.levelno), record_text(record), record.created)
        except Exception:  # never let a log line break the handler that logged it
            self.handleError(record)


def _level_name(levelno: int) -> str:
    for name in ("CRITICAL", "ERROR", "WARNING", "INFO"):
        if levelno >= level_number(name):
            return name
    return "DEBUG"


class _AsBefore(logging.Filter):
    """Passes a record only if ``logging`` would have created it with the root
    logger at ``root_level`` (its logger's own level, else its nearest
    ancestor's, else the root's old one): what a handler on the root logger
    printed before the capture lowered the root level, it prints still."""

    def __init__(self, root_level: int) -> None:
        super().__init__()
        self.root_level = root_level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= self._level_of(record.name)

    def _level_of(self, name: str) -> int:
        root = logging.getLogger()
        logger: logging.Logger | None = logging.getLogger(name) if name != "root" else root
        while logger is not None and logger is not root:
            if logger.level != logging.NOTSET:
                return logger.level
            logger = logger.parent
        return self.root_level


class _Capture:
    """The process's one capture: installed by the first worker, removed by the last."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._levels: list[int] = []
        self._handler = JobLogHandler()
        self._lowered: tuple[int, int, list[tuple[logging.Handler, _AsBefore]]] | None = None

    def start(self, level: str) -> None:
        with self._lock:
            self._levels.append(level_number(level))
            root = logging.getLogger()
            if self._handler not in root.handlers:
                root.addHandler(self._handler)
            self._lower(root)

    def stop(self, level: str) -> None:
        with self._lock:
            self._levels.remove(level_number(level))
            root = logging.getLogger()
            if self._levels:
                return
            root.removeHandler(self._handler)
            self._restore(root)

    def _lower(self, root: logging.Logger) -> None:
        wanted = min(self._levels)
        if self._lowered is not None or root.level <= wanted:
            return
        guards = []
        for handler in root.handlers:
            if handler is self._handler:
                continue
            guard = _AsBefore(root.level)
            handler.addFilter(guard)
            guards.append((handler, guard))
        self._lowered = (root.level, wanted, guards)
        root.setLevel(wanted)

    def _restore(self, root: logging.Logger) -> None:
        if self._lowered is None:
            return
        old, set_to, guards = self._lowered
        self._lowered = None
        for handler, guard in guards:
            handler.removeFilter(guard)
        if root.level == set_to:  # nobody changed it meanwhile
            root.setLevel(old)


_capture = _Capture()


def start_capture(level: str) -> None:
    """A worker with ``job_log_level`` ``level`` starts: records reach job logs."""
    _capture.start(level)


def stop_capture(level: str) -> None:
    """That worker stopped (the last one removes the capture, and restores the root level)."""
    _capture.stop(level)


def install_in_job_process(job: Job, level: str) -> None:
    """In a process-isolated job's process: every record at or above ``level`` is
    the job's (the process runs one job). Warnings and above still reach stderr,
    as they would without any handler."""
    root = logging.getLogger()
    if not root.handlers:
        fallback = logging.StreamHandler()
        fallback.setLevel(logging.WARNING)
        root.addHandler(fallback)
    root.addHandler(JobLogHandler(job))
    if root.level > level_number(level):
        for handler in root.handlers:
            if not isinstance(handler, JobLogHandler) and handler.level < root.level:
                handler.setLevel(root.level)
        root.setLevel(level_number(level))
