"""Handlers and the worker factory the fault cases run in worker subprocesses.

Started as ``python -m echomq.cli worker faults.handlers:make_worker`` (cwd =
tests/), configured by environment so the command line stays the product's:

- ``FAULT_URL``         the queue's server url (may be the chaos proxy's)
- ``FAULT_SIDE_URL``    a direct url for the execution side channel (default FAULT_URL)
- ``FAULT_LEASE``       lease seconds (default 1)
- ``FAULT_CONCURRENCY`` jobs held at once (default 4)
- ``FAULT_MAX_STALLS``  expired leases a job survives (default 50: kills must not bury)
- ``FAULT_MAX_ATTEMPTS`` attempts before a failing job is dead (default 2)

Each execution start is appended to the side channel (invariants.side_key) with
the server's clock and the claim's time and lease deadline, so the checker
sees duplicated executions, the crash cases see when a job was claimed again,
and the soak can compare start times with fire times. A job's data may ask the handler to kill
its own process with SIGKILL at a given point of its first attempt.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from datetime import datetime
from typing import Any

import redis
import redis.asyncio

from echomq import Job, Queue, Worker
from echomq.options import Backoff
from faults.invariants import side_key

_side: redis.asyncio.Redis | None = None


def _env_float(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


async def _side_client() -> redis.asyncio.Redis:
    global _side
    if _side is None:
        url = os.environ.get("FAULT_SIDE_URL") or os.environ["FAULT_URL"]
        _side = redis.asyncio.Redis.from_url(url, decode_responses=True, socket_timeout=30)
    return _side


async def _record(key: str, job: Job, **extra: Any) -> None:
    side = await _side_client()
    seconds, micros = await side.time()
    record = {
        "id": job.id,
        "t": seconds * 1000 + micros // 1000,
        "a": job.attempts,
        "g": job.group,
        "sc": job.score,
        "pid": os.getpid(),
        "at": None if job.run_at is None else int(job.run_at.timestamp() * 1000),
        "ca": _epoch_ms(job.claimed_at),  # this run's claim, by the server clock
        "l": _epoch_ms(job.lease_deadline),  # the deadline that claim gave
        **extra,
    }
    await side.rpush(key, json.dumps(record))


def _epoch_ms(moment: datetime | None) -> int | None:
    return None if moment is None else round(moment.timestamp() * 1000)


def _suicide(job: Job, point: str) -> None:
    """SIGKILL this worker process at ``point`` of the job's first attempt."""
    data = job.data if isinstance(job.data, dict) else {}
    if data.get("kill") == point and job.attempts == 1:
        os.kill(os.getpid(), signal.SIGKILL)


async def work(job: Job) -> dict[str, Any]:
    """Record the start, maybe die, sleep as asked, maybe fail; return who ran it."""
    await _record(side_key(job_queue(job)), job)
    _suicide(job, "start")
    data = job.data if isinstance(job.data, dict) else {}
    sleep = float(data.get("sleep", 0))
    if sleep:
        await asyncio.sleep(sleep / 2)
        _suicide(job, "middle")
        await asyncio.sleep(sleep / 2)
    if data.get("fail"):
        raise RuntimeError(f"asked to fail (attempt {job.attempts})")
    _suicide(job, "end")
    return {"pid": os.getpid()}


def job_queue(job: Job) -> str:
    """The queue name, which the worker factory pins for the process."""
    return os.environ["FAULT_QUEUE"]


async def _stalled(job: Job) -> None:
    await _record(side_key(job_queue(job)) + ":stalled", job)


def make_worker(cli_queue: Queue) -> Worker:
    """A Worker on the CLI's queue name with the fault settings from the environment."""
    os.environ["FAULT_QUEUE"] = cli_queue.name
    side_url = os.environ.get("FAULT_SIDE_URL") or os.environ["FAULT_URL"]
    with redis.Redis.from_url(side_url, socket_timeout=10) as side:  # "up": the CLI got through
        side.rpush(side_key(cli_queue.name) + ":ready", os.getpid())
    queue = Queue(
        cli_queue.name,
        os.environ["FAULT_URL"],
        max_stalls=int(_env_float("FAULT_MAX_STALLS", 50)),
        max_attempts=int(_env_float("FAULT_MAX_ATTEMPTS", 2)),
        backoff=Backoff(base=0.2, factor=1.0, cap=1.0, jitter=0.2),
        keep_completed=1_000_000,
        keep_dead=1_000_000,
    )
    return Worker(
        queue,
        {"work": work},
        concurrency=int(_env_float("FAULT_CONCURRENCY", 4)),
        lease=_env_float("FAULT_LEASE", 1.0),
        grace=2.0,
        on_stalled=_stalled,
    )
