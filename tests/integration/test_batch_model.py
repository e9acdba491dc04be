"""Batches in lockstep with the reference model (tests/batch_model.py): random
sequences of adds, claims, completions, retries, deaths, releases, revivals
(retry_dead), removals, the close and a cancel, on a real server and on the
model; after every step the batch's counts, state and fired callbacks agree,
and at the end each fired callback exists as exactly one job."""

from __future__ import annotations

import random

import pytest

from batch_model import BatchModel
from echomq import SyncQueue
from echomq.job import Job

CALLBACKS = {
    "on_success": {"name": "cb", "data": "success"},
    "on_complete": {"name": "cb", "data": "complete"},
    "on_death": {"name": "cb", "data": "death"},
}
KINDS = {"on_success": "success", "on_complete": "complete", "on_death": "death"}


class Driver:
    """One batch on the server and in the model, driven by one random generator."""

    def __init__(self, sq: SyncQueue, rng: random.Random) -> None:
        self.sq, self.rng = sq, rng
        self.batch = sq.batch(**CALLBACKS)
        self.model = BatchModel()
        self.held: dict[str, Job] = {}  # active children this test holds
        self.callback_runs: list[str] = []

    def step(self) -> str:
        m, rng = self.model, self.rng
        moves = ["claim"] * 4
        if not m.closed and not m.cancelled and len(m.children) < 10:
            moves += ["add"] * 4
        if self.held:
            moves += ["complete"] * 3 + ["fail_dead", "fail_retry", "release"]
        if m.in_state("dead"):
            moves.append("retry_dead")
        if m.present():
            moves.append("remove")
        if not m.closed:
            moves.append("close")
        if not m.cancelled and rng.random() < 0.05:
            moves.append("cancel")
        move = rng.choice(moves)
        getattr(self, move)()
        return move

    def add(self) -> None:
        self.model.add(self.batch.add("child", max_attempts=5))

    def claim(self) -> None:
        jobs = self.sq.claim(1, lease=600)
        if not jobs and self.model.cancelled:  # the claim cancelled a child instead
            for job_id in self.model.in_state("waiting"):
                found = self.sq.get(job_id)
                if found is not None and found.state == "cancelled":
                    self.model.claimed_cancelled(job_id)
        for job in jobs:
            if job.name == "cb":
                self.callback_runs.append(job.data)
                self.sq.complete(job)
            else:
                assert self.model.children.get(job.id) == "waiting", (job.id, self.model)
                self.held[job.id] = job
                self.model.move(job.id, "active")

    def _take(self) -> Job:
        job_id = self.rng.choice(sorted(self.held))
        return self.held.pop(job_id)

    def complete(self) -> None:
        job = self._take()
        self.sq.complete(job)
        self.model.move(job.id, "completed")

    def fail_dead(self) -> None:
        job = self._take()
        self.sq.fail(job, "boom", retry=False)
        self.model.move(job.id, "dead")

    def fail_retry(self) -> None:
        job = self._take()
        self.sq.fail(job, "again", retry_delay=0)
        self.model.move(job.id, "waiting")

    def release(self) -> None:
        job = self._take()
        self.sq.release(job)
        self.model.move(job.id, "waiting")

    def retry_dead(self) -> None:
        job_id = self.rng.choice(self.model.in_state("dead"))
        moved = self.sq.retry_dead([job_id])
        assert moved == [job_id], (job_id, self.sq.get(job_id), self.model)
        self.model.move(job_id, "waiting")

    def remove(self) -> None:
        job_id = self.rng.choice(self.model.present())
        self.held.pop(job_id, None)
        self.sq.remove(job_id)
        self.model.remove(job_id)

    def close(self) -> None:
        self.batch.close()
        self.model.close()

    def cancel(self) -> None:
        done = self.sq.cancel_batch(self.batch.id)
        assert done == self.model.cancel()
        if done:
            self.held.clear()  # taken from this "worker" (cancel semantics)

    def check(self, move: str) -> None:
        status = self.sq.batch_status(self.batch.id)
        counts = self.model.counts()
        seen = {
            "total": status.total,
            "waiting": status.waiting,
            "active": status.active,
            "completed": status.completed,
            "dead": status.dead,
            "cancelled": status.cancelled,
            "state": status.state,
            "fired": sorted(KINDS[k] for k, v in status.callbacks.items() if v),
        }
        want = {
            "total": len(self.model.children),
            **counts,
            "state": self.model.state(),
            "fired": sorted(self.model.fired),
        }
        assert seen == want, f"after {move}: server {seen} != model {want}"


@pytest.mark.parametrize("seed", range(12))
def test_batches_agree_with_the_model(sq: SyncQueue, seed: int) -> None:
    rng = random.Random(seed)
    driver = Driver(sq, rng)
    moves = []
    for _ in range(60):
        move = driver.step()
        moves.append(move)
        driver.check(" ".join(moves[-5:]))
    # every fired callback is one job: run what is left and count them
    while jobs := sq.claim(100):
        for job in jobs:
            if job.name == "cb":
                driver.callback_runs.append(job.data)
            sq.complete(job)
    assert sorted(driver.callback_runs) == sorted(driver.model.fired), moves
