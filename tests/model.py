"""A reference model of the order theorem (DESIGN §3), in plain Python, with no I/O.

Why: the property tests drive a real server and this model with the same
operations and demand identical claims. So this file *is* the spec, written
to be read rather than to be fast:

- a lane per group (``None`` = the default lane) is a heap of
  ``(tier, arrival, id)``; composite arrival is a queue-wide counter taken when
  the job becomes waiting, mint arrival is the id itself (ids sort in mint
  order);
- the ring lists the lanes with waiting jobs; a lane joins its tail when it
  goes from empty to non-empty;
- the head lane is served up to its weight in consecutive claims, or until it
  empties; then it moves to the tail (or leaves the ring if empty). The weight
  is read when a turn begins, so a change applies from the lane's next turn;
- ``claim(n)`` is n single claims;
- time (server milliseconds) only matters at a claim: it first promotes the
  delayed jobs that are due (by fire time, then id), then returns the expired
  leases (by deadline, then id), each to its old place in its lane (same tier
  and arrival), or to dead once its stalls pass ``max_stalls``;
- a paused queue still promotes and reaps at a claim, but claims nothing;
- where a job comes back (docs/ordering.md, docs/lifecycle.md):

  ============================== ============================================
  how it comes back              its place in the lane
  ============================== ============================================
  expired lease (stall)          its old place (same tier and arrival)
  ``release``                    its old place; the attempt is given back
  ``fail`` with a retry delay    a *fresh* arrival when it comes due:
                                 composite behind the jobs waiting then,
                                 mint at its id (its old place)
  ``retry_dead``                 a fresh arrival, as if added now; attempts
                                 and stalls start again from 0
  ============================== ============================================

  a failed job is dead instead once its attempts reach ``max_attempts`` (a
  claim is an attempt), or when it is failed without a retry.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass
from typing import Literal

Group = str | None
Ordering = Literal["composite", "mint"]
#: a lane entry; heap order is claim order: tier, then arrival, then id
Place = tuple[int, int | str, str]
NEVER = math.inf


@dataclass(slots=True)
class ModelJob:
    """What the model knows of one job."""

    tier: int
    group: Group
    max_attempts: int = 3
    place: Place | None = None  # set when the job becomes waiting (again: a fresh one)
    stalls: int = 0
    attempts: int = 0


class OrderModel:
    """Waiting jobs of one queue and the order in which claims must return them."""

    def __init__(
        self, ordering: Ordering = "composite", max_stalls: int = 1, max_attempts: int = 3
    ) -> None:
        self.ordering = ordering
        self.max_stalls = max_stalls
        self.max_attempts = max_attempts
        self.paused = False
        self.jobs: dict[str, ModelJob] = {}
        self.lanes: dict[Group, list[Place]] = {}
        self.ring: deque[Group] = deque()
        self.weights: dict[Group, int] = {}
        self.turn_left: int | None = None  # claims left in the head lane's turn; None = not begun
        self.counter = 0
        self.delayed: dict[str, float] = {}  # id -> fire time (ms)
        self.active: dict[str, float] = {}  # id -> lease deadline (ms)
        self.dead: set[str] = set()
        self.retrying: set[str] = set()  # failed jobs waiting out their retry delay
        self.completed: set[str] = set()

    # -- operations --------------------------------------------------------
    def add(
        self, job_id: str, tier: int = 0, group: Group = None, *, fire_at: float | None = None
    ) -> None:
        """A new job: waiting now, or delayed until ``fire_at`` (ms; ``NEVER`` for never)."""
        self.jobs[job_id] = ModelJob(tier, group, self.max_attempts)
        if fire_at is None:
            self._enter_lane(job_id)
        else:
            self.delayed[job_id] = fire_at

    def set_weight(self, group: Group, weight: int) -> None:
        self.weights[group] = weight

    def remove(self, job_id: str) -> None:
        """Delete a job in whatever state; a lane it leaves empty leaves the ring."""
        job = self.jobs.pop(job_id, None)
        if job is None:
            return
        self.delayed.pop(job_id, None)
        self.active.pop(job_id, None)
        self.dead.discard(job_id)
        self.retrying.discard(job_id)
        self.completed.discard(job_id)
        lane = self.lanes.get(job.group, [])
        if job.place in lane:
            lane.remove(job.place)
            heapq.heapify(lane)
            if not lane:
                self._leave_ring(job.group)

    def claim(self, n: int = 1, now: float = -NEVER, deadline: float = NEVER) -> list[str]:
        """Up to n jobs at server time ``now``, exactly as n single claims in a row.

        ``deadline`` is the lease deadline the claimed jobs get (ms).
        """
        self._promote(now)
        self._reap(now)
        claimed: list[str] = []
        while not self.paused and len(claimed) < n:
            job_id = self._claim_one()
            if job_id is None:
                break
            self.active[job_id] = deadline
            self.jobs[job_id].attempts += 1
            claimed.append(job_id)
        return claimed

    def complete(self, job_id: str) -> None:
        del self.active[job_id]
        self.completed.add(job_id)

    def fail(self, job_id: str, fire_at: float | None) -> str:
        """A failed attempt: retried at ``fire_at`` (ms) while attempts remain, else dead.

        ``fire_at=None`` is a fail without retry. Returns the state it leaves the job in.
        """
        del self.active[job_id]
        job = self.jobs[job_id]
        if fire_at is None or job.attempts >= job.max_attempts:
            self.dead.add(job_id)
            return "dead"
        self.delayed[job_id] = fire_at
        self.retrying.add(job_id)
        return "failed"

    def release(self, job_id: str) -> None:
        """Handed back unfinished: waiting at its old place, the attempt not counted."""
        del self.active[job_id]
        job = self.jobs[job_id]
        job.attempts = max(0, job.attempts - 1)
        self._enter_lane(job_id)

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False

    def retry_dead(self, job_ids: list[str]) -> list[str]:
        """Dead jobs back to waiting in the given order, fresh; ids not dead are skipped."""
        moved = []
        for job_id in job_ids:
            if job_id in self.dead:
                self.dead.remove(job_id)
                job = self.jobs[job_id]
                job.attempts = job.stalls = 0
                self._enter_lane(job_id, fresh=True)
                moved.append(job_id)
        return moved

    # -- reading -------------------------------------------------------------
    def waiting(self) -> int:
        return sum(len(lane) for lane in self.lanes.values())

    def waiting_ids(self) -> list[str]:
        """Waiting jobs lane by lane in ring order, each lane in (tier, arrival) order."""
        return [place[2] for group in self.ring for place in sorted(self.lanes[group])]

    def drain(self) -> list[str]:
        """Every waiting job in claim order (claims them all)."""
        return self.claim(len(self.jobs) + 1)

    # -- the rules -----------------------------------------------------------
    def _enter_lane(self, job_id: str, *, fresh: bool = False) -> None:
        """Into its lane: at its old place, or with a new arrival (first time, or ``fresh``)."""
        job = self.jobs[job_id]
        if job.place is None or fresh:
            self.counter += 1
            arrival: int | str = self.counter if self.ordering == "composite" else job_id
            job.place = (job.tier, arrival, job_id)
        lane = self.lanes.setdefault(job.group, [])
        if not lane:
            self.ring.append(job.group)
        heapq.heappush(lane, job.place)

    def _leave_ring(self, group: Group) -> None:
        if self.ring and self.ring[0] == group:
            self.turn_left = None
        self.ring.remove(group)

    def _claim_one(self) -> str | None:
        if not self.ring:
            return None
        group = self.ring[0]
        if self.turn_left is None:  # a new turn: the weight is read now
            self.turn_left = self.weights.get(group, 1)
        lane = self.lanes[group]
        job_id = heapq.heappop(lane)[2]
        self.turn_left -= 1
        if not lane:
            self.ring.popleft()
            self.turn_left = None
        elif self.turn_left == 0:
            self.ring.rotate(-1)
            self.turn_left = None
        return job_id

    def _promote(self, now: float) -> None:
        for _, job_id in sorted((f, i) for i, f in self.delayed.items() if f <= now):
            del self.delayed[job_id]
            self.retrying.discard(job_id)
            self._enter_lane(job_id, fresh=True)  # a retry comes due: a fresh arrival

    def _reap(self, now: float) -> None:
        for _, job_id in sorted((d, i) for i, d in self.active.items() if d <= now):
            del self.active[job_id]
            job = self.jobs[job_id]
            job.stalls += 1
            if job.stalls > self.max_stalls:
                self.dead.add(job_id)
            else:
                self._enter_lane(job_id)
