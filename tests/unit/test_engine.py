"""The engine with no server: every call's checks, and canned replies through every parse.

The engine builds calls and reads replies without I/O, so each reply shape a
script can return is fed to the parser here, including the updates a reply
makes to the caller's Job.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import echomq
from echomq import ids, lanepages, storage
from echomq.call import Call
from echomq.engine import Engine
from echomq.errors import (
    FormatTooNew,
    InvalidOption,
    JobNotFound,
    LeaseLost,
    OrderingMismatch,
)
from echomq.job import Job, State, ms_to_datetime
from echomq.options import QueueOptions
from echomq.reports import LaneInfo, MaintenanceReport, QueueStats, TierCounts
from echomq.steps import Next

MS = 1_700_000_000_000  # a server time in ms
AT = datetime.fromtimestamp(MS / 1000, tz=UTC)


@pytest.fixture
def engine() -> Engine:
    return Engine("unit", QueueOptions())


def claimed_job(engine: Engine) -> Job:
    row: list[str | None] = [ids.new_id(), "send", '{"to": 1}', "2", "acme", "1", "3"]
    row += ["8589934593", str(MS)]
    row += [None, None, None, None, None, None, "7", str(MS + 60_000), '{"traceparent": "00-x"}']
    row += [None, None, None, None]  # no schedule, fire, tags, batch: claim.lua's 22 fields
    return engine.claim(1).parse([str(MS + 30_000), str(MS), row])[0]


def test_a_claim_reply_becomes_leased_jobs(engine: Engine) -> None:
    job = claimed_job(engine)
    assert (job.name, job.data, job.priority, job.group) == ("send", {"to": 1}, 2, "acme")
    assert (job.state, job.attempts, job.max_attempts, job.score) == (State.ACTIVE, 1, 3, 2**33 + 1)
    assert job.lease_token == "7"
    assert job.lease_deadline == datetime.fromtimestamp((MS + 30_000) / 1000, tz=UTC)
    assert job.claimed_at == AT
    assert job.expires_at == datetime.fromtimestamp((MS + 60_000) / 1000, tz=UTC)
    assert job.headers == {"traceparent": "00-x"}
    assert engine.claim(5).parse([]) == []


def test_claim_checks_its_input(engine: Engine) -> None:
    with pytest.raises(InvalidOption, match="claim n 0"):
        engine.claim(0)
    with pytest.raises(InvalidOption, match="lease -1"):
        engine.claim(1, lease=-1)


def test_add_parses_ids_and_the_ordering_refusal(engine: Engine) -> None:
    call = engine.add("send", {"to": 1})
    assert call.script is not None and call.script.name == "add"
    assert call.durable is None
    assert call.parse(["job_x"]) == "job_x"
    with pytest.raises(OrderingMismatch, match="unit"):
        call.parse(-3)
    assert engine.add_many([{"name": "a"}, {"name": "b"}]).parse(["j1", "j2"]) == ["j1", "j2"]


def test_a_durable_add_carries_its_wait() -> None:
    engine = Engine("unit", QueueOptions(), durable=True, durable_timeout=2.5)
    assert engine.add("send").durable == 2.5
    assert engine.add("send", durable=False).durable is None
    assert Engine("unit", QueueOptions()).add_many([{"name": "a"}], durable=True).durable == 5.0


def test_add_many_refuses_unknown_keys_before_anything_is_built(engine: Engine) -> None:
    with pytest.raises(InvalidOption, match="unknown key"):
        engine.add_many([{"name": "j", "foo": 1}])
    with pytest.raises(InvalidOption, match="item 1"):
        engine.add_many([{"name": "j"}, {"data": 1}])


def test_complete_and_complete_many(engine: Engine) -> None:
    job = claimed_job(engine)
    assert engine.complete(job, {"ok": True}).parse([MS]) == AT
    with pytest.raises(LeaseLost):
        engine.complete(job).parse([-2])
    other = claimed_job(engine)
    errors = engine.complete_many([(job, 1), (other, 2)]).parse([MS, -1])
    assert errors[0] is None and isinstance(errors[1], JobNotFound)
    with pytest.raises(InvalidOption):
        engine.complete_many([])


def test_a_job_without_a_lease_is_refused(engine: Engine) -> None:
    unleased = Job.from_hash(ids.new_id(), {"n": "x"})
    for build in (engine.complete, engine.release, engine.extend):
        with pytest.raises(LeaseLost, match="claim it first"):
            build(unleased)


def test_fail_parses_the_next_state(engine: Engine) -> None:
    job = claimed_job(engine)
    assert engine.fail(job, "boom").parse(["failed", str(MS)]) is State.FAILED
    assert job.run_at == AT  # when the retry runs (the worker's log says so)
    assert engine.fail(job, "boom", retry=False).parse(["dead", str(MS)]) is State.DEAD
    with pytest.raises(LeaseLost):
        engine.fail(job, "boom").parse(-2)


def test_extend_updates_the_jobs_deadline(engine: Engine) -> None:
    job, other = claimed_job(engine), claimed_job(engine)
    assert engine.extend(job, 5.0).parse(MS) == AT
    assert job.lease_deadline == AT
    before = other.lease_deadline
    deadlines = engine.extend_many([job, other], 5.0).parse([MS + 1000, -2])
    assert deadlines[1] is None and other.lease_deadline == before
    assert job.lease_deadline == datetime.fromtimestamp((MS + 1000) / 1000, tz=UTC)
    assert not job.cancelled and not other.cancelled
    assert engine.extend_many([job, other], 5.0).parse([-4, -2]) == [None, None]
    assert job.cancelled and not other.cancelled  # -4: cancel() took it, -2: merely lost


def test_cancel_parses_what_became_of_the_job(engine: Engine) -> None:
    job_id = ids.new_id()
    call = engine.cancel(job_id, retry=True)
    assert call.args[-2:] == [job_id, "retry"] and engine.cancel(job_id).args[-1] == "dead"
    assert call.parse("removed") is True and call.parse("stopped") is True
    assert call.parse("finished") is False
    with pytest.raises(JobNotFound, match=job_id):
        call.parse(-1)
    with pytest.raises(JobNotFound, match="not a job id"):
        engine.cancel("nope")  # a string that is no job id names no job
    with pytest.raises(echomq.InvalidId):
        engine.cancel(5)  # type: ignore[arg-type]  # not a string: the caller's bug


def test_expires_and_headers_are_checked_and_encoded(engine: Engine) -> None:
    values = engine.new_job("a", expires=1.5, headers={"traceparent": "00-ab"}).values
    assert values[9:11] == [1500, '{"traceparent":"00-ab"}']
    # no depends_on, no tags, no dedupe, no batch
    assert engine.new_job("a").values[9:] == [-1, "", "", "", "", "", ""]
    for bad in (0, -1, float("nan"), "1"):
        with pytest.raises(InvalidOption, match="expires"):
            engine.new_job("a", expires=bad)  # type: ignore[arg-type]
    for headers in ({"a": 1}, ["a"], {"a": "x" * 5000}):
        with pytest.raises(InvalidOption, match="headers"):
            engine.new_job("a", headers=headers)  # type: ignore[arg-type]


def test_release_and_progress_update_the_job_only_when_accepted(engine: Engine) -> None:
    job = claimed_job(engine)
    with pytest.raises(LeaseLost):
        engine.release(job).parse(-2)
    assert job.lease_token is not None and job.state is State.ACTIVE
    engine.release(job).parse(1)
    assert job.lease_token is None and job.state is State.WAITING
    job = claimed_job(engine)
    call = engine.release(job, delay=2.5)
    assert call.args[-2:] == ["2500", ""]
    assert engine.release(claimed_job(engine), throttle=1.5).args[-1] == "1500"
    call.parse(1)
    assert job.state is State.DELAYED
    with pytest.raises(echomq.InvalidDelay):
        engine.release(claimed_job(engine), delay=-1)
    job = claimed_job(engine)
    engine.progress(job, {"done": 3}).parse(1)
    assert job.progress == {"done": 3}


def test_reads_parse_their_replies(engine: Engine) -> None:
    job_id = ids.new_id()
    fields = ["n", "send", "d", "[1]", "s", "completed", "r", '"ok"', "p", "4"]
    for reply in (fields, dict(zip(fields[::2], fields[1::2], strict=True))):  # RESP2, RESP3
        job = engine.get(job_id).parse(reply)
        assert job is not None and (job.state, job.result, job.priority) == ("completed", "ok", 4)
    assert engine.get(job_id).parse([]) is None
    listed = engine.jobs("dead").parse([[job_id, "n", "a", "s", "dead", "e", "boom"]])
    assert [(j.id, j.error) for j in listed] == [(job_id, "boom")]
    assert engine.remove(job_id).parse(1) is True
    assert engine.retry_dead().parse([[job_id], [], 1]) == [job_id]  # one page: the last
    assert engine.purge_dead([job_id]).parse([job_id]) == [job_id]
    assert engine.exists().parse(0) is False
    assert engine.weights().parse(["", "2", "acme", "5"]) == {None: 2, "acme": 5}


def test_listing_refuses_unknown_states(engine: Engine) -> None:
    with pytest.raises(InvalidOption, match="bogus"):
        engine.jobs("bogus")


STATS_REPLY: list[Any] = [
    ["5", "1", "2", "3", "4", "6", "2", "1", "mint", "99", "7", "8"],
    ["acme", "3", "5", "10", "", "2", "1", "0"],
    ["acme", "4"],
    ["21", "4", "2"],
    str(MS),  # last activity
    ["", ""],  # no laneList page goes on
]


def test_stats_and_lanes(engine: Engine) -> None:
    stats = engine.stats().parse(STATS_REPLY)
    assert stats == QueueStats(
        "unit",
        {"waiting": 5, "delayed": 1, "failed": 2, "active": 3, "completed": 4, "dead": 6}
        | {"blocked": 7, "cancelled": 8},
        {"acme": 3, None: 2},
        2,
        True,
        "mint",
        99,
        {"added": 21, "completed": 4, "failed": 2},
        AT,
    )
    assert isinstance(stats, QueueStats)
    assert stats.ever_used and stats.to_dict()["last_activity"] == AT.isoformat()
    never = engine.stats().parse(
        [["0"] * 8 + ["", "0"], [], ["", ""], ["0", "0", "0"], "", ["", ""]]
    )
    assert isinstance(never, QueueStats)
    assert not never.ever_used and never.last_activity is None
    lanes_reply = [
        [
            *("acme", "0", "3", "5", "10", "", "", "", "", "", "2", "0"),
            *("", "1", "2", "1", "0", "4", "100 1000", "1", "50", str(MS + 5), "4", "1"),
        ],
        ["acme", "4"],
        str(MS),
        "",  # the last page
        "",
    ]
    assert engine.lanes().parse(lanes_reply) == [
        LaneInfo("acme", 0, 5, 3, 10, 4, active=2),
        LaneInfo(
            None,
            1,
            1,
            2,
            0,
            None,
            concurrency=4,
            rate=(100, 1.0),
            paused=True,
            max_waiting=50,
            active=4,
            parked=True,
            throttled_until=ms_to_datetime(str(MS + 5)),
        ),
    ]
    tiers = engine.waiting_tiers().parse(["acme", ["0", "3", "2", "1"], "1", "", [], "0"])
    assert tiers == {"acme": TierCounts({0: 3, 2: 1}, True), None: TierCounts({}, False)}


def test_lanes_and_stats_go_on_in_bounded_pages(engine: Engine) -> None:
    """A listing past one page asks for the next laneList page at the reply's cursor,
    each page at most lanepages.PAGE lanes; the lanes found so far are kept."""
    call = engine.lanes(limit=450)
    assert call.args[-4:] == ["all", "r", "0", str(lanepages.PAGE)]
    row = ["a", "0", "1", "1", "0", "", "", "", "", "", "", "0"]
    going = call.parse([row, ["", ""], str(MS), "r", str(lanepages.PAGE)])
    assert isinstance(going, Next)
    assert going.call.args[-4:] == ["all", "r", str(lanepages.PAGE), str(lanepages.PAGE)]
    last = going.call.parse([row, ["", ""], str(MS), "", ""])
    assert isinstance(last, list)
    assert [lane.group for lane in last] == ["a"]  # met twice (the ring moved): listed once
    stats_call = engine.stats(lane_limit=5000)
    assert stats_call.args[-1] == str(lanepages.PAGE)
    more = stats_call.parse([*STATS_REPLY[:5], ["h", "0"]])
    assert isinstance(more, Next) and more.call.args[-4:] == ["waiting", "h", "0", "200"]


def test_maintain_report(engine: Engine) -> None:
    report = engine.maintain().parse([1, 2, 3, MS, -1, MS, 0, -1, [], 0, 0])
    assert isinstance(report, MaintenanceReport)
    assert report.next_schedule is None and report.fired == 0
    assert (report.promoted, report.reaped, report.pruned) == (1, 2, 3)
    assert report.next_fire == AT and report.next_deadline is None and report.server_time == AT


def test_the_doorbell_wait(engine: Engine) -> None:
    wait = engine.wait_for_ring("w1", timeout=100.0, longest=29.0)
    assert wait.command[0] == "BLPOP" and wait.blocks == 29.0
    assert wait.parse(None) is None
    assert wait.parse([engine.keys.stop_bell("w1"), "1"]) == "stop"
    assert wait.parse([engine.keys.wake, "1"]) == "ring"
    assert engine.wait_for_ring("w1", timeout=0.0, longest=29.0).blocks == 0.002


def test_the_format_greeting() -> None:
    engine = Engine("unit", QueueOptions())
    check = engine.check_format()
    assert check.command == ("HGET", engine.keys.meta, "v")
    mine, newer = str(storage.FORMAT), str(storage.FORMAT + 1)
    assert check.parse(mine) is None  # this client's format: nothing more to send
    for older in (None, "", "1", "2"):  # none yet, or an older format: the upgrade follows
        upgrade = check.parse(older)
        assert upgrade is not None and upgrade.script is not None
        assert upgrade.script.name == "upgrade"
        assert upgrade.parse(mine) == storage.FORMAT and upgrade.parse("") == storage.FORMAT
    with pytest.raises(FormatTooNew, match=f"format {newer}"):
        check.parse(newer)
    upgrade = check.parse("1")
    assert upgrade is not None
    with pytest.raises(FormatTooNew, match=f"format {newer}"):
        upgrade.parse(newer)


def test_every_call_is_well_formed(engine: Engine) -> None:
    job = claimed_job(engine)
    calls: list[Call[Any]] = [
        engine.add("a"),
        engine.claim(),
        engine.complete(job),
        engine.fail(job, "x"),
        engine.extend(job),
        engine.release(job),
        engine.cancel(job.id),
        engine.progress(job, 1),
        engine.maintain(),
        engine.stats(),
        engine.ring(),
        engine.drop_page(0),
    ]
    for call in calls:
        assert call.script is not None
        wire = call.wire()
        assert wire[0] == "EVALSHA" and wire[2] == len(call.keys) == call.script.numkeys
        assert call.wire(by_sha=False)[1] == call.script.source
    assert engine.ring_stop_bell("w").keys == [engine.keys.stop_bell("w")]


def test_dunder_all_matches_the_design_document() -> None:
    """docs/design.md §6 lists the public names; they are exactly echomq.__all__
    (methods, in lower case, are listed there too and left out here; a public
    function is written as a call, `current_job()`)."""
    design = (Path(__file__).parents[2] / "docs" / "design.md").read_text(encoding="utf-8")
    section = design.split("## §6", 1)[1].split("**Connection**", 1)[0]
    spans = set(re.findall(r"`([A-Za-z_]+)`", section))
    listed = {name for name in spans if name[0].isupper() or name == "__version__"}
    listed |= set(re.findall(r"`([a-z_]+)\(\)`", section))
    assert listed == set(echomq.__all__)
