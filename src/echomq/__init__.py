"""echomq: a job queue on Valkey and Redis with exact priority order and weighted fair lanes."""

from typing import TYPE_CHECKING, Any

from echomq.control import RateLimited, Retry, Unrecoverable, current_job, current_queue
from echomq.dedupe import Dedupe
from echomq.errors import (
    DependencyFailed,
    EchoMQError,
    FormatTooNew,
    InvalidDelay,
    InvalidDependency,
    InvalidId,
    InvalidInput,
    InvalidName,
    InvalidOption,
    InvalidPriority,
    InvalidSchedule,
    InvalidScore,
    InvalidState,
    InvalidWeight,
    JobCancelled,
    JobNotFound,
    LaneFull,
    LeaseLost,
    NotReplicated,
    OrderingMismatch,
    PayloadError,
    PoolTimeout,
    ServerError,
    WaitTimeout,
)
from echomq.events import Event
from echomq.job import Job, State
from echomq.joblogs import LogLine
from echomq.metrics import MetricPoint
from echomq.options import Backoff
from echomq.position import Position
from echomq.registry import WorkerInfo
from echomq.reports import LaneInfo, MaintenanceReport, QueueStats, TierCounts
from echomq.schedules import ScheduleInfo
from echomq.sync import SyncQueue
from echomq.tasks import SyncTask, Task

if TYPE_CHECKING:
    from echomq.queue import Queue
    from echomq.worker import Middleware, Worker

__version__ = "0.1.0"

__all__ = [
    "Backoff",
    "Dedupe",
    "DependencyFailed",
    "EchoMQError",
    "Event",
    "FormatTooNew",
    "InvalidDelay",
    "InvalidDependency",
    "InvalidId",
    "InvalidInput",
    "InvalidName",
    "InvalidOption",
    "InvalidPriority",
    "InvalidSchedule",
    "InvalidScore",
    "InvalidState",
    "InvalidWeight",
    "Job",
    "JobCancelled",
    "JobNotFound",
    "LaneFull",
    "LaneInfo",
    "LeaseLost",
    "LogLine",
    "MaintenanceReport",
    "MetricPoint",
    "Middleware",
    "NotReplicated",
    "OrderingMismatch",
    "PayloadError",
    "PoolTimeout",
    "Position",
    "Queue",
    "QueueStats",
    "RateLimited",
    "Retry",
    "ScheduleInfo",
    "ServerError",
    "State",
    "SyncQueue",
    "SyncTask",
    "Task",
    "TierCounts",
    "Unrecoverable",
    "WaitTimeout",
    "Worker",
    "WorkerInfo",
    "__version__",
    "current_job",
    "current_queue",
]


def __getattr__(name: str) -> Any:
    """``Queue`` and ``Worker`` are imported on first use: a short CLI command (which
    uses SyncQueue) loads neither the asyncio sending layer nor the worker runtime."""
    if name == "Queue":
        from echomq.queue import Queue

        return Queue
    if name in ("Worker", "Middleware"):
        from echomq import worker

        return getattr(worker, name)
    raise AttributeError(f"module 'echomq' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
