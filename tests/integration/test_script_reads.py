"""The hot calls read each job's hash once (issue 20: server work per drained job).

A quiet claim (nothing due, expired, woken or renumbered) takes the job
fields it leases from its read-before-write simulation instead of reading
them again, and completeMany learns whether a job has dependents from its
lease check. Counted with INFO commandstats around one call.
"""

from __future__ import annotations

import pytest
import redis

from commandstats import calls
from echomq import SyncQueue

BATCH = 10


def _delta(client: redis.Redis, run: object, *commands: str) -> dict[str, int]:
    before = calls(client, *commands)
    run()  # type: ignore[operator]
    after = calls(client, *commands)
    return {c: after[c] - before[c] for c in commands}


@pytest.mark.no_cluster("INFO commandstats counts one server's calls")
def test_a_quiet_claim_reads_each_job_hash_once(sq: SyncQueue, redis_client: redis.Redis) -> None:
    sq.add_many([{"name": "j", "data": i} for i in range(3 * BATCH)])
    sq.claim(1)  # the library loaded, the ring's turn settled
    got: list[object] = []
    delta = _delta(redis_client, lambda: got.extend(sq.claim(BATCH)), "hmget", "exists")
    assert len(got) == BATCH
    # one HMGET per job, plus the meta hash, the turn and the lane's gate
    assert delta["hmget"] <= BATCH + 3, delta
    assert delta["exists"] == 0, delta


@pytest.mark.no_cluster("INFO commandstats counts one server's calls")
def test_complete_many_reads_each_job_hash_once(sq: SyncQueue, redis_client: redis.Redis) -> None:
    sq.add_many([{"name": "j", "data": i} for i in range(BATCH)])
    jobs = sq.claim(BATCH)
    delta = _delta(
        redis_client, lambda: sq.complete_many([(j, None) for j in jobs]), "hmget", "hget"
    )
    # the lease check's HMGET per job (dn included), then one of the meta hash
    # (its counters, the feature marks and the default lane's active count:
    # no lane controls read on a queue that never set one, docs/design.md §9);
    # no HGET per job
    assert delta["hmget"] == BATCH + 1, delta
    assert delta["hget"] == 0, delta
    assert all(sq.get(j.id).state == "completed" for j in jobs)  # type: ignore[union-attr]
