"""Dependencies (DESIGN §8): ``add(..., depends_on=[...])`` blocks a job until every
job it names has completed; the last completion releases it into its lane in
the same script, and a large fan-out is released in bounded steps."""

from __future__ import annotations

import asyncio

import pytest
import redis

from echomq import (
    DependencyFailed,
    InvalidDependency,
    InvalidOption,
    Job,
    JobNotFound,
    LaneFull,
    Queue,
    State,
    SyncQueue,
    Worker,
    ids,
)
from keyspace import keyspace

pytestmark = pytest.mark.timeout(120)


def finish(sq: SyncQueue, n: int, result: object = None) -> list[str]:
    """Claim and complete up to ``n`` jobs; their ids."""
    jobs = sq.claim(n)
    for job, error in zip(jobs, sq.complete_many([(j, result) for j in jobs]), strict=True):
        assert error is None, (job.id, error)
    return [j.id for j in jobs]


def state(sq: SyncQueue, job_id: str) -> State:
    job = sq.get(job_id)
    assert job is not None
    return job.state


def test_blocked_until_every_dependency_completed(sq: SyncQueue) -> None:
    a, b = sq.add("a", 1), sq.add("b", 2)
    c = sq.add("c", depends_on=[a, b], group="g", priority=3)
    assert state(sq, c) is State.BLOCKED
    stats = sq.stats()
    assert stats.counts["blocked"] == 1 and stats.counts["waiting"] == 2
    assert [j.id for j in sq.jobs("blocked")] == [c]
    [ja] = sq.claim(1)
    sq.complete(ja, {"from": "a"})
    assert state(sq, c) is State.BLOCKED  # b is still pending
    [jb] = sq.claim(1)
    sq.complete(jb, {"from": "b"})
    # the completion of the last dependency released it, in the same script
    released = sq.get(c)
    assert released is not None and released.state is State.WAITING
    assert released.dependencies == [a, b] and released.group == "g"
    assert sq.stats().counts["blocked"] == 0
    [jc] = sq.claim(1)
    assert jc.id == c
    assert sq.dependency_results(c) == {a: {"from": "a"}, b: {"from": "b"}}


def test_a_completed_dependency_does_not_block(sq: SyncQueue) -> None:
    a = sq.add("a")
    finish(sq, 1, "done")
    b = sq.add("b", depends_on=[a])
    assert state(sq, b) is State.WAITING
    assert sq.dependency_results(b) == {a: "done"}


def test_bad_dependencies_write_nothing(sq: SyncQueue, redis_client: redis.Redis) -> None:
    alive = sq.add("alive")
    dead = sq.add("dead", max_attempts=1)
    [job] = [j for j in sq.claim(2) if j.id == dead]
    sq.fail(job, "boom", retry=False)
    before = keyspace(redis_client, sq.name)
    unknown = ids.new_id()
    cases: list[tuple[object, type[Exception], str]] = [
        ([alive, unknown], InvalidDependency, "does not exist"),
        ([dead], InvalidDependency, "is dead"),
        (["not-an-id"], InvalidDependency, "depends_on"),
        ("job_x", InvalidDependency, "list of job ids"),
        ([], InvalidDependency, "allowed 1"),
        ([alive] * 2 + [f"job_{i:026d}" for i in range(1000)], InvalidDependency, "allowed"),
    ]
    for deps, error, text in cases:
        with pytest.raises(error, match=text):
            sq.add("x", depends_on=deps)  # type: ignore[arg-type]
    with pytest.raises(InvalidOption, match="not both"):
        sq.add("x", depends_on=[alive], delay=5)
    with pytest.raises(InvalidDependency):
        sq.add_many([{"name": "ok"}, {"name": "x", "depends_on": [unknown]}])
    assert keyspace(redis_client, sq.name) == before


async def test_async_add_with_a_bad_dependency_refuses_only_that_add(aq: Queue) -> None:
    results = await asyncio.gather(
        aq.add("ok"),
        aq.add("x", depends_on=[ids.new_id()]),
        aq.add("ok2"),
        return_exceptions=True,
    )
    assert isinstance(results[1], InvalidDependency)
    assert isinstance(results[0], str) and isinstance(results[2], str)


def test_fan_in_of_1000(sq: SyncQueue) -> None:
    deps = sq.add_many([{"name": "dep", "data": i} for i in range(1000)])
    sink = sq.add("sink", depends_on=deps)
    assert sorted(finish(sq, 1000, "r")) == sorted(deps)
    assert state(sq, sink) is State.WAITING
    results = sq.dependency_results(sink)
    assert list(results) == deps and set(results.values()) == {"r"}


def test_fan_out_of_10000_released_in_bounded_steps(sq: SyncQueue) -> None:
    parent = sq.add("parent")
    children = sq.add_many([{"name": "child", "depends_on": [parent]} for _ in range(10_000)])
    assert sq.stats().counts["blocked"] == 10_000
    finish(sq, 1)
    first = sq.stats().counts
    assert first["waiting"] == 501 and first["blocked"] == 9_499  # a budget (+1 per job done)
    steps: list[int] = []
    seen: list[str] = []  # blocked before each step, then what the step reported
    while blocked := sq.stats().counts["blocked"]:
        report = sq.maintain()
        seen.append(f"{blocked} blocked: released {report.released}, {report.releasing} left")
        assert 0 < report.released <= 500, seen
        steps.append(report.released)
        assert len(steps) <= 19, "\n".join(seen)
    assert sum(steps) == 9_499 and report.releasing == 0
    assert sq.stats().counts["waiting"] == 10_000
    assert {state(sq, c) for c in children[:50]} == {State.WAITING}


def test_a_chain_of_1000(sq: SyncQueue) -> None:
    chain = [sq.add("link", 0)]
    for i in range(1, 1000):
        chain.append(sq.add("link", i, depends_on=[chain[-1]]))
    assert sq.stats().counts["blocked"] == 999
    order = []
    for _ in range(1000):
        [job] = sq.claim(1)
        order.append(job.data)
        sq.complete(job, job.data)
    assert order == list(range(1000))
    assert sq.stats().counts["blocked"] == 0


def test_removing_a_blocked_job(sq: SyncQueue) -> None:
    a = sq.add("a")
    b = sq.add("b", depends_on=[a])
    assert sq.remove(b) is True
    assert sq.stats().counts["blocked"] == 0
    finish(sq, 1)  # completing a releases nothing: b is gone
    assert sq.stats().counts["waiting"] == 0


async def test_a_worker_runs_a_graph_and_reads_dependency_results(aq: Queue) -> None:
    seen: list[str] = []
    merged: list[dict[str, object]] = []

    async def part(job: Job) -> int:
        seen.append(job.id)
        return int(job.data) * 10

    async def merge(job: Job) -> None:
        merged.append(await aq.dependency_results(job.id))

    a, b = await aq.add("part", 1), await aq.add("part", 2)
    c = await aq.add("merge", depends_on=[a, b])
    worker = Worker(aq, {"part": part, "merge": merge}, concurrency=4)
    task = asyncio.create_task(worker.run(install_signals=False))
    try:
        deadline = asyncio.get_running_loop().time() + 15
        while not merged:
            assert asyncio.get_running_loop().time() < deadline, "merge never ran"
            await asyncio.sleep(0.02)
    finally:
        worker.stop(immediate=True)
        await asyncio.wait_for(task, 15)
    assert sorted(seen) == sorted([a, b])
    assert merged == [{a: 10, b: 20}]
    done = await aq.get(c)
    assert done is not None and done.state is State.COMPLETED


def test_a_dead_dependency_sends_its_dependents_to_dead_in_cascade(sq: SyncQueue) -> None:
    a = sq.add("a", max_attempts=1)
    b = sq.add("b")
    c = sq.add("c", depends_on=[a, b])
    d = sq.add("d", depends_on=[c])  # c's own dependent: the death passes on
    [job] = [j for j in sq.claim(2) if j.id == a]
    sq.fail(job, "boom", retry=False)
    for _ in range(3):  # one step per generation, each a bounded maintenance call
        sq.maintain()
    dead_c, dead_d = sq.get(c), sq.get(d)
    assert dead_c is not None and dead_c.state is State.DEAD
    assert dead_c.error == f"dependency {a} died before it completed"
    assert dead_d is not None and dead_d.state is State.DEAD
    assert dead_d.error == f"dependency {c} died before it completed"
    assert sq.stats().counts["blocked"] == 0
    assert state(sq, b) is State.ACTIVE  # the other dependency is untouched


def test_a_removed_dependency_sends_its_dependents_to_dead(sq: SyncQueue) -> None:
    a = sq.add("a")
    b = sq.add("b", depends_on=[a])
    assert sq.remove(a)
    sq.maintain()
    job = sq.get(b)
    assert job is not None and job.state is State.DEAD
    assert job.error == f"dependency {a} was removed before it completed"


def test_a_dependency_retried_from_dead_in_time_keeps_its_dependents(sq: SyncQueue) -> None:
    a = sq.add("a", max_attempts=1)
    b = sq.add("b", depends_on=[a])
    [job] = sq.claim(1)
    sq.fail(job, "boom", retry=False)
    assert sq.retry_dead([a]) == [a]  # before maintenance handled the death
    sq.maintain()
    assert state(sq, b) is State.BLOCKED
    finish(sq, 1)
    assert state(sq, b) is State.WAITING


def test_cancel_of_a_blocked_job(sq: SyncQueue) -> None:
    a = sq.add("a")
    b = sq.add("b", depends_on=[a])
    assert sq.cancel(b) is True
    assert sq.get(b) is None and sq.stats().counts["blocked"] == 0


def test_run_anyway_sees_the_failed_dependency(sq: SyncQueue) -> None:
    a = sq.add("a", max_attempts=1)
    b = sq.add("b")
    c = sq.add("c", depends_on=[a, b], on_dependency_failure="run")
    with pytest.raises(InvalidOption, match="on_dependency_failure"):
        sq.add("x", depends_on=[b], on_dependency_failure="maybe")  # type: ignore[arg-type]
    jobs = {j.id: j for j in sq.claim(2)}
    sq.fail(jobs[a], "boom", retry=False)
    sq.maintain()
    assert state(sq, c) is State.BLOCKED  # b has not completed yet
    sq.complete(jobs[b], "B")
    assert state(sq, c) is State.WAITING
    results = sq.dependency_results(c)
    assert results[b] == "B"
    assert isinstance(results[a], DependencyFailed) and "boom" in str(results[a])


def test_release_and_dependency_death_are_events(sq: SyncQueue) -> None:
    cursor = sq.read_events(None).cursor
    a, b = sq.add("a"), sq.add("b", max_attempts=1)
    c = sq.add("c", depends_on=[a])
    d = sq.add("d", depends_on=[b])
    jobs = {j.id: j for j in sq.claim(2)}
    sq.complete(jobs[a], None)
    sq.fail(jobs[b], "boom", retry=False)
    sq.maintain()
    events = sq.read_events(cursor).events
    assert [e.kind for e in events if e.job_id == c] == ["added", "unblocked"]
    dead = [e for e in events if e.job_id == d]
    assert [e.kind for e in dead] == ["added", "dead"]
    assert dead[1].error == f"dependency {b} died"


def test_retention_keeps_a_completed_dependency_until_its_dependents_finish(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    sq.configure(keep_completed=0, keep_completed_age=0)
    a, b = sq.add("a"), sq.add("b")
    ja, jb = sq.claim(2)
    assert (ja.id, jb.id) == (a, b)
    c = sq.add("c", depends_on=[a, b])  # both running: pending
    sq.complete(ja, {"from": "a"})
    late = sq.add("late", depends_on=[a])  # a completed already: waiting, it reads a
    assert finish(sq, 1) == [late]
    # a is kept while c is blocked by b and may read it later; late goes
    for _ in range(5):
        sq.maintain()
    assert state(sq, c) is State.BLOCKED and state(sq, a) is State.COMPLETED
    assert sq.get(late) is None
    assert redis_client.smembers(sq.engine.keys.readers(a)) == {c}
    sq.complete(jb, {"from": "b"})
    for _ in range(5):
        sq.maintain()
    assert state(sq, a) is State.COMPLETED  # c is waiting: it may still read a
    [jc] = sq.claim(1)
    assert jc.id == c
    sq.maintain()
    assert sq.dependency_results(c) == {a: {"from": "a"}, b: {"from": "b"}}
    sq.complete(jc, "merged")
    sq.maintain()
    # c finished: a and b are pruned, with their readers sets
    assert sq.get(a) is None and sq.get(b) is None and sq.get(c) is None
    assert redis_client.exists(sq.engine.keys.readers(a), sq.engine.keys.readers(b)) == 0


def test_held_dependencies_do_not_stall_pruning(sq: SyncQueue) -> None:
    sq.configure(keep_completed=0, keep_completed_age=0)
    # 300 completed jobs each needed by a blocked job (more than one prune budget)
    deps = [sq.add("d") for _ in range(300)]
    gate = sq.add("gate", delay=3600)  # never claimed here: the dependents stay blocked
    waiting = [sq.add("w", depends_on=[d, gate]) for d in deps]
    for _ in range(3):
        finish(sq, 100)
    assert sq.stats().counts["completed"] == 300
    plain = [sq.add("plain") for _ in range(10)]
    assert sorted(finish(sq, 10)) == sorted(plain)
    for _ in range(5):
        sq.maintain()
    # the plain jobs are pruned though 300 held jobs are older; the held ones stay
    assert all(sq.get(p) is None for p in plain)
    assert all(state(sq, d) is State.COMPLETED for d in deps)
    assert all(state(sq, w) is State.BLOCKED for w in waiting)


def test_max_waiting_counts_blocked_jobs(sq: SyncQueue, redis_client: redis.Redis) -> None:
    """DESIGN §8: a lane holds at most max_waiting waiting + delayed + blocked jobs."""
    sq.set_lane("m", max_waiting=3)
    ctl = sq.engine.keys.lanectl
    dep = sq.add("dep", group="other")
    doomed = sq.add("doomed", group="other")
    b1 = sq.add("b", group="m", depends_on=[dep])
    b2 = sq.add("b", group="m", depends_on=[doomed])
    sq.add("w", group="m")
    assert redis_client.hget(ctl, "d:m") == "2"  # the two blocked jobs
    with pytest.raises(LaneFull, match="max_waiting 3"):
        sq.add("b", group="m", depends_on=[dep])
    # released into the lane: still counted, now as waiting
    [jd] = sq.claim(1)
    assert jd.id == dep
    sq.complete(jd)
    assert state(sq, b1) is State.WAITING and redis_client.hget(ctl, "d:m") == "1"
    with pytest.raises(LaneFull):
        sq.add("w", group="m")
    # dead from a failed dependency (here: removed): no longer counted
    sq.remove(doomed)
    sq.maintain()
    assert state(sq, b2) is State.DEAD and redis_client.hget(ctl, "d:m") is None
    sq.add("w", group="m")
    with pytest.raises(LaneFull):
        sq.add("w", group="m")


def test_removing_or_cancelling_a_blocked_job_uncounts_it(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    sq.set_lane("m", max_waiting=2)
    dep = sq.add("dep", group="other")
    b1 = sq.add("b", group="m", depends_on=[dep])
    b2 = sq.add("b", group="m", depends_on=[dep])
    with pytest.raises(LaneFull):
        sq.add("w", group="m")
    sq.remove(b1)
    sq.cancel(b2)
    assert redis_client.hget(sq.engine.keys.lanectl, "d:m") is None
    sq.add("w", group="m")
    sq.add("w", group="m")


def test_dependents_lists_blocked_jobs_then_readers(sq: SyncQueue) -> None:
    a, b = sq.add("a"), sq.add("b")
    c = sq.add("c", depends_on=[a, b])
    d = sq.add("d", depends_on=[a])
    deps = sq.dependents(a)
    assert (deps.blocked, deps.blocked_ids, deps.readers) == (2, sorted([c, d]), 0)
    assert sq.dependents(a, count=1).blocked_ids in ([c], [d])
    assert sq.dependents(a, count=0).blocked_ids == []
    [ja] = sq.claim(1)
    sq.complete(ja)
    # released d (its last dependency), c still waits for b: both may read a's result
    deps = sq.dependents(a)
    assert (deps.blocked, deps.readers, deps.reader_ids) == (0, 2, sorted([c, d]))
    assert sq.dependents(b).blocked_ids == [c]
    assert sq.dependents(c) == sq.dependents(d) == sq.dependents(c, count=5)
    with pytest.raises(JobNotFound):
        sq.dependents(ids.new_id())
    with pytest.raises(InvalidOption):
        sq.dependents(a, count=1001)
