"""Dependencies under faults: a worker ``kill -9``-ed while it holds a job whose
completion releases 600 dependents, then a fan-out of 1,200 dependents whose
bounded release is cut by a ``kill -9`` + restart of the server (AOF with
``appendfsync always``), then another worker kill while the released jobs run.

Afterwards every dependent ran and completed, was released exactly once and
never before all its dependencies completed, and ran again only after its
lease had expired (delivery is at-least-once; a release is exactly once).

Why: a release is part of the completing script or of one bounded maintenance
step (includes/dependencies.lua), and what is left to release is stored
(``releasing``), so a crash between two steps loses nothing and repeats
nothing. The checks read the server only: the event stream, kept whole here,
is the order in which the scripts did things.
"""

from __future__ import annotations

import signal
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import pytest
import redis

from echomq.events import Event
from echomq.keys import QueueKeys
from echomq.sync import SyncQueue
from faults import invariants
from faults.procs import Workers, wait_for
from faults.test_server_crash import PERSISTENCE
from servers import PrivateServer, ServerFactory

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

#: dependents of the job whose worker is killed (> one release budget of 500).
OF_KILLED = 600
#: dependents of the gate, whose release the server crash cuts (> two budgets).
OF_GATE = 1_200
#: dependents of both: none may be released before the second completes.
FAN_IN = 50
#: what one completion releases at once (includes/dependencies.lua: a budget + 1 per job).
FIRST_STEP = 501
#: events that end a run without completing it: a later claim of the job is a new run
#: (a handler may fail here: its side-channel write meets the restarted server).
RUN_ENDED = frozenset({"stalled", "retrying", "released"})


def all_events(queue: SyncQueue) -> list[Event]:
    out: list[Event] = []
    cursor = "0"
    while True:
        page = queue.read_events(cursor)
        assert page.missed == 0, "the stream was trimmed: the checks need every event"
        if not page.events:
            return out
        out += page.events
        cursor = page.cursor


def count(client: redis.Redis, key: str) -> int:
    return int(client.zcard(key))


@dataclass
class History:
    """Where each job's events stand in the stream (positions, in event order)."""

    length: int = 0
    completed: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    unblocked: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    claimed: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    ended: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    stalled: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))

    @classmethod
    def of(cls, events: list[Event]) -> History:
        history = cls(len(events))
        for pos, event in enumerate(events):
            job_id = str(event.job_id)
            for name in ("completed", "unblocked", "claimed", "stalled"):
                if event.kind == name:
                    getattr(history, name)[job_id].append(pos)
            if event.kind in RUN_ENDED:
                history.ended[job_id].append(pos)
        return history

    def done_at(self, job_id: str) -> int:
        """Position of the job's completion (after the end if it never completed)."""
        return self.completed[job_id][0] if self.completed[job_id] else self.length


def dependent_problems(history: History, job_id: str, deps: list[str]) -> list[str]:
    """Released once, after every dependency completed, run only after its release,
    and run again only after a run that ended unfinished or a lease that expired."""
    released = history.unblocked[job_id]
    if len(released) != 1:
        return [f"{job_id} released {len(released)} times"]
    problems = []
    early = [d for d in deps if history.done_at(d) > released[0]]
    if early:
        problems.append(f"{job_id} released before {early} completed")
    claims = history.claimed[job_id]
    if not claims or claims[0] < released[0]:
        problems.append(f"{job_id} claimed before its release (or never)")
    for before, after in pairwise(claims):
        if not any(before < e < after for e in history.ended[job_id]):
            problems.append(f"{job_id} ran again while its first run held it")
    return problems


def dependency_problems(
    events: list[Event], needs: dict[str, list[str]], held_by_killed: set[str]
) -> list[str]:
    """What the event stream shows that breaks the dependency contract."""
    history = History.of(events)
    problems = [f"{j} completed twice" for j, at in history.completed.items() if len(at) > 1]
    for job_id, deps in needs.items():
        problems += dependent_problems(history, job_id, deps)
    for job_id in held_by_killed:
        if len(history.claimed[job_id]) < 2 or not history.stalled[job_id]:
            problems.append(f"{job_id}: its killed run was not taken over after its lease")
    return problems


@pytest.mark.parametrize("kind", ["valkey", "redis"])
def test_dependents_released_once_across_worker_and_server_kills(
    server_factory: ServerFactory, queue_name: str, kind: str, tmp_path: Path
) -> None:
    server: PrivateServer = server_factory(kind, PERSISTENCE["always"])
    keys = QueueKeys(queue_name)
    workers = Workers(server.url, queue_name, tmp_path, env={"FAULT_CONCURRENCY": "8"})
    needs: dict[str, list[str]] = {}
    with SyncQueue(queue_name, server.url) as queue:
        queue.configure(event_stream_length=1_000_000, keep_completed=1_000_000)
        # the gate is held by this test (a long lease) until the server-crash step
        gate_id = queue.add("work", {})
        [gate] = queue.claim(1, lease=600)
        assert gate.id == gate_id
        # its first run kills its own worker in the middle (faults/handlers.py)
        doomed = queue.add("work", {"kill": "middle", "sleep": 0.6})
        for job_id in queue.add_many([{"name": "work", "depends_on": [doomed]}] * OF_KILLED):
            needs[job_id] = [doomed]
        both = queue.add_many([{"name": "work", "depends_on": [doomed, gate_id]}] * FAN_IN)
        needs.update({job_id: [doomed, gate_id] for job_id in both})
        only_gate = [{"name": "work", "depends_on": [gate_id]}] * (OF_GATE - FAN_IN)
        needs.update({job_id: [gate_id] for job_id in queue.add_many(only_gate)})
        # a chain after one of them: the second generation waits for the first
        link = next(iter(needs))
        for _ in range(3):
            nxt = queue.add("work", {}, depends_on=[link])
            needs[nxt] = [link]
            link = nxt
        assert queue.stats().counts["blocked"] == len(needs)
    try:
        with server.client() as client:
            # 1. the worker holding `doomed` dies; another takes it over after its lease
            workers.spawn(), workers.spawn()
            workers.wait_ready(2)
            wait_for(lambda: len(workers.alive()) == 1, 30, "the kill of the doomed job's worker")
            survivors = workers.alive()
            assert len(survivors) == 1, workers.logs()
            wait_for(
                lambda: (
                    count(client, keys.completed) >= 1 + OF_KILLED + 3
                    and count(client, keys.active) == 1  # the gate
                    and int(client.hget(keys.meta, "w") or 0) == 0
                ),
                60,
                "the killed job's dependents (and their chain) ran",
            )
            blocked = count(client, keys.blocked)
            assert blocked == OF_GATE, f"{OF_GATE - blocked} released before the gate completed"
            # 2. the gate completes with every worker stopped; the server dies mid-release
            for proc in survivors:
                workers.signal(proc, signal.SIGSTOP)
            with SyncQueue(queue_name, server.url) as queue:
                assert queue.complete(gate) is not None
            server.kill()
            server.start()
        with server.client() as client:
            # fsync always: the first bounded step is on disk, the rest is still to release
            assert count(client, keys.blocked) == OF_GATE - FIRST_STEP
            assert client.zrange(keys.releasing, 0, -1) == [gate_id]
            for proc in survivors:
                workers.signal(proc, signal.SIGCONT)
            # 3. the released jobs run; one more worker kill while they do
            workers.spawn()
            wait_for(
                lambda: count(client, keys.completed) > OF_KILLED + 300, 60, "runs after restart"
            )
            workers.kill9(survivors[0])
            workers.spawn()
            wait_for(
                lambda: count(client, keys.completed) == len(needs) + 2,
                90,
                "every dependent completed",
            )
    finally:
        workers.stop_all()
    with server.client() as client, SyncQueue(queue_name, server.url) as queue:
        ids = [gate_id, doomed, *needs]
        # the gate completed in this test, not in a handler: executions are checked below
        invariants.check(client, queue_name, ids, count_executions=False).fail_if_any()
        ran = {rec["id"] for rec in invariants.executions(client, queue_name)}
        assert set(needs) <= ran
        events = all_events(queue)
        problems = dependency_problems(events, needs, {doomed})
        assert not problems, "\n".join(problems[:20]) + "\n" + workers.logs()
        assert count(client, keys.blocked) == 0 and count(client, keys.releasing) == 0
