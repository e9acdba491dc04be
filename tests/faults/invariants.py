"""The invariant checker every fault case ends with: it reads server state only.

Why: a fault test is worth what its final check proves. After the faults
stop and the queue drains, the server must show that every job that was
acknowledged as added is in exactly one state, that each completion was
recorded once (however many times a handler ran: delivery is at-least-once),
that no lease is left behind, and that the lane bookkeeping (ring, waiting
count) agrees with the lanes themselves.

Executions are counted through a side channel the fault handlers write to
(``side_key(queue)``: one list entry per handler start), so duplicated
*executions* are visible and reported, while duplicated *completion records*
fail the check.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import redis

from echomq.keys import QueueKeys

_STATE_SETS = ("delayed", "active", "completed", "dead", "blocked", "cancelled")
_BATCH = 500


def side_key(queue: str) -> str:
    """The list a fault handler appends one JSON record to per execution start.

    Outside the queue's own keyspace so it never counts as a queue key.
    """
    return f"faultside:{{{queue}}}:exec"


@dataclass
class Report:
    """What the checker found; ``problems`` empty means every invariant holds."""

    states: Counter[str] = field(default_factory=Counter)
    executions: Counter[str] = field(default_factory=Counter)
    completed: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)

    @property
    def duplicate_executions(self) -> int:
        """Runs beyond the first of jobs that completed: redeliveries (at-least-once
        at work) and retries after a failed attempt; dead jobs' retries not counted."""
        return sum(self.executions[i] - 1 for i in self.completed if self.executions[i] > 1)

    def fail_if_any(self) -> None:
        assert not self.problems, "invariants broken:\n" + "\n".join(self.problems[:40])


def executions(client: redis.Redis, queue: str) -> list[dict[str, Any]]:
    """Every execution record written by the fault handlers, in start order."""
    return [json.loads(raw) for raw in client.lrange(side_key(queue), 0, -1)]


def _lane_keys(client: redis.Redis, keys: QueueKeys) -> list[str]:
    return sorted(str(k) for k in client.scan_iter(match=keys.lane("*"), count=1000))


def _check_lanes(client: redis.Redis, keys: QueueKeys, report: Report) -> dict[str, str]:
    """Ring = exactly the non-empty lanes, meta waiting count = Σ lane sizes.

    Returns id → lane key of every waiting job.
    """
    lane_keys = _lane_keys(client, keys)
    prefix = keys.lane("")
    sizes = {k[len(prefix) :]: int(client.zcard(k)) for k in lane_keys}
    ring = [str(x) for x in client.lrange(keys.ring, 0, -1)]
    nonempty = {lane for lane, n in sizes.items() if n > 0}
    if len(ring) != len(set(ring)):
        report.problems.append(f"ring has duplicates: {ring}")
    if set(ring) != nonempty:
        report.problems.append(f"ring {sorted(ring)} != non-empty lanes {sorted(nonempty)}")
    waiting = int(client.hget(keys.meta, "w") or 0)
    if waiting != sum(sizes.values()):
        report.problems.append(f"meta w={waiting} != sum of lane sizes {sum(sizes.values())}")
    where: dict[str, str] = {}
    for key in lane_keys:
        for member in client.zrange(key, 0, -1):
            where[str(member)] = key
    return where


def _members(client: redis.Redis, keys: QueueKeys) -> dict[str, set[str]]:
    out = {name: set(map(str, client.zrange(getattr(keys, name), 0, -1))) for name in _STATE_SETS}
    out["retrying"] = set(map(str, client.zrange(keys.retrying, 0, -1)))
    return out


def _check_job(
    job_id: str,
    hash_state: str | None,
    waiting_in: str | None,
    sets: dict[str, set[str]],
    expect: frozenset[str],
    report: Report,
) -> None:
    found = [name for name in _STATE_SETS if job_id in sets[name]]
    if waiting_in is not None:
        found.append("waiting")
    if len(found) != 1:
        report.problems.append(f"{job_id}: in {len(found)} state sets {found} (hash {hash_state})")
        return
    where = found[0]
    report.states[where] += 1
    if job_id in sets["retrying"]:
        where = "failed"  # retry pending: held in delayed, hash state "failed"
    if hash_state != where:
        report.problems.append(f"{job_id}: hash state {hash_state!r} but found in {where}")
    if where not in expect:
        report.problems.append(f"{job_id}: ended {where}, expected one of {sorted(expect)}")


def check(
    client: redis.Redis,
    queue: str,
    added: Iterable[str],
    *,
    expect: Iterable[str] = ("completed",),
    count_executions: bool = True,
    fresh_queue: bool = True,
) -> Report:
    """Check every invariant of ``queue`` for the ids in ``added``; return the report.

    ``expect``: the final states allowed (e.g. ``("completed", "dead")``).
    ``fresh_queue``: the queue held no jobs before the test, so the meta
    totals must match the ids exactly (completion recorded once).
    """
    keys = QueueKeys(queue)
    ids = sorted(set(added))
    report = Report()
    waiting_in = _check_lanes(client, keys, report)
    sets = _members(client, keys)
    if not sets["retrying"] <= sets["delayed"]:
        report.problems.append("retrying has ids that are not in delayed")
    for start in range(0, len(ids), _BATCH):
        chunk = ids[start : start + _BATCH]
        with client.pipeline(transaction=False) as pipe:
            for job_id in chunk:
                pipe.hget(keys.job(job_id), "s")
            states = pipe.execute()
        for job_id, state in zip(chunk, states, strict=True):
            _check_job(job_id, state, waiting_in.get(job_id), sets, frozenset(expect), report)
    if sets["active"] or client.zcard(keys.active):
        report.problems.append(f"leases left: {sorted(sets['active'])[:5]}")
    _check_totals(client, keys, ids, sets, report, fresh_queue)
    if count_executions:
        _check_executions(client, queue, sets["completed"], report)
    return report


def _check_totals(
    client: redis.Redis,
    keys: QueueKeys,
    ids: list[str],
    sets: dict[str, set[str]],
    report: Report,
    fresh_queue: bool,
) -> None:
    """A completion recorded twice would show as meta completed > completed ids."""
    extra = (sets["completed"] | sets["dead"]) - set(ids)
    if fresh_queue and extra:
        report.problems.append(f"{len(extra)} finished ids nobody added: {sorted(extra)[:5]}")
    meta = client.hgetall(keys.meta)
    done = int(meta.get("completed", 0))
    if fresh_queue and done != len(sets["completed"]):
        report.problems.append(
            f"meta completed total {done} != {len(sets['completed'])} completed ids"
        )
    added_total = int(meta.get("added", 0))
    if fresh_queue and added_total != len(ids):
        report.problems.append(f"meta added total {added_total} != {len(ids)} distinct ids")


def _check_executions(client: redis.Redis, queue: str, completed: set[str], report: Report) -> None:
    """Every completed job ran at least once (the side channel saw it start)."""
    report.executions = Counter(rec["id"] for rec in executions(client, queue))
    report.completed = set(completed)
    never = [job_id for job_id in completed if report.executions[job_id] == 0]
    if never:
        report.problems.append(f"{len(never)} completed jobs never ran: {never[:5]}")
