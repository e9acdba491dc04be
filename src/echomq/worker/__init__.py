"""The worker runtime: fetch (fetcher), run (executor), renew (leases), shut down (worker)."""

from echomq.worker.executor import HandlerTimeout, Hooks
from echomq.worker.handlers import Middleware
from echomq.worker.worker import Worker

__all__ = ["HandlerTimeout", "Hooks", "Middleware", "Worker"]
