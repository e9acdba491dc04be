"""The upgrade from stored formats 1, 2 and 3 to 4 under load, both versions running
(docs/design.md §9, issue 29).

An older queue is built by the older format's real code (test_format_upgrade's
builder, run from the commit in git history), with waiting, delayed, active,
retrying, blocked, dead and completed jobs, a stored setting, a lane weight, a
lane cap, a paused lane and a schedule. Then, in separate processes:

1. an old client claims a job of the default lane and holds it until the
   upgrade; an old producer and an old worker (slower than the producer, so
   a backlog in every lane and tier spans the upgrade) run on the queue;
2. a new producer and a new worker (this code) start: the first of them to
   greet the queue upgrades it to format 4, while the old ones keep adding,
   claiming, completing and maintaining (as a rolling deploy leaves them until
   they are restarted);
3. an old client that connects after the upgrade refuses, loudly
   (FormatTooNew, and writes nothing);
4. the workers stop, the producers go on a little (a backlog written by both
   versions), then stop;
5. one new client drains the queue: unpauses the paused lane, completes the
   job the builder left active (which releases the blocked one), maintains.

Every process records what it added and what it ran in Redis lists. The test
asserts: every job ran exactly once and none was lost (the runs are exactly
the jobs added, whichever version added or ran them); within a lane and a
tier the new worker claimed in arrival order (the server's arrival counter in
the score, and each producer's own order), and the final drain claimed each
lane in priority order, then arrival; no paused lane was served; every job
is readable at the end with its payload, in the state it ended in; and once
maintenance has run the default lane's active count is 0 again (the held
job was counted in the meta hash by the upgrade and given back in the lane
controls' hash by the old code: design.md §9).

Each case takes 3-6 s (Valkey 8.1 and 9.1, Redis 7, the local cluster).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from echomq import SyncQueue, storage
from echomq.keys import QueueKeys
from integration.test_format_upgrade import FORMAT_COMMITS, build_older_queue

SRC = Path(__file__).resolve().parents[2] / "src"

#: how long each phase may take at most (s): the machine is shared and slow
PHASE_TIMEOUT = 20.0
#: jobs each producer and worker must have handled in a phase before it ends
PER_PHASE = 20
#: the old worker's handler takes this long (s): slower than its producer, it
#: leaves a backlog in every lane and tier that the upgrade happens beneath
OLD_WORK = 0.02

#: a producer or worker of either version (its code is the one on PYTHONPATH):
#: records what it adds ("added") and what it runs ("runs") as JSON in Redis lists
CLIENT = r"""
import json, os, sys, time
from urllib.parse import urlsplit

import redis
from redis.cluster import RedisCluster

from echomq import LeaseLost, SyncQueue

url, name, role, side = sys.argv[1:5]
NEW = os.environ["ECHOMQ_TEST_NEW_FORMAT"]  # the format the new code writes
work = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0  # a worker's handler: seconds a job
if "+cluster://" in url:
    at = urlsplit(url)
    r = RedisCluster(host=at.hostname, port=at.port, decode_responses=True)
else:
    r = redis.Redis.from_url(url, decode_responses=True)
LANES = [None, "heavy", "capped"]


def stopped(what):
    return r.exists(f"{name}:stop-{what}") == 1


with SyncQueue(name, url) as q:
    if role == "late":
        q.add("late", {"side": side})  # an older client after the upgrade: refused
    elif role == "holder":  # holds a job across the upgrade; gives it back after it
        [job] = q.claim(1, lease=60)
        r.rpush(f"{name}:held", job.id)
        deadline = time.monotonic() + 30
        while r.hget("emq:{" + name + "}:meta", "v") != NEW and time.monotonic() < deadline:
            time.sleep(0.01)
        run = [job.id, side, job.name, job.group or "", job.priority, job.score]
        r.rpush(f"{name}:runs", json.dumps(run))
        q.complete(job, None)
    elif role == "producer":
        seq = 0
        while not stopped("producers"):
            lane, tier = LANES[seq % 3], (seq // 3) % 3
            delayed = seq % 7 == 6
            job_id = q.add(
                "run", {"side": side, "seq": seq}, group=lane, priority=tier,
                delay=0.3 if delayed else None,
            )
            r.rpush(f"{name}:added", json.dumps([job_id, side, seq, lane or "", tier, delayed]))
            seq += 1
            time.sleep(0.01)
    elif role == "worker":
        maintained = time.monotonic()
        while not stopped("workers"):
            jobs = q.claim(2, lease=30)
            for job in jobs:
                run = [job.id, side, job.name, job.group or "", job.priority, job.score]
                r.rpush(f"{name}:runs", json.dumps(run))
                time.sleep(work)
                try:
                    q.complete(job, None)
                except LeaseLost:  # another ran it too: recorded, the test says so
                    pass
            if time.monotonic() - maintained > 1.0:  # as a worker does, every few seconds
                q.maintain()
                maintained = time.monotonic()
            if not jobs:
                time.sleep(0.01)
"""


@dataclass(frozen=True)
class Added:
    job_id: str
    side: str
    seq: int
    lane: str
    tier: int
    delayed: bool


@dataclass(frozen=True)
class Run:
    job_id: str
    side: str
    name: str
    lane: str
    tier: int
    score: int


def _added(client: redis.Redis, name: str) -> list[Added]:
    return [Added(*json.loads(row)) for row in client.lrange(f"{name}:added", 0, -1)]


def _runs(client: redis.Redis, name: str) -> list[Run]:
    return [Run(*json.loads(row)) for row in client.lrange(f"{name}:runs", 0, -1)]


def _wait_until(check: Callable[[], bool], what: str, procs: list[subprocess.Popen[str]]) -> None:
    deadline = time.monotonic() + PHASE_TIMEOUT
    while not check():
        for proc in procs:
            assert proc.poll() is None, f"a client exited early: {_output(proc)}"
        assert time.monotonic() < deadline, f"timed out after {PHASE_TIMEOUT} s waiting for {what}"
        time.sleep(0.05)


def _output(proc: subprocess.Popen[str]) -> str:
    """What a finished client wrote on stderr (its traceback)."""
    _, err = proc.communicate(timeout=10)
    return err


@contextmanager
def _clients(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start clients (``start(source, url, name, role, side)``); every one still
    running is killed at the end, whatever happened."""
    started: list[subprocess.Popen[str]] = []

    def start(source: Path, *args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", CLIENT, *args],
            env={
                **os.environ,
                "PYTHONPATH": str(source),
                "ECHOMQ_TEST_NEW_FORMAT": str(storage.FORMAT),
            },
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(proc)
        return proc

    try:
        yield start
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=10)


def _count(rows: list[Any], side: str) -> int:
    return sum(1 for row in rows if row.side == side)


def _once(runs: list[Run]) -> None:
    twice = {job_id: n for job_id, n in Counter(run.job_id for run in runs).items() if n > 1}
    assert not twice, f"jobs run more than once: {twice}"


def _in_arrival_order(runs: list[Run], added: dict[str, Added], by: Callable[[Run], Any]) -> None:
    """Within each group (``by``) the runs' scores rise (a score is tier, then the
    server's arrival counter), and within a group and a tier each producer's jobs
    come in the order it added them."""
    groups: dict[Any, list[Run]] = defaultdict(list)
    for run in runs:
        groups[by(run)].append(run)
    for key, group in groups.items():
        scores = [run.score for run in group]
        assert scores == sorted(scores), f"{key}: claimed out of order: {group}"
        for side in ("old", "new"):
            for tier in {run.tier for run in group}:
                seqs = [
                    added[run.job_id].seq
                    for run in group
                    if added[run.job_id].side == side and run.tier == tier
                ]
                assert seqs == sorted(seqs), f"{key}, tier {tier}: {side} producer's: {seqs}"


def _under_load(
    start: Callable[..., subprocess.Popen[str]], r: redis.Redis, url: str, name: str, old: Path
) -> int:
    """Phases 1-4: the old producer and worker, then the new ones (which upgrade the
    queue), a late old client, the workers' stop, a backlog, the producers' stop.
    Returns how many jobs the old producer had added when the queue was upgraded."""
    meta = QueueKeys(name).meta
    stored = r.hget(meta, "v")
    # 1. the older version alone; one old client holds a job of the default lane
    holder = start(old, url, name, "holder", "old")
    _wait_until(lambda: r.llen(f"{name}:held") == 1, "the holder's claim", [holder])
    old_producer = start(old, url, name, "producer", "old")
    old_worker = start(old, url, name, "worker", "old", str(OLD_WORK))
    running = [old_producer, old_worker]
    _wait_until(
        lambda: min(_count(_added(r, name), "old"), len(_runs(r, name))) >= PER_PHASE,
        "the old producer and worker",
        running,
    )
    assert r.hget(meta, "v") == stored, "upgraded before any new client ran"
    # 2. the new version joins: its first client upgrades the queue
    new_producer = start(SRC, url, name, "producer", "new")
    new_worker = start(SRC, url, name, "worker", "new")
    running += [new_producer, new_worker]
    _wait_until(lambda: r.hget(meta, "v") == str(storage.FORMAT), "the upgrade", running)
    added_before = _count(_added(r, name), "old")
    runs_before = _count(_runs(r, name), "old")
    # 3. an older client that connects now refuses, loudly, writing nothing
    late = start(old, url, name, "late", "late")
    late.wait(timeout=PHASE_TIMEOUT)
    refusal = _output(late)
    assert late.returncode != 0, "an older client wrote to a newer queue"
    assert "FormatTooNew" in refusal, refusal
    assert f"stored in format {storage.FORMAT}" in refusal, refusal
    assert "upgrade echomq" in refusal, refusal

    def mixed() -> bool:
        added, runs = _added(r, name), _runs(r, name)
        return (
            _count(added, "old") >= added_before + PER_PHASE
            and _count(runs, "old") >= runs_before + PER_PHASE
            and min(_count(added, "new"), _count(runs, "new")) >= PER_PHASE
        )

    _wait_until(mixed, "both versions to add and run jobs after the upgrade", running)
    # 4. the workers stop; the producers leave a backlog written by both versions
    r.set(f"{name}:stop-workers", 1)
    for worker in (holder, old_worker, new_worker):
        worker.wait(timeout=PHASE_TIMEOUT)
        assert worker.returncode == 0, _output(worker)
    running = [old_producer, new_producer]
    so_far = {side: _count(_added(r, name), side) for side in ("old", "new")}
    _wait_until(
        lambda: all(_count(_added(r, name), side) >= n + PER_PHASE for side, n in so_far.items()),
        "a backlog from both producers",
        running,
    )
    r.set(f"{name}:stop-producers", 1)
    for producer in running:
        producer.wait(timeout=PHASE_TIMEOUT)
        assert producer.returncode == 0, _output(producer)
    return added_before


def _drain(q: SyncQueue, expected: set[str], ran: set[str]) -> list[Run]:
    """Phase 5: claim one job at a time until every expected job has run."""
    drained: list[Run] = []
    deadline = time.monotonic() + PHASE_TIMEOUT
    while ran < expected:
        if time.monotonic() > deadline:
            lost = {i: getattr(q.get(i), "state", None) for i in expected - ran}
            raise AssertionError(f"{len(lost)} jobs never ran: {lost}")
        jobs = q.claim(1)
        for job in jobs:
            drained.append(Run(job.id, "drain", job.name, job.group or "", job.priority, job.score))
            ran.add(job.id)
            q.complete(job, None)
        if not jobs:
            q.maintain()  # promotes what an old client delayed (it lowered no bound)
            time.sleep(0.05)
    assert not q.claim(1), "a job beyond those added"
    return drained


def _readable(q: SyncQueue, ids: dict[str, Any], added: dict[str, Added]) -> None:
    """Every job readable, with its payload, in the state it ended in; nothing left."""
    for job_id, made in added.items():
        read = q.get(job_id)
        assert read is not None and read.state == "completed", (made, read)
        assert read.data == {"side": made.side, "seq": made.seq}, (made, read.data)
    for kind in ("active", "retrying", "blocked", "delayed", "completed"):
        read = q.get(ids[kind])
        assert read is not None and read.state == "completed", (kind, read)
    dead = q.get(ids["dead"])
    assert dead is not None and dead.state == "dead"
    counts = q.stats().counts
    left = {s: counts[s] for s in ("waiting", "active", "delayed", "failed", "blocked")}
    assert set(left.values()) == {0}, counts


@pytest.mark.parametrize("stored", sorted(FORMAT_COMMITS))
def test_an_older_queue_is_upgraded_while_both_versions_run(
    tmp_path: Path, backend_url: str, queue_name: str, redis_client: redis.Redis, stored: int
) -> None:
    ids = build_older_queue(tmp_path, backend_url, queue_name, stored, more=True)
    assert redis_client.hget(QueueKeys(queue_name).meta, "v") == str(stored)
    with _clients(tmp_path) as start:  # the older code the builder ran: tmp_path / "src"
        upgraded_at = _under_load(start, redis_client, backend_url, queue_name, tmp_path / "src")
    added = {a.job_id: a for a in _added(redis_client, queue_name)}
    loaded = _runs(redis_client, queue_name)
    _once(loaded)
    held = [run for run in loaded if run.lane == "held"]
    assert not held, f"a paused lane was served under load: {held}"
    # what the new worker claimed under load, within a lane and a tier: in arrival
    # order (a delayed job keeps the arrival of its add and comes when it is due)
    waiting = {a.job_id for a in added.values() if not a.delayed}  # (the builder's: apart)
    _in_arrival_order(
        [run for run in loaded if run.side == "new" and run.job_id in waiting],
        added,
        lambda run: (run.lane, run.tier),
    )
    # the versions really mixed: each side ran jobs the other wrote after the upgrade
    old_after = {a.job_id for a in added.values() if a.side == "old" and a.seq >= upgraded_at}
    new_added = {a.job_id for a in added.values() if a.side == "new"}
    assert any(run.side == "new" and run.job_id in old_after for run in loaded)
    old_before = {a.job_id for a in added.values() if a.side == "old" and a.seq < upgraded_at}
    assert any(run.side == "new" and run.job_id in old_before for run in loaded), "no backlog"
    assert any(run.side == "old" and run.job_id in new_added for run in loaded)

    # 5. one new client drains what is left
    builder = [ids[kind] for kind in ("retrying", "blocked", "delayed")]
    builder += ids["waiting"] + ids["heavy"] + ids["capped"] + ids["held"]
    expected = set(added) | set(builder)
    with SyncQueue(queue_name, backend_url) as q:
        assert [s.id for s in q.schedules()] == ["nightly"]
        q.set_lane("held", paused=False)
        active = q.get(ids["active"])
        assert active is not None and active.state == "active"
        q.complete(active, None)  # releases the blocked job
        drained = _drain(q, expected, {run.job_id for run in loaded})
        # the backlog both versions left, lane by lane: priority, then arrival
        backlog = [run for run in drained if run.job_id in waiting]
        _in_arrival_order(backlog, added, lambda run: run.lane)
        for lane in {run.lane for run in backlog}:
            tiers = [run.tier for run in backlog if run.lane == lane]
            assert tiers == sorted(tiers), f"lane {lane!r}: not in priority order: {tiers}"
        # every job ran once, none was lost, none was added by the refused client
        runs = loaded + drained
        _once(runs)
        assert {run.job_id for run in runs} == expected
        _readable(q, ids, added)
    # the default lane's active count (format 4 keeps it in the meta hash): the
    # holder's job was counted there by the upgrade, and given back by the old
    # code where the old code keeps it. Maintenance finds no job active and
    # corrects it (docs/design.md §9)
    [held_id] = redis_client.lrange(f"{queue_name}:held", 0, -1)
    keys = QueueKeys(queue_name)
    with SyncQueue(queue_name, backend_url) as q:
        held_job = q.get(str(held_id))
        assert held_job is not None and held_job.group is None, held_job
        q.maintain()
    assert redis_client.hget(keys.meta, "a:") == "0"
    assert redis_client.hget(keys.lanectl, "a:") in (None, "0")
