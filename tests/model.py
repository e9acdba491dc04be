"""A reference model of the order theorem (DESIGN §3), in plain Python, with no I/O.

Why: the property tests drive a real server and this model with the same
operations and demand identical claims. So this file *is* the spec, written
to be read rather than to be fast:

- a lane per group (``None`` = the default lane) is a heap of
  ``(tier, arrival, id)``; composite arrival is a queue-wide counter taken when
  the job becomes waiting, mint arrival is the id itself (ids sort in mint
  order); in the aged ordering the heap holds ``(due + tier x age_step, id,
  id)`` (ms), the due time being when it entered its lane (the server time of
  an add, a dependency release or a ``retry_dead``; a delayed or retried job's
  fire time), kept by a stall, a ``release`` and a ``change``;
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

Lane controls (docs/ordering.md "Lane controls"): a lane that is paused or
at its concurrency cap when the rotation reaches it, or that reaches its cap
during its turn, is *parked*: it leaves the ring (a zero-claim turn) and
remembers its anchor, the lane placed at the ring's tail last (``vt``: the
lane whose turn ended last, that joined last or was parked last). When a job
of the lane leaves active (complete, fail, release, expired lease, remove) or
its controls change and it can be served again, it goes back right after the
nearest lane before it that is in the ring: its anchor, else its anchor's
anchor, … (a lane that left the ring while lanes were parked is followed to
the lane that was before it, ``gone``); with none, at the tail. So the ring's
cyclic order is kept: the rotation goes on past the parked lane as if it
took a zero-claim turn each time, and serves it at its next turn once it can
be served.

Backpressure and throttles (docs/ordering.md "Lane controls"): a lane with
``max_waiting = n`` refuses an add (or a ``change`` into it) that would make
it hold more than n waiting + delayed (incl. retry-pending) jobs: the
operation raises ``LaneFull`` and changes nothing (a batch is refused whole).
Jobs that come back (retry, stall, release, ``retry_dead``) are never refused.
A throttle far in the future (longer than any example) keeps the lane from
being served like a pause that cannot be lifted; a short one is waited out
before the next operation, so it changes nothing (and never shortens one in
force).

Dependencies (docs/lifecycle.md "Dependencies"): a job added with
``depends_on`` is *blocked* while a dependency has not completed (with all
completed it is waiting at once; a dead or unknown dependency refuses the
add). The completion of its last dependency releases it into its lane as a
new arrival (composite: behind the jobs waiting then; mint: by its id), in
that same step. Jobs released by one step enter their lanes in an order the
spec leaves open (the server reads the dependents set in random order): the
caller passes the order it observed, and the model checks it is a
permutation of what it released. A dependency that dies or is removed is
*orphaned*: the next ``maintain`` sends its blocked dependents to dead
(``run_anyway`` ones count it as done instead), and a dependent that dies so
is orphaned in turn, for the maintenance after that (one level per call).
"""

from __future__ import annotations

import copy
import heapq
import math
from collections import deque
from dataclasses import dataclass
from typing import Literal

Group = str | None
Ordering = Literal["composite", "mint", "aged"]
#: a lane entry; heap order is claim order: tier, then arrival, then id (aged:
#: due time + tier x age_step, then id, then id)
Place = tuple[float, int | str, str]
NEVER = math.inf
#: most parked lanes one claim or maintenance call rechecks for their time
#: (includes/controls.lua WAKE_BUDGET)
WAKE_BUDGET = 100


class _Unset:
    """No lane (the virtual tail before any lane was placed at the tail)."""


UNSET = _Unset()


@dataclass(slots=True)
class ModelJob:
    """What the model knows of one job."""

    tier: int
    group: Group
    max_attempts: int = 3
    place: Place | None = None  # set when the job becomes waiting (again: a fresh one)
    run_anyway: bool = False  # on_dependency_failure="run"
    stalls: int = 0
    attempts: int = 0


class OrderModel:
    """Waiting jobs of one queue and the order in which claims must return them."""

    def __init__(
        self,
        ordering: Ordering = "composite",
        max_stalls: int = 1,
        max_attempts: int = 3,
        age_step_ms: int = 60_000,
    ) -> None:
        self.ordering = ordering
        self.age_step_ms = age_step_ms
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
        # lane controls
        self.caps: dict[Group, int] = {}
        self.lane_paused: set[Group] = set()
        # rates: at most ``max`` claims from the lane in any window of its length
        # (ms; None: longer than any example, so ``max`` claims since the rate
        # was set); setting a rate starts a fresh record of claim times
        self.rates: dict[Group, int] = {}
        self.rate_windows: dict[Group, float | None] = {}
        self.rate_times: dict[Group, list[float]] = {}  # newest first, the last ``max``
        # the server's time (ms) as of the operation running: claim(now=...) and
        # tell(now) set it; a rate window ends by it
        self.now: float = -NEVER
        # parked lane -> the time (ms) the clock alone may let it be served (a
        # rate window's end; NEVER for a far throttle): a claim or maintenance
        # at or after it rechecks the lane (the server's lanewake set)
        self.lane_wake: dict[Group, float] = {}
        self.max_waiting: dict[Group, int] = {}
        self.throttled: set[Group] = set()  # a throttle in force for the rest of the example
        self.parked: dict[Group, Group] = {}  # parked lane -> its anchor
        self.gone: dict[Group, Group] = {}  # lane that left while lanes were parked -> pred
        self.vt: Group | _Unset = UNSET  # the lane last placed at the ring's tail
        # queue-wide limits (configure): a cap on all active jobs, and a rate
        # counted like a lane's (claims since it was set, a window longer than
        # any example)
        self.queue_cap: int | None = None
        self.queue_rate: int | None = None
        self.queue_rate_claims = 0
        # dependencies
        self.blocked: dict[str, set[str]] = {}  # blocked job -> dependencies not completed
        self.dependents: dict[str, list[str]] = {}  # job -> jobs added depending on it
        self.orphaned: list[str] = []  # died or removed with dependents: for maintenance
        self.dependencies: dict[str, list[str]] = {}  # job added with depends_on -> them

    # -- operations --------------------------------------------------------
    def add(
        self, job_id: str, tier: int = 0, group: Group = None, *, fire_at: float | None = None
    ) -> None:
        """A new job: waiting now, or delayed until ``fire_at`` (ms; ``NEVER`` for never)."""
        self.jobs[job_id] = ModelJob(tier, group, self.max_attempts)
        if fire_at is None:
            self._enter_lane(job_id)  # aged: due now (tell() the add's server time first)
        else:
            self.delayed[job_id] = fire_at

    def add_dependent(
        self,
        job_id: str,
        tier: int,
        group: Group,
        depends_on: list[str],
        *,
        run_anyway: bool = False,
    ) -> str:
        """A job added with ``depends_on``: "blocked", or "waiting" when every
        dependency completed already. A dependency that is dead or not there
        refuses the add (the caller checks ``refused_dependency`` first)."""
        assert self.refused_dependency(depends_on) is None
        self.jobs[job_id] = ModelJob(tier, group, self.max_attempts, run_anyway=run_anyway)
        self.dependencies[job_id] = list(depends_on)
        pending = {d for d in depends_on if d not in self.completed}
        if not pending:
            self._enter_lane(job_id)
            return "waiting"
        self.blocked[job_id] = pending
        for dep in sorted(pending):
            self.dependents.setdefault(dep, []).append(job_id)
        return "blocked"

    def refused_dependency(self, depends_on: list[str]) -> str | None:
        """The first dependency an add must refuse (dead, or not there), else None."""
        for dep in depends_on:
            if dep not in self.jobs or dep in self.dead:
                return dep
        return None

    def releasing(self, job_id: str) -> set[str]:
        """The blocked jobs the completion of ``job_id`` would release now."""
        return {d for d in self.dependents.get(job_id, []) if self.blocked.get(d) == {job_id}}

    def _enter_released(self, released: set[str], order: list[str] | None) -> None:
        """Released jobs into their lanes in ``order`` (what the server did; any
        permutation of ``released`` is allowed), by id when not given."""
        order = sorted(released) if order is None else order
        assert sorted(order) == sorted(released), f"released {order}, the model {released}"
        for job_id in order:
            del self.blocked[job_id]
            self._enter_lane(job_id, fresh=True)

    def _died(self, job_id: str) -> None:
        """A job that died or was removed: its blocked dependents wait for maintenance."""
        if self.dependents.get(job_id) and job_id not in self.orphaned:
            self.orphaned.append(job_id)

    def maintain(self, now: float = -NEVER, order: list[str] | None = None) -> int:
        """A maintenance call (promote, return expired leases, then the orphaned
        dependencies; then the lanes that got slots back, then the woken ones, are
        rechecked); returns its steps for blocked jobs (one per orphaned
        dependency of each blocked job it meets: MaintenanceReport.released)."""
        self.tell(now)
        woken = self._woken()
        self._promote(now)
        # the orphans known before this call's leases are returned (the server
        # plans its releases first): a job buried by this call waits for the next
        orphaned, self.orphaned = self.orphaned, []
        freed = self._reap(now)
        steps = 0
        released: set[str] = set()
        for dep in orphaned:
            if dep in self.jobs and dep not in self.dead:
                continue  # alive again (retry_dead): its dependents wait on
            for job_id in self.dependents.pop(dep, []):
                if job_id not in self.blocked:
                    continue
                steps += 1
                if self.jobs[job_id].run_anyway:
                    self.blocked[job_id].discard(dep)
                    if not self.blocked[job_id]:
                        released.add(job_id)
                        self.blocked[job_id] = {dep}  # released below
                else:
                    del self.blocked[job_id]
                    self.dead.add(job_id)
                    self._died(job_id)
        self._enter_released(released, order)
        for group in [*freed, *woken]:
            self._recheck(group)
        return steps

    def refused_lane(self, groups: list[Group]) -> Group | _Unset:
        """The first lane (in order of first appearance) that adding one job per
        entry of ``groups`` would push past its max_waiting, else UNSET."""
        adding: dict[Group, int] = {}
        for group in groups:
            adding[group] = adding.get(group, 0) + 1
        for group, count in adding.items():
            most = self.max_waiting.get(group)
            if most is not None and self.held(group) + count > most:
                return group
        return UNSET

    def held(self, group: Group) -> int:
        """What max_waiting counts: the lane's waiting and delayed (incl. retry-pending) jobs."""
        delayed = sum(1 for job_id in self.delayed if self.jobs[job_id].group == group)
        return len(self.lanes.get(group, [])) + delayed

    def throttle(self, group: Group, *, far: bool) -> None:
        """A throttle: far (the lane is not served for the rest of the example) or
        short (waited out before the next operation: no effect, and it never
        shortens one in force)."""
        if far:
            self.throttled.add(group)

    def set_weight(self, group: Group, weight: int) -> None:
        self.weights[group] = weight

    def set_lane(
        self,
        group: Group,
        *,
        concurrency: int | _Unset | None = UNSET,
        paused: bool | None = None,
        rate: int | _Unset | None = UNSET,
        max_waiting: int | _Unset | None = UNSET,
        window: float | None = None,
    ) -> None:
        """Change a lane's cap (None removes it) or pause it; a parked lane that can
        be served now goes back into the ring. ``rate`` claims per ``window`` ms
        (None: a window longer than any example)."""
        if max_waiting is None:
            self.max_waiting.pop(group, None)
        elif not isinstance(max_waiting, _Unset):
            self.max_waiting[group] = max_waiting
        if concurrency is None:
            self.caps.pop(group, None)
        elif not isinstance(concurrency, _Unset):
            self.caps[group] = concurrency
        if rate is None:
            self.rates.pop(group, None)
        elif not isinstance(rate, _Unset):
            self.rates[group] = rate
            self.rate_windows[group] = window
        if not isinstance(rate, _Unset):
            self.rate_times[group] = []
        if paused is True:
            self.lane_paused.add(group)
        elif paused is False:
            self.lane_paused.discard(group)
        self._recheck(group)

    def configure(
        self, *, concurrency: int | _Unset | None = UNSET, rate: int | _Unset | None = UNSET
    ) -> None:
        """The queue-wide cap and rate (None removes one); a set rate starts afresh.
        They stop claims, never park a lane nor change the ring."""
        if not isinstance(concurrency, _Unset):
            self.queue_cap = concurrency
        if not isinstance(rate, _Unset):
            self.queue_rate = rate
            self.queue_rate_claims = 0

    def _queue_allows(self) -> bool:
        if self.queue_cap is not None and len(self.active) >= self.queue_cap:
            return False
        return self.queue_rate is None or self.queue_rate_claims < self.queue_rate

    def change(self, job_id: str, tier: int, group: Group) -> bool:
        """Move a waiting or delayed job to another tier and lane, keeping its arrival.

        False (nothing changed) when the job would enter a lane at its max_waiting."""
        job = self.jobs[job_id]
        if group != job.group and not isinstance(self.refused_lane([group]), _Unset):
            return False
        assert (job_id in self.delayed and job_id not in self.retrying) or self._is_waiting(job_id)
        if job_id in self.delayed:
            job.tier, job.group = tier, group
            return True
        assert job.place is not None
        lane = self.lanes[job.group]
        lane.remove(job.place)
        heapq.heapify(lane)
        if self.ordering == "aged":  # its due time kept
            due = job.place[0] - job.tier * self.age_step_ms
            job.place = (due + tier * self.age_step_ms, job_id, job_id)
        else:
            job.place = (tier, job.place[1], job_id)
        job.tier = tier
        if job.group == group:  # a new tier in the same lane: the ring is as it was
            heapq.heappush(lane, job.place)
            return True
        if not lane:
            self._leave_ring(job.group)
        job.group = group
        self._enter_lane(job_id)
        return True

    def _is_waiting(self, job_id: str) -> bool:
        place = self.jobs[job_id].place
        return place is not None and place in self.lanes.get(self.jobs[job_id].group, [])

    def remove(self, job_id: str) -> None:
        """Delete a job in whatever state; a lane it leaves empty leaves the ring."""
        job = self.jobs.pop(job_id, None)
        if job is None:
            return
        self.delayed.pop(job_id, None)
        was_active = self.active.pop(job_id, None) is not None
        self.dead.discard(job_id)
        self.retrying.discard(job_id)
        self.blocked.pop(job_id, None)
        if job_id in self.completed:
            self.completed.discard(job_id)  # its dependents were released already
        else:
            self._died(job_id)
        lane = self.lanes.get(job.group, [])
        if job.place in lane:
            lane.remove(job.place)
            heapq.heapify(lane)
            if not lane:
                self._leave_ring(job.group)
        if was_active:
            self._recheck(job.group)

    def claim(self, n: int = 1, now: float = -NEVER, deadline: float = NEVER) -> list[str]:
        """Up to n jobs at server time ``now``, exactly as n single claims in a row.

        ``deadline`` is the lease deadline the claimed jobs get (ms).
        """
        self.tell(now)
        woken = self._woken()
        self._promote(now)
        freed = self._reap(now)
        for group in freed:
            self._recheck(group)
        for group in woken:
            self._recheck(group)
        claimed: list[str] = []
        while not self.paused and len(claimed) < n and self._queue_allows():
            job_id = self._claim_one()
            if job_id is None:
                break
            self.queue_rate_claims += 1
            self.active[job_id] = deadline
            self.jobs[job_id].attempts += 1
            claimed.append(job_id)
        return claimed

    def complete(self, job_id: str, order: list[str] | None = None) -> None:
        """Completed; the dependents it was the last pending dependency of enter
        their lanes in ``order`` (see _enter_released)."""
        del self.active[job_id]
        self.completed.add(job_id)
        self._recheck(self.jobs[job_id].group)
        released = self.releasing(job_id)
        for dependent in self.dependents.pop(job_id, []):
            if dependent in self.blocked and dependent not in released:
                self.blocked[dependent].discard(job_id)
        self._enter_released(released, order)

    def fail(self, job_id: str, fire_at: float | None) -> str:
        """A failed attempt: retried at ``fire_at`` (ms) while attempts remain, else dead.

        ``fire_at=None`` is a fail without retry. Returns the state it leaves the job in.
        """
        del self.active[job_id]
        job = self.jobs[job_id]
        self._recheck(job.group)
        if fire_at is None or job.attempts >= job.max_attempts:
            self.dead.add(job_id)
            self._died(job_id)
            return "dead"
        self.delayed[job_id] = fire_at
        self.retrying.add(job_id)
        return "failed"

    def release(self, job_id: str, *, throttle_far: bool = False) -> None:
        """Handed back unfinished: waiting at its old place, the attempt not counted.

        ``throttle_far``: with a far throttle of its lane, set before the lane is
        rechecked (``RateLimited`` from a handler: one script)."""
        del self.active[job_id]
        job = self.jobs[job_id]
        if throttle_far:
            self.throttled.add(job.group)
        job.attempts = max(0, job.attempts - 1)
        self._enter_lane(job_id)
        self._recheck(job.group)

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

    def position(self, job_id: str) -> tuple[int, int]:
        """(lane_ahead, queue_ahead) of a waiting job: its rank in its lane, and the
        claims the rotation makes before it with no adds and no control binding
        (a copy of the model, its controls lifted, claims one job at a time
        until it is served)."""
        job = self.jobs[job_id]
        lane_ahead = sorted(self.lanes[job.group]).index(job.place)  # type: ignore[arg-type]
        sim = copy.deepcopy(self)
        sim.caps.clear()
        sim.lane_paused.clear()
        sim.rates.clear()
        sim.throttled.clear()
        queue_ahead = 0
        while (got := sim._claim_one()) != job_id:
            assert got is not None, f"{job_id} was never served"
            queue_ahead += 1
        return lane_ahead, queue_ahead

    def drain(self) -> list[str]:
        """Every waiting job in claim order (claims them all)."""
        return self.claim(len(self.jobs) + 1)

    # -- the rules -----------------------------------------------------------
    def _enter_lane(self, job_id: str, *, fresh: bool = False, due: float | None = None) -> None:
        """Into its lane: at its old place, or with a new arrival (first time, or ``fresh``).

        Aged: a new place's key is ``due`` (default: now) + tier x age_step."""
        job = self.jobs[job_id]
        if (job.place is None or fresh) and self.ordering == "aged":
            key = (self.now if due is None else due) + job.tier * self.age_step_ms
            job.place = (key, job_id, job_id)
        elif job.place is None or fresh:
            self.counter += 1
            arrival: int | str = self.counter if self.ordering == "composite" else job_id
            job.place = (job.tier, arrival, job_id)
        lane = self.lanes.setdefault(job.group, [])
        if not lane and job.group not in self.parked:
            self.ring.append(job.group)
            self.vt = job.group
        heapq.heappush(lane, job.place)

    def _leave_ring(self, group: Group) -> None:
        """A lane that emptied (not by a claim) leaves the ring, or the parked lanes."""
        if group in self.parked:
            anchor = self.parked[group]
            if self.vt == group:
                self.vt = anchor
            self._unparked(group)
            if self.parked and anchor != group:
                self.gone[group] = anchor
            return
        if self.ring and self.ring[0] == group:
            self.turn_left = None
        pos = self.ring.index(group)
        pred: Group | _Unset = self.vt if pos == 0 else self.ring[pos - 1]
        self._left_cycle(group, pred)
        self.ring.remove(group)

    def _left_cycle(self, group: Group, pred: Group | _Unset) -> None:
        if pred == group:
            pred = UNSET
        if self.parked and not isinstance(pred, _Unset):
            self.gone[group] = pred
        if self.vt == group:
            self.vt = pred

    # -- lane controls -------------------------------------------------------
    def active_in(self, group: Group) -> int:
        return sum(1 for job_id in self.active if self.jobs[job_id].group == group)

    def tell(self, now: float) -> None:
        """The server's time (ms) of the operation that follows; it only moves forward."""
        self.now = max(self.now, now)

    def _rate_used(self, group: Group) -> int:
        """The lane's claims inside its rate window at ``now``."""
        times, window = self.rate_times.get(group, []), self.rate_windows.get(group)
        if window is None:
            return len(times)
        return sum(1 for t in times if t + window > self.now)

    def eligible(self, group: Group) -> bool:
        if group in self.lane_paused or group in self.throttled:
            return False
        if group in self.rates and self._rate_used(group) >= self.rates[group]:
            return False
        cap = self.caps.get(group)
        return cap is None or self.active_in(group) < cap

    def _wake_at(self, group: Group) -> float | None:
        """When the clock alone may let an ineligible lane be served (checked in the
        server's order: a pause, a throttle, the cap, the rate); None: only an event."""
        if group in self.lane_paused:
            return None
        if group in self.throttled:
            return NEVER
        cap = self.caps.get(group)
        if cap is not None and self.active_in(group) >= cap:
            return None
        window = self.rate_windows.get(group)
        if window is None:
            return NEVER
        return self.rate_times[group][self.rates[group] - 1] + window  # the max-th newest

    def _woken(self) -> list[Group]:
        """Parked lanes whose time came, as the server reads them: by time, then name."""
        wake = self.lane_wake
        due = sorted((at, "" if g is None else g, g) for g, at in wake.items() if at <= self.now)
        return [g for _, _, g in due[:WAKE_BUDGET]]

    def _park_head(self) -> None:
        group = self.ring[0]
        anchor = self.vt if not isinstance(self.vt, _Unset) else self.ring[-1]
        self.ring.popleft()
        self.parked[group] = anchor
        self.vt = group
        at = self._wake_at(group)
        if at is not None:
            self.lane_wake[group] = at

    def _unparked(self, group: Group) -> None:
        del self.parked[group]
        self.lane_wake.pop(group, None)
        if not self.parked:
            self.gone.clear()

    def _pivot(self, group: Group) -> Group | _Unset:
        """The nearest lane before a parked lane that is in the ring, or UNSET (the tail)."""
        x: Group | _Unset = self.parked[group]
        for _ in range(64):
            if isinstance(x, _Unset) or x == group:
                return UNSET
            if x in self.parked:
                x = self.parked[x]
            elif self.lanes.get(x):
                return x
            else:
                x = self.gone.get(x, UNSET)
        return UNSET

    def _recheck(self, group: Group) -> None:
        """A parked lane that can be served goes back right after its pivot; one
        that cannot waits for its time (if the clock alone can end its wait)."""
        if group not in self.parked:
            return
        if not self.eligible(group):
            at = self._wake_at(group)
            if at is None:
                self.lane_wake.pop(group, None)
            else:
                self.lane_wake[group] = at
            return
        pivot = self._pivot(group)
        self._unparked(group)
        if not isinstance(pivot, _Unset) and pivot in self.ring:
            self.ring.insert(self.ring.index(pivot) + 1, group)
        else:
            self.ring.append(group)

    def _claim_one(self) -> str | None:
        while self.ring and not self.eligible(self.ring[0]):
            self._park_head()  # a zero-claim turn; the turn (if begun) ends
            self.turn_left = None
        if not self.ring:
            return None
        group = self.ring[0]
        if self.turn_left is None:  # a new turn: the weight is read now
            self.turn_left = self.weights.get(group, 1)
        lane = self.lanes[group]
        job_id = heapq.heappop(lane)[2]
        self.turn_left -= 1
        self.active[job_id] = NEVER  # counted at once (the caller sets the deadline)
        if group in self.rates:
            times = [self.now, *self.rate_times.get(group, [])]
            self.rate_times[group] = times[: self.rates[group]]
        if not lane:
            self.ring.popleft()
            self._left_cycle(group, self.vt)
            self.turn_left = None
        elif not self.eligible(group):
            self._park_head()  # it reached its cap during its turn: the turn ends
            self.turn_left = None
        elif self.turn_left == 0:
            self.ring.rotate(-1)
            self.vt = group
            self.turn_left = None
        return job_id

    def _promote(self, now: float) -> None:
        for fire, job_id in sorted((f, i) for i, f in self.delayed.items() if f <= now):
            del self.delayed[job_id]
            self.retrying.discard(job_id)
            self._enter_lane(job_id, fresh=True, due=fire)  # a retry comes due: a fresh arrival

    def _reap(self, now: float) -> list[Group]:
        """Expired leases back (or dead); returns the lanes that got slots back."""
        freed: list[Group] = []
        for _, job_id in sorted((d, i) for i, d in self.active.items() if d <= now):
            del self.active[job_id]
            job = self.jobs[job_id]
            if job.group not in freed:
                freed.append(job.group)
            job.stalls += 1
            if job.stalls > self.max_stalls:
                self.dead.add(job_id)
                self._died(job_id)
            else:
                self._enter_lane(job_id)
        return freed
