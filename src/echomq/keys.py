"""The only module that builds key names.

Every key of queue ``Q`` is ``emq:{Q}:<part>``: the braces are the cluster
hash tag, so a whole queue lives in one slot and every script touches one
slot. Keys that depend on data (a job's hash, a lane's set, an idempotency
key) are built server-side by ``scripts/includes/keys.lua`` from the same
prefix; ``tests/integration/test_keyspace.py`` proves the two agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from echomq.errors import InvalidName

NAME_PATTERN = re.compile(r"[A-Za-z0-9._:\-]{1,128}")
NAME_RULE = "1–128 characters of A–Z a–z 0–9 . _ - :"

#: the group name that stands for the default lane (not a valid group name).
DEFAULT_LANE = ""


def check_name(kind: str, name: object) -> str:
    """Return ``name`` if it is a valid queue or group name, else raise InvalidName."""
    if not isinstance(name, str) or NAME_PATTERN.fullmatch(name) is None:
        raise InvalidName(f"invalid {kind} name {name!r}: must be {NAME_RULE}")
    return name


def lane_of(group: str | None) -> str:
    """The lane name for a group (``None`` → the default lane)."""
    return DEFAULT_LANE if group is None else check_name("group", group)


def group_of(lane: str) -> str | None:
    """The group a lane name stands for (the default lane → ``None``)."""
    return None if lane == DEFAULT_LANE else lane


#: SCAN pattern matching the meta hash of every queue (each queue that ever held jobs).
META_PATTERN = "emq:{*}:meta"


def queue_of_meta(key: str) -> str | None:
    """The queue a meta key found by META_PATTERN belongs to, or None if it is not one."""
    if not (key.startswith("emq:{") and key.endswith("}:meta")):
        return None
    name = key[len("emq:{") : -len("}:meta")]
    return name if NAME_PATTERN.fullmatch(name) else None


@dataclass(frozen=True, slots=True)
class QueueKeys:
    """Key names of one queue."""

    queue: str

    def __post_init__(self) -> None:
        check_name("queue", self.queue)

    @property
    def prefix(self) -> str:
        return f"emq:{{{self.queue}}}:"

    def _part(self, part: str) -> str:
        return self.prefix + part

    # fixed keys (always passed to scripts in KEYS)
    @property
    def meta(self) -> str:
        """hash: o (ordering), v (stored format), paused, w (waiting count),
        added / completed / failed (running totals)."""
        return self._part("meta")

    @property
    def counter(self) -> str:
        """string: the arrival counter (composite ordering)."""
        return self._part("counter")

    @property
    def ring(self) -> str:
        """list: lanes with waiting jobs, head first."""
        return self._part("ring")

    @property
    def turn(self) -> str:
        """hash: lane, left (claims left in the head lane's turn)."""
        return self._part("turn")

    @property
    def weights(self) -> str:
        """hash: group → weight (absent = 1)."""
        return self._part("weights")

    @property
    def served(self) -> str:
        """hash: lane → claims served since the lane joined the ring."""
        return self._part("served")

    @property
    def delayed(self) -> str:
        """zset: delayed and retry-pending jobs scored by fire time (ms)."""
        return self._part("delayed")

    @property
    def retrying(self) -> str:
        """zset: the retry-pending (failed) subset of delayed, scored by fire time."""
        return self._part("retrying")

    @property
    def active(self) -> str:
        """zset: claimed jobs scored by lease deadline (ms)."""
        return self._part("active")

    @property
    def completed(self) -> str:
        """zset: completed jobs scored by finish time (ms), pruned by retention."""
        return self._part("completed")

    @property
    def dead(self) -> str:
        """zset: dead jobs scored by time of death (ms), pruned by retention."""
        return self._part("dead")

    @property
    def wake(self) -> str:
        """list: a one-element doorbell that idle workers block on."""
        return self._part("wake")

    @property
    def settings(self) -> str:
        """hash: the queue's stored settings (``configure``); absent fields take the
        client's defaults."""
        return self._part("settings")

    @property
    def events(self) -> str:
        """stream: the queue's capped event log."""
        return self._part("events")

    @property
    def waiters(self) -> str:
        """zset: job ids a client waits on (``wait``), scored by the wait's deadline (ms)."""
        return self._part("waiters")

    @property
    def renumber(self) -> str:
        """zset: job id → arrival counter, the index of a renumbering of the
        arrival counter in progress (docs/ordering.md); absent otherwise."""
        return self._part("renumber")

    @property
    def schedules(self) -> str:
        """hash: schedule id → its definition (JSON: timing, job, revision)."""
        return self._part("schedules")

    @property
    def fires(self) -> str:
        """zset: schedule id → its next fire time (ms); a paused schedule is absent."""
        return self._part("fires")

    @property
    def fired(self) -> str:
        """hash: schedule id → its last fire (JSON: fire time, job id, skips, paused)."""
        return self._part("fired")

    @property
    def blocked(self) -> str:
        """zset: jobs waiting for their dependencies, scored by the time they were added."""
        return self._part("blocked")

    @property
    def releasing(self) -> str:
        """zset: completed jobs whose dependents are still being released (in bounded
        steps), scored by completion time."""
        return self._part("releasing")

    @property
    def cancelled(self) -> str:
        """zset: jobs of a cancelled batch that never ran (state ``cancelled``),
        scored by the time they were cancelled."""
        return self._part("cancelled")

    def batch(self, batch_id: str) -> str:
        """hash: one batch's counters, callbacks and flags (scripts/includes/batch.lua)."""
        return self._part(f"batch:{batch_id}")

    @property
    def batches(self) -> str:
        """zset: the queue's batches → their creation time (ms), newest last; made by
        the first batch, swept of batches gone by each later one (includes/batch.lua)."""
        return self._part("batches")

    def batch_jobs(self, batch_id: str) -> str:
        """zset: a batch's children → their place in it."""
        return self._part(f"batch:{batch_id}:jobs")

    def batch_done(self, batch_id: str) -> str:
        """zset: a batch's finished children → the order they first finished in."""
        return self._part(f"batch:{batch_id}:done")

    @property
    def done_channel(self) -> str:
        """shard channel (not a key): the ids of waited-on jobs that became final or
        were deleted, published by the scripts (includes/retention.lua, "Waiters")."""
        return self._part("done")

    @property
    def lanectl(self) -> str:
        """hash: lane controls and counters (``c:L`` cap, ``r:L`` rate, ``p:L`` paused,
        ``m:L`` max_waiting, ``t:L`` throttled until, ``a:L`` active, ``d:L`` delayed,
        ``k:L`` the anchor of a parked lane; ``vt`` the ring's virtual tail, ``np``
        parked lanes): includes/controls.lua."""
        return self._part("lanectl")

    @property
    def lanewake(self) -> str:
        """zset: parked lane → the time (ms) its rate window or throttle ends."""
        return self._part("lanewake")

    @property
    def gone(self) -> str:
        """hash: lane that left the ring while lanes were parked → the lane before it."""
        return self._part("gone")

    # data-dependent keys (built by includes/keys.lua on the server)
    def job(self, job_id: str) -> str:
        return self._part("job:" + job_id)

    def lane(self, lane: str) -> str:
        return self._part("lane:" + lane)

    def idem(self, key: str) -> str:
        return self._part("idem:" + key)

    def rate(self, lane: str) -> str:
        """list: a rate-limited lane's last claim times (ms), newest first."""
        return self._part("rate:" + lane)

    @property
    def queue_rate(self) -> str:
        """list: the queue's last claim times (ms), newest first, under a queue-wide
        ``rate`` (``configure``)."""
        return self._part("qrate")

    def dependents(self, job_id: str) -> str:
        """set: the blocked jobs that wait for ``job_id`` to complete."""
        return self._part("dependents:" + job_id)

    def readers(self, job_id: str) -> str:
        """set: the dependents of the completed job ``job_id`` that may still read its
        result; retention keeps the job while one of them has not finished."""
        return self._part("readers:" + job_id)

    def tag(self, key: str, value: str) -> str:
        """zset: the ids of the jobs carrying the tag ``key=value``, scored by their
        creation time (ms); gone with its last job (echomq.tags)."""
        return self._part(f"tag:{key}={value}")

    def log(self, job_id: str) -> str:
        """list: the job's log lines, oldest first (includes/logs.lua); gone with its job."""
        return self._part("log:" + job_id)

    @property
    def workers(self) -> str:
        """zset: the ids of the running workers, scored by when their entry expires
        (ms): three heartbeats after the last (includes/workers.lua)."""
        return self._part("workers")

    def worker(self, worker_id: str) -> str:
        """hash: what a running worker told (i), when it started (st) and last beat
        (se); expires three heartbeats after its last beat."""
        return self._part("worker:" + worker_id)

    def metrics(self, minute: int) -> str:
        """hash: the metrics of one minute (ms // 60000, server clock), a field per job
        name (includes/metrics.lua); expires 72 hours after the minute began."""
        return self._part(f"metrics:{minute}")

    def stop_bell(self, worker_id: str) -> str:
        """list: pushed once by a stopping worker to end its own doorbell wait
        (client-side only; it lives for seconds at most)."""
        return self._part("stop:" + worker_id)

    def fixed(self) -> list[str]:
        """Every fixed key of the queue, in the order scripts receive them."""
        return [
            self.meta,
            self.counter,
            self.ring,
            self.turn,
            self.weights,
            self.served,
            self.delayed,
            self.retrying,
            self.active,
            self.completed,
            self.dead,
            self.wake,
            self.settings,
            self.events,
            self.waiters,
            self.renumber,
            self.lanectl,
            self.lanewake,
            self.gone,
            self.schedules,
            self.fires,
            self.fired,
            self.blocked,
            self.releasing,
            self.cancelled,
        ]
