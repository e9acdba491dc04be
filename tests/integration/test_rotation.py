"""Weighted lanes and the two orderings, as worked examples (the model tests go wider)."""

from __future__ import annotations

from collections.abc import Callable

from echomq import SyncQueue, ids, score


def groups(jobs: list) -> str:  # type: ignore[type-arg]
    return "".join(j.group or "-" for j in jobs)


def test_weights_3_and_1_alternate_AAAB(sq: SyncQueue) -> None:
    sq.set_weight("A", 3)
    sq.add_many([{"name": "j", "group": g} for g in "A" * 9 + "B" * 3])
    assert groups(sq.claim(12)) == "AAABAAABAAAB"
    assert sq.weights() == {"A": 3}


def test_a_lane_joins_the_ring_tail_when_it_becomes_non_empty(sq: SyncQueue) -> None:
    sq.add_many([{"name": "j", "group": g} for g in "AAB"])
    assert groups(sq.claim(1)) == "A"
    sq.add("j", group="C")
    assert [lane.group for lane in sq.lanes()] == ["B", "A", "C"]
    assert groups(sq.claim(4)) == "BAC"


def test_weight_change_applies_at_the_lanes_next_turn(sq: SyncQueue) -> None:
    sq.set_weight("A", 2)
    sq.add_many([{"name": "j", "group": g} for g in "A" * 8 + "B" * 8])
    assert groups(sq.claim(1)) == "A"  # A's turn started with weight 2
    sq.set_weight("A", 4)
    assert groups(sq.claim(1)) == "A"  # still the old turn: 2 claims
    assert groups(sq.claim(6)) == "BAAAAB"


def test_lanes_report_backlog_weight_served_and_turn(sq: SyncQueue) -> None:
    sq.set_weight("A", 3)
    sq.add_many([{"name": "j", "group": g} for g in "AAAAB"])
    sq.claim(2)
    [a, b] = sq.lanes()
    assert (a.group, a.weight, a.backlog, a.served, a.turn_left) == ("A", 3, 2, 2, 1)
    assert (b.group, b.weight, b.backlog, b.served, b.turn_left) == ("B", 1, 1, 0, None)
    stats = sq.stats()
    assert stats.lanes == {"A": 2, "B": 1}
    assert stats.counts["waiting"] == 3


def test_default_lane_and_groups_share_the_ring(sq: SyncQueue) -> None:
    sq.add_many([{"name": "j"}, {"name": "j", "group": "g"}, {"name": "j"}])
    assert groups(sq.claim(3)) == "-g-"


def test_tier_beats_arrival_within_a_lane(sq: SyncQueue) -> None:
    late_urgent = None
    for i in range(5):
        sq.add("j", i, priority=2)
    late_urgent = sq.add("j", "urgent", priority=0)
    jobs = sq.claim(6)
    assert jobs[0].id == late_urgent
    assert [j.data for j in jobs[1:]] == [0, 1, 2, 3, 4]
    assert score.decode(jobs[1].score).tier == 2


def test_mint_ordering_uses_id_order_and_tier_scores(
    make_sync: Callable[..., SyncQueue],
) -> None:
    q = make_sync(ordering="mint")
    added = [q.add("j", i, priority=i % 2) for i in range(6)]
    job = q.get(added[1])
    assert job is not None and job.score == score.encode(1, 0)
    claimed = q.claim(6)
    evens, odds = added[0::2], added[1::2]
    assert [j.id for j in claimed] == sorted(evens) + sorted(odds)
    assert all(ids.is_id(j.id) for j in claimed)
    assert q.stats().counter == 0  # no counter key: one write less per add
