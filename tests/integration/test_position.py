"""``q.position(job_id)``: where a waiting job stands (docs/ordering.md "Where a job
stands"), checked against the reference model (tests/model.py ``position``: a
copy of the model claims one job at a time until it is served) on random
states: random adds, batches, weights, claims (so a turn is often under way),
removals and changes, in the composite and mint orderings (the rotation is the
same in every ordering; the aged key is model-tested in test_order_model.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from echomq import InvalidState, JobNotFound, SyncQueue, connection
from integration.lockstep import ORDERINGS, PROFILE
from integration.test_order_model import (
    Claim,
    Lockstep,
    Op,
    SetWeight,
    add_manys,
    adds,
    changes,
    claims,
    fresh_queue,
    groups,
    lane_jobs,
    programs,
    removes,
)
from model import OrderModel

pytestmark = pytest.mark.only_backends(
    "valkey", "redis", "cluster", reason="many examples each; Valkey 9.1 runs the other tests"
)


@pytest.fixture
def client(backend_url: str) -> Iterator[connection.SyncClient]:
    """One connection per test, shared by the queues of all its examples."""
    c = connection.sync_client(backend_url)
    try:
        yield c
    finally:
        c.close()


# no weight stored: a job in its lane's first turn has a closed form (position.lua)
NO_WEIGHTS = [lane_jobs("a", "b", "c", "c", "b", None), Claim(1), lane_jobs("d", "a")]
heavy_weights = st.builds(SetWeight, groups, st.integers(1, 9))
# the head lane's turn is under way (3 of its 5 claims left): the lanes after
# it wait for those 3 claims, not its weight, and its own jobs past them for a
# whole round
TURN_UNDER_WAY = [
    SetWeight("a", 5),
    SetWeight("b", 2),
    lane_jobs("a", "a", "a", "a", "a", "a", "a", "a", "b", "b", "b", "c"),
    Claim(2),
]


@PROFILE
@given(
    program=programs(
        adds(),
        add_manys(adds()),
        add_manys(adds()),
        heavy_weights,
        claims,
        removes,
        changes,
        min_size=4,
        max_size=24,
    )
)
@example(program=TURN_UNDER_WAY)
@example(program=NO_WEIGHTS)
def test_position_matches_the_model(
    client: connection.SyncClient, queue_name: str, program: list[Op]
) -> None:
    for ordering in ORDERINGS:
        with fresh_queue(client, queue_name, ordering) as queue:
            run = Lockstep(queue, OrderModel(ordering))
            for op in program:
                run.apply(op)
            for job_id in run.model.waiting_ids():
                got = queue.position(job_id)
                want = run.model.position(job_id)
                assert (got.lane_ahead, got.queue_ahead) == want, f"[{ordering}] {job_id}"
                assert got.eta is None  # nothing completed yet


def test_position_refuses_jobs_that_are_not_waiting(sq: SyncQueue) -> None:
    delayed = sq.add("x", delay=3600)
    active = sq.add("x")
    [job] = sq.claim(1)
    assert job.id == active
    for job_id, state in ((delayed, "delayed"), (active, "active")):
        with pytest.raises(InvalidState, match=f"is {state}"):
            sq.position(job_id)
    sq.complete(job)
    with pytest.raises(InvalidState, match="is completed"):
        sq.position(active)
    with pytest.raises(JobNotFound):
        sq.position("job_01m92h6jfkeqmtyamfh3phtpnm")


def test_a_parked_lane_has_no_queue_position_and_eta_follows_completions(sq: SyncQueue) -> None:
    first = sq.add("x", group="a")
    waiting = sq.add("x", group="a")
    [job] = sq.claim(1)
    sq.complete(job)
    # one completion in the last 10 minutes, at least a second: at most 1 job/s
    pos = sq.position(waiting)
    assert (pos.lane_ahead, pos.queue_ahead) == (0, 0)
    assert pos.eta is not None and 0.5 <= pos.eta <= 1.0
    assert first == job.id
    sq.set_lane("a", paused=True)
    sq.claim(1)  # the rotation reaches the paused lane and parks it
    assert sq.position(waiting).queue_ahead is None
    assert sq.position(waiting).lane_ahead == 0


def test_a_parked_lane_has_no_queue_position_past_the_closed_form(sq: SyncQueue) -> None:
    # past the closed form (a job past its lane's first turn, or any weight
    # stored) position.lua reads the ring lane by lane and finds the job's
    # lane on the way: a parked lane is not in the ring, its jobs have no
    # queue position (and their rank in the lane still)
    parked = [sq.add("x", group="a") for _ in range(3)]
    for group in ("b", "b", "c", "c"):
        sq.add("x", group=group)
    sq.set_lane("a", paused=True)
    sq.claim(1)  # the rotation reaches the paused lane, parks it and serves b
    deep = sq.position(parked[2])  # its lane's third turn: no closed form
    assert (deep.lane_ahead, deep.queue_ahead) == (2, None)
    sq.set_weight("c", 3)  # a weight stored: no closed form
    first = sq.position(parked[0])
    assert (first.lane_ahead, first.queue_ahead) == (0, None)
    sq.set_lane("a", paused=False)
    sq.claim(1)  # the lane comes back to the ring
    assert sq.position(parked[2]).queue_ahead is not None
