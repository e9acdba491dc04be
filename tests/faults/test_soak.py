"""The bounded soak: producers and workers as processes, random everything.

ECHOMQ_SOAK_JOBS sets the job count: 20,000 by default, well inside the 90 s
bound on 2 cores; ``python tests/faults/report.py`` runs 50,000 and publishes
what it measured in docs/delivery.md (ECHOMQ_SOAK_TIMEOUT raises the bound).
30 % of the jobs are a backlog added before the workers start, in lanes a–d
weighted 1:2:3:4 and sized in proportion, so every lane stays backlogged
while the share is measured; the rest arrive while the workers run, with
random tiers, groups and delays.
5 % of the handlers fail every attempt and end dead.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
import redis

from echomq.keys import QueueKeys
from echomq.sync import SyncQueue
from faults import invariants
from faults.figures import record
from faults.procs import TESTS_DIR, Workers, wait_for
from faults.producer import WEIGHTS
from servers import PrivateServer

SOAK_JOBS = int(os.environ.get("ECHOMQ_SOAK_JOBS", "20000"))
SOAK_TIMEOUT = float(os.environ.get("ECHOMQ_SOAK_TIMEOUT", "90"))
PRODUCERS = 4
WORKERS = 4
CONCURRENCY = 16  # jobs each worker process holds at once
BACKLOG_SHARE = 0.3
SHARE_WINDOW = 0.6  # of the backlog: lanes are surely all still backlogged
SHARE_TOLERANCE = 0.05  # relative: |share − w/Σw| ≤ 5 % of w/Σw

pytestmark = [pytest.mark.slow, pytest.mark.timeout(SOAK_TIMEOUT)]


def _produce(url: str, queue: str, total: int, phase: str, seed: int) -> None:
    """PRODUCERS producer processes adding ``total`` jobs between them; wait for all."""
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "faults.producer",
                url,
                queue,
                str(total // PRODUCERS),
                str(seed + i),
                phase,
            ],
            cwd=TESTS_DIR,
            env={**os.environ, "PYTHONPATH": str(TESTS_DIR)},
        )
        for i in range(PRODUCERS)
    ]
    for proc in procs:
        assert proc.wait(60) == 0, f"producer exited {proc.returncode}"


def _lane_shares(records: list[dict[str, Any]], window: int) -> dict[str, float]:
    """Each weighted lane's share of the first ``window`` claims that went to lanes a–d."""
    counts = Counter(r["g"] for r in records if r["g"] in WEIGHTS)
    assert counts, "no executions"
    seen: Counter[str] = Counter()
    for rec in records:
        if rec["g"] in WEIGHTS:
            seen[rec["g"]] += 1
            if seen.total() >= window:
                break
    return {g: seen[g] / seen.total() for g in WEIGHTS}


def _order_violations(client: redis.Redis, queue: str, backlog: list[str]) -> int:
    """Backlog jobs claimed once: in each lane, a lower score was never claimed later."""
    keys = QueueKeys(queue)
    with client.pipeline(transaction=False) as pipe:
        for job_id in backlog:
            pipe.hmget(keys.job(job_id), "g", "sc", "ca", "cl")
        rows = pipe.execute()
    lanes: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for lane, score, claimed_at, claims in rows:
        if claims == "1":
            lanes[lane].append((int(score), int(claimed_at)))
    bad = 0
    for pairs in lanes.values():
        pairs.sort()
        bad += sum(1 for a, b in itertools.pairwise(pairs) if b[1] < a[1])
    return bad


def _check_outcomes(client: redis.Redis, queue: str, ids: list[str]) -> Counter[str]:
    """Dead exactly when the job asked its handler to fail."""
    keys = QueueKeys(queue)
    with client.pipeline(transaction=False) as pipe:
        for job_id in ids:
            pipe.hmget(keys.job(job_id), "s", "d")
        rows = pipe.execute()
    outcomes: Counter[str] = Counter()
    for job_id, (state, data) in zip(ids, rows, strict=True):
        should_fail = bool(json.loads(data)["fail"])
        assert state == ("dead" if should_fail else "completed"), f"{job_id}: {state}"
        outcomes[state] += 1
    return outcomes


def _early_starts(records: list[dict[str, Any]]) -> tuple[int, int]:
    """(delayed executions, how many started before their fire time by the server clock)."""
    timed = [r for r in records if r["at"] is not None]
    return len(timed), sum(1 for r in timed if r["t"] < r["at"])


def _prune_to_baseline(url: str, client: redis.Redis, queue: str) -> set[str]:
    """Retention of zero prunes every finished job; return the queue's keys left.

    Each call prunes a bounded batch (so no script runs long): call until done.
    """
    with SyncQueue(
        queue, url, keep_completed=0, keep_completed_age=0.0, keep_dead=0, keep_dead_age=0.0
    ) as pruner:
        for _ in range(10 + SOAK_JOBS // 100):  # 250 a set and call (includes/retention.lua)
            if pruner.maintain().pruned == 0:
                break
    return {str(k) for k in client.scan_iter(match=QueueKeys(queue).prefix + "*", count=1000)}


@pytest.mark.parametrize("backend", ["valkey", "redis"], indirect=True)
def test_soak_every_job_once_fair_shares_no_early_starts_keys_pruned(
    backend: PrivateServer,
    backend_url: str,
    queue_name: str,
    redis_client: redis.Redis,
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    with SyncQueue(queue_name, backend_url) as queue:
        for group, weight in WEIGHTS.items():
            queue.set_weight(group, weight)
    prefix = QueueKeys(queue_name).prefix
    baseline = {str(k) for k in redis_client.scan_iter(match=prefix + "*")}
    backlog_total = int(SOAK_JOBS * BACKLOG_SHARE)
    _produce(backend_url, queue_name, backlog_total, "backlog", seed=100)
    added_key = invariants.side_key(queue_name) + ":added"
    backlog = [str(x) for x in redis_client.lrange(added_key, 0, -1)]
    workers = Workers(
        backend_url, queue_name, tmp_path, env={"FAULT_CONCURRENCY": str(CONCURRENCY)}
    )
    try:
        for _ in range(WORKERS):
            workers.spawn()
        _produce(backend_url, queue_name, SOAK_JOBS - backlog_total, "mixed", seed=200)
        ids = [str(x) for x in redis_client.lrange(added_key, 0, -1)]
        keys = QueueKeys(queue_name)
        wait_for(
            lambda: redis_client.zcard(keys.completed) + redis_client.zcard(keys.dead) == len(ids),
            SOAK_TIMEOUT - (time.monotonic() - started) - 15,
            "every job finished",
            interval=0.2,
        )
        drained = time.monotonic() - started
    finally:
        workers.stop_all()
    assert len(ids) == len(set(ids)) >= SOAK_JOBS - 2 * PRODUCERS * 4
    report = invariants.check(redis_client, queue_name, ids, expect=("completed", "dead"))
    report.fail_if_any()
    outcomes = _check_outcomes(redis_client, queue_name, ids)
    records = invariants.executions(redis_client, queue_name)
    shares = _lane_shares(records, int(len(backlog) * SHARE_WINDOW))
    total_weight = sum(WEIGHTS.values())
    for group, weight in WEIGHTS.items():
        expected = weight / total_weight
        assert abs(shares[group] - expected) <= SHARE_TOLERANCE * expected, shares
    assert _order_violations(redis_client, queue_name, backlog) == 0
    delayed, early = _early_starts(records)
    assert delayed > 0 and early == 0
    left = _prune_to_baseline(backend_url, redis_client, queue_name)
    assert left - set(keys.fixed()) == set(), f"per-job keys left: {sorted(left)[:5]}"
    assert len(left) <= len(baseline | {keys.meta, keys.counter, keys.wake}), sorted(left)
    record(
        "soak",
        server=backend.kind,
        jobs=len(ids),
        producers=PRODUCERS,
        workers=WORKERS,
        concurrency=CONCURRENCY,
        drain_seconds=round(drained, 2),
        completed=outcomes["completed"],
        dead=outcomes["dead"],
        shares={g: round(share, 3) for g, share in shares.items()},
        weights=dict(WEIGHTS),
        delayed_starts=delayed,
        early_starts=early,
        duplicate_executions=report.duplicate_executions,
    )
    print(
        f"\n[soak] jobs={len(ids)} ({PRODUCERS} producers × {WORKERS} workers) "
        f"drained in {drained:.1f}s outcomes={dict(outcomes)} "
        f"duplicate executions={report.duplicate_executions} delayed starts={delayed} "
        f"shares={ {g: round(s, 3) for g, s in shares.items()} } keys left={sorted(left)}"
    )
