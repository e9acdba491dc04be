"""Tasks the isolation tests run in processes of their own: the child process
imports this module to find them (so they live at a module's top level)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from echomq import Backoff, SyncQueue, current_job

# never connected here: the tests enqueue these tasks through their own queues
tasks = SyncQueue("isolated-tasks")


#: stuck_once's timeout (s). It counts from the claim, so it covers starting the
#: job's process and importing echomq and this module there (docs/worker.md):
#: 0.4-0.9 s at load 2, and more than 2 s at load 5-10 on the 2-core test
#: machine, where a 2 s timeout killed attempt 1 before it began (attempt 2 then
#: found no "start 1") or killed attempt 2 before it could finish. Attempt 1
#: hangs for 60 s, so this must stay well below that.
STUCK_TIMEOUT = 15.0


@tasks.task(
    timeout=STUCK_TIMEOUT, isolation="process", max_attempts=2, backoff=Backoff(base=0, jitter=0)
)
def stuck_once(record: str) -> str:
    """Attempt 1 hangs (until its process is killed at the timeout); attempt 2
    writes down whether attempt 1's process is still alive, then succeeds."""
    job, log = current_job(), Path(record)
    with log.open("a") as f:
        f.write(f"start {job.attempts} {os.getpid()}\n")
    if job.attempts == 1:
        time.sleep(60)
        with log.open("a") as f:
            f.write("end 1\n")  # never written: the process dies first
        return "first"
    first = next(
        line.split()[2] for line in log.read_text().splitlines() if line.startswith("start 1")
    )
    with log.open("a") as f:
        f.write(f"first-alive {pid_alive(int(first))}\n")
    return "second"


@tasks.task(isolation="process")
def add_in_process(a: int, b: int) -> dict[str, int]:
    return {"sum": a + b, "pid": os.getpid()}


@tasks.task(isolation="process")
def fails_in_process() -> None:
    raise ValueError("bad input in the child")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@tasks.task(isolation="process", timeout=120)
def heartbeat(path: str) -> None:
    """Writes its pid, then a line every 50 ms for a minute (the kill -9 test
    watches the file to know the job's process is alive)."""
    beat = Path(path)
    with beat.open("a") as f:
        f.write(f"pid {os.getpid()}\n")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with beat.open("a") as f:
            f.write(f"beat {time.monotonic()}\n")
        time.sleep(0.05)


@tasks.task(isolation="process", timeout=20)
def starts_a_worker(url: str) -> None:
    """What a module without a main guard does when a job's process imports it."""
    import asyncio

    from echomq import Queue, Worker

    def nothing(job: object) -> None: ...

    asyncio.run(Worker(Queue("nested-worker", url), {"nothing": nothing}).run())


@tasks.task(isolation="process", timeout=60)
def logs_in_process(who: str, rounds: int, gate: str) -> str:
    """Logs ``rounds`` lines naming ``who`` (job.log and logging, from the task and
    from a thread it starts), each round once the other job's process has
    started logging too (files in ``gate``), so two such jobs log side by side."""
    import logging
    import threading

    job, gate_dir = current_job(), Path(gate)
    (gate_dir / who).write_text("up")
    deadline = time.monotonic() + 30
    while len(list(gate_dir.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    logger = logging.getLogger("isolated.app")
    for i in range(rounds):
        job.log(f"{who} says {i}")
        logger.info("%s logs %d", who, i)
        logger.debug("%s debug %d (below the level)", who, i)
        time.sleep(0.005)
    worker_thread = threading.Thread(target=lambda: logger.warning("%s from a thread", who))
    worker_thread.start()
    worker_thread.join()
    return who
