"""echomq: a job queue on Valkey and Redis with exact priority order and weighted fair lanes."""

from echomq.errors import (
    EchoMQError,
    FormatTooNew,
    InvalidDelay,
    InvalidId,
    InvalidInput,
    InvalidName,
    InvalidOption,
    InvalidPriority,
    InvalidScore,
    InvalidWeight,
    JobNotFound,
    LeaseLost,
    NotReplicated,
    OrderingMismatch,
    PayloadError,
    ServerError,
)
from echomq.job import Job, State
from echomq.options import Backoff
from echomq.queue import Queue
from echomq.reports import LaneInfo, MaintenanceReport, QueueStats, TierCounts
from echomq.sync import SyncQueue
from echomq.worker import Worker

__version__ = "0.1.0"

__all__ = [
    "Backoff",
    "EchoMQError",
    "FormatTooNew",
    "InvalidDelay",
    "InvalidId",
    "InvalidInput",
    "InvalidName",
    "InvalidOption",
    "InvalidPriority",
    "InvalidScore",
    "InvalidWeight",
    "Job",
    "JobNotFound",
    "LaneInfo",
    "LeaseLost",
    "MaintenanceReport",
    "NotReplicated",
    "OrderingMismatch",
    "PayloadError",
    "Queue",
    "QueueStats",
    "ServerError",
    "State",
    "SyncQueue",
    "TierCounts",
    "Worker",
    "__version__",
]
