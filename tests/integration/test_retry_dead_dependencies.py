"""retry_dead of jobs added with depends_on (issue 27 item 7) and in bounded pages
(item 11): a revived dependent goes back to blocked on what has not completed,
never beside the dependency it waits for."""

from __future__ import annotations

from typing import Literal

import pytest
import redis
from redis.cluster import RedisCluster

from commandstats import script_calls
from echomq import DependencyFailed, State, SyncQueue
from echomq.engine import RETRY_PAGE

pytestmark = pytest.mark.timeout(120)


def state(sq: SyncQueue, job_id: str) -> State:
    job = sq.get(job_id)
    assert job is not None, job_id
    return job.state


def extract_and_merge(sq: SyncQueue, run_anyway: bool = False) -> tuple[str, str]:
    """``merge`` depends on ``extract``; extract died, and so (maintenance) did
    merge, or with ``run_anyway`` merge ran and died of its own failure."""
    extract = sq.add("extract", max_attempts=1)
    policy: Literal["dead", "run"] = "run" if run_anyway else "dead"
    merge = sq.add("merge", depends_on=[extract], on_dependency_failure=policy)
    [job] = sq.claim(1)
    sq.fail(job, "outage", retry=False)
    sq.maintain()
    if run_anyway:
        [job] = sq.claim(1)
        assert job.id == merge
        sq.fail(job, "own failure", retry=False)
    assert state(sq, merge) is State.DEAD
    return extract, merge


@pytest.mark.parametrize("given", ["all", "ids merge first"])
def test_a_revived_dependent_waits_for_its_revived_dependency(sq: SyncQueue, given: str) -> None:
    extract, merge = extract_and_merge(sq)
    ids = None if given == "all" else [merge, extract]
    assert sorted(sq.retry_dead(ids)) == sorted([extract, merge])
    assert state(sq, extract) is State.WAITING
    assert state(sq, merge) is State.BLOCKED
    assert sq.stats().counts["blocked"] == 1
    claimed = sq.claim(2)
    assert [j.id for j in claimed] == [extract]  # never both at once
    sq.complete(claimed[0], "rows")
    assert state(sq, merge) is State.WAITING
    [job] = sq.claim(1)
    assert job.id == merge and job.attempts == 1
    assert sq.dependency_results(merge) == {extract: "rows"}


def test_a_dependent_whose_dependency_stays_dead_stays_dead(sq: SyncQueue) -> None:
    extract, merge = extract_and_merge(sq)
    assert sq.retry_dead([merge]) == []
    assert state(sq, merge) is State.DEAD
    assert sq.retry_dead([extract]) == [extract]
    assert sq.retry_dead([merge]) == [merge]  # now it waits for the revived extract
    assert state(sq, merge) is State.BLOCKED


def test_a_dependency_gone_before_the_dependent_ran(sq: SyncQueue) -> None:
    extract, merge = extract_and_merge(sq)
    assert sq.purge_dead([extract]) == [extract]
    assert sq.retry_dead([merge]) == []  # it can never complete: the job stays dead
    assert state(sq, merge) is State.DEAD
    # run anyway: a dependency gone counts as done
    extract2, merge2 = extract_and_merge(sq, run_anyway=True)
    assert sq.purge_dead([extract2]) == [extract2]
    assert sq.retry_dead([merge2]) == [merge2]
    assert state(sq, merge2) is State.WAITING
    assert isinstance(sq.dependency_results(merge2)[extract2], DependencyFailed)


def test_a_released_dependent_reads_a_pruned_dependency_as_gone(sq: SyncQueue) -> None:
    extract = sq.add("extract")
    merge = sq.add("merge", depends_on=[extract], max_attempts=1)
    [job] = sq.claim(1)
    sq.complete(job, "rows")
    [job] = sq.claim(1)
    sq.fail(job, "own failure", retry=False)
    assert sq.retry_dead() == [merge]  # its dependency completed: it waits again
    assert state(sq, merge) is State.WAITING
    [job] = sq.claim(1)
    sq.fail(job, "again", retry=False)
    assert sq.remove(extract) is True
    assert sq.retry_dead() == [merge]
    assert isinstance(sq.dependency_results(merge)[extract], DependencyFailed)


def test_a_dependent_still_blocked_on_a_live_dependency(sq: SyncQueue) -> None:
    slow = sq.add("slow")
    extract = sq.add("extract", max_attempts=1)
    merge = sq.add("merge", depends_on=[slow, extract])
    jobs = {j.name: j for j in sq.claim(2)}
    sq.fail(jobs["extract"], "outage", retry=False)
    sq.maintain()
    assert sq.retry_dead() == [extract, merge]
    assert state(sq, merge) is State.BLOCKED
    sq.complete(jobs["slow"], 1)
    assert state(sq, merge) is State.BLOCKED  # extract has not completed yet
    [job] = sq.claim(1)
    assert job.id == extract
    sq.complete(job, 2)
    assert state(sq, merge) is State.WAITING


def test_a_dependency_revived_by_a_later_page(sq: SyncQueue) -> None:
    """The ids of one retry_dead go in pages: a dependent met before its
    dependency's page is taken up again once that page revived it."""
    extract, merge = extract_and_merge(sq)
    others = sq.add_many([{"name": "x", "max_attempts": 1} for _ in range(RETRY_PAGE)])
    for job in sq.claim(RETRY_PAGE):
        sq.fail(job, "x", retry=False)
    moved = sq.retry_dead([merge, *others, extract])
    assert sorted(moved) == sorted([merge, *others, extract])
    assert state(sq, merge) is State.BLOCKED


@pytest.mark.no_cluster("INFO commandstats of one server")
def test_retry_all_goes_in_bounded_pages(
    sq: SyncQueue, redis_client: redis.Redis | RedisCluster
) -> None:
    total = 2 * RETRY_PAGE + 7
    ids = sq.add_many([{"name": "x", "max_attempts": 1} for _ in range(total)])
    for job in sq.claim(total):
        sq.fail(job, "x", retry=False)
    before = script_calls(redis_client)
    assert sorted(sq.retry_dead(limit=100_000)) == sorted(ids)
    assert script_calls(redis_client) - before == 3  # a page per call, at most RETRY_PAGE each
    assert sq.stats().counts["waiting"] == total
