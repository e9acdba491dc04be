"""The claim latency histogram's input: the claim time the claim script records."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from echomq import SyncQueue
from echomq.web.metrics import ClaimLatency, claim_wait


def test_claim_records_its_server_time_in_the_job(sq: SyncQueue) -> None:
    job_id = sq.add("x")
    [claimed] = sq.claim(1)
    stored = sq.get(job_id)
    assert stored is not None and stored.created_at is not None
    assert claimed.claimed_at is not None and stored.claimed_at == claimed.claimed_at
    assert stored.created_at <= claimed.claimed_at
    wait = claim_wait(stored)
    assert wait is not None and 0 <= wait < 5


def test_only_waits_known_exactly_are_observed(sq: SyncQueue) -> None:
    sq.add("x")
    [job] = sq.claim(1)
    assert job.claimed_at is not None and job.created_at is not None
    later = job.claimed_at + timedelta(seconds=30)
    assert claim_wait(replace(job, stalls=1)) is None  # back from an expired lease
    assert claim_wait(replace(job, run_at=later)) is None  # the next retry, not this claim
    assert claim_wait(replace(job, claimed_at=None)) is None
    delayed = replace(
        job,
        run_at=job.created_at + timedelta(seconds=1),
        claimed_at=job.created_at + timedelta(seconds=3),
    )
    assert claim_wait(delayed) == 2.0  # counted from the due time, not from creation

    latency = ClaimLatency()
    assert latency.observe(sq.name, [job, job, replace(job, stalls=1)]) == 1  # once per claim
    assert latency.observe(sq.name, [replace(job, claimed_at=later)]) == 1  # a new claim
