"""A stream of urgent work cannot starve a low-priority job in the aged ordering
(docs/ordering.md "The aged ordering"), and does starve it in the composite one.

One producer adds tier-0 jobs faster than the worker drains them for
``STREAM`` seconds; a tier-2 job is added at the start, with ``age_step`` =
0.5 s. Its bound is 2 x 0.5 s: it is served before every tier-0 job that
became due more than 1 s after it, and after every one due before that. So
in the aged ordering it starts while the stream still runs (about 2 s in,
once the work due in its first second is done), and in the composite
ordering only when the stream has ended and its backlog is drained.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime

import pytest

from echomq import SyncQueue, connection
from echomq.job import Job

pytestmark = pytest.mark.timeout(120)

AGE_STEP = 0.5  # seconds
BOUND_MS = 2 * 500  # tier 2 x age_step
STREAM = 4.0  # seconds the producer adds
# the producer adds 3 jobs every 45 ms (some 66/s); the worker takes WORK per
# job (under 50/s): a backlog grows all along, and the tier-0 work due in the
# low job's first second (some 66 jobs) takes it about 1.5 s
PRODUCER_TICK, PER_TICK = 0.045, 3
WORK = 0.02


def ms(moment: datetime | None) -> int:
    assert moment is not None
    return round(moment.timestamp() * 1000)


def produce(queue: SyncQueue, stop: threading.Event, added: list[str]) -> None:
    """Tier-0 jobs, PER_TICK every PRODUCER_TICK, until ``stop``."""
    while not stop.is_set():
        added += queue.add_many([{"name": "urgent"}] * PER_TICK)
        time.sleep(PRODUCER_TICK)


def run_stream(backend_url: str, name: str, ordering: str) -> tuple[Job, list[Job], float, float]:
    """The low job, every job claimed (in claim order), when the stream ended and
    when the low job was claimed (both time.monotonic())."""
    client = connection.sync_client(backend_url)
    producer_client = connection.sync_client(backend_url)
    queue = SyncQueue(name, ordering=ordering, client=client)  # type: ignore[arg-type]
    producing = SyncQueue(name, ordering=ordering, client=producer_client)  # type: ignore[arg-type]
    stop, added = threading.Event(), []  # type: ignore[var-annotated]
    producer = threading.Thread(target=produce, args=(producing, stop, added))
    try:
        if ordering == "aged":
            queue.configure(age_step=AGE_STEP)
        low_id = queue.add("low", priority=2)
        producer.start()
        start_by = time.monotonic() + 10
        while not added:  # the stream has begun before the worker claims
            assert time.monotonic() < start_by, "the producer never added"
            time.sleep(0.001)
        claimed: list[Job] = []
        low_at = ended = 0.0
        deadline = time.monotonic() + STREAM
        while True:
            if time.monotonic() >= deadline and not stop.is_set():
                stop.set()
                producer.join(timeout=10)
                ended = time.monotonic()
            jobs = queue.claim(1)
            if not jobs:
                assert stop.is_set(), "the worker drained the stream: it is not faster than it"
                break
            claimed += jobs
            if jobs[0].id == low_id:
                low_at = time.monotonic()
                if ordering == "aged":
                    stop.set()
                    producer.join(timeout=10)
                    ended = ended or time.monotonic()
            queue.complete(jobs[0])
            if not stop.is_set():
                time.sleep(WORK)
        low = next(j for j in claimed if j.id == low_id)
        return low, claimed, ended, low_at
    finally:
        stop.set()
        producer.join(timeout=10)
        queue.drop()
        client.close()
        producer_client.close()


def test_aged_ordering_bounds_the_wait_of_a_low_tier_job(backend_url: str, queue_name: str) -> None:
    low, claimed, ended, low_at = run_stream(backend_url, queue_name + "-aged", "aged")
    # exactly the tier-0 jobs due no later than its bound came before it
    bound = ms(low.created_at) + BOUND_MS
    position = [j.id for j in claimed].index(low.id)
    before, after = claimed[:position], claimed[position + 1 :]
    assert before and all(ms(j.created_at) <= bound for j in before)
    assert all(ms(j.created_at) >= bound for j in after)
    # it started while the stream still ran, within 1 s of its bound
    assert ended == 0.0 or low_at <= ended
    late = ms(low.claimed_at) - bound
    print(f"\naged: {position} tier-0 jobs before it, started {late} ms after its bound")
    assert late <= 1000, f"started {late} ms after its bound"


def test_composite_ordering_starves_it_until_the_stream_ends(
    backend_url: str, queue_name: str
) -> None:
    low, claimed, ended, low_at = run_stream(backend_url, queue_name + "-composite", "composite")
    print(f"\ncomposite: started {ms(low.claimed_at) - ms(low.created_at)} ms after its add")
    assert claimed[-1].id == low.id  # after every tier-0 job of the stream
    assert ended and low_at >= ended
    assert ms(low.claimed_at) - ms(low.created_at) >= STREAM * 1000
