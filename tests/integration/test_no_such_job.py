"""One rule for "no such job" (docs/lifecycle.md "No such job"): a string that is
not a job id names no job, exactly like a well-formed id of no job."""

from __future__ import annotations

import pytest

from echomq import JobNotFound, Queue, SyncQueue
from echomq.ids import new_id

pytestmark = pytest.mark.timeout(60)

NO_JOBS = ["job_doesnotexist", "", "../../etc", "x" * 10_000, new_id()]


@pytest.mark.parametrize("job_id", NO_JOBS, ids=["short", "empty", "path", "long", "unknown"])
async def test_an_id_of_no_job_has_one_answer_however_it_is_written(aq: Queue, job_id: str) -> None:
    assert await aq.get(job_id) is None
    assert await aq.remove(job_id) is False
    for act in (
        lambda: aq.wait(job_id, timeout=0.1),
        lambda: aq.cancel(job_id),
        lambda: aq.change(job_id, priority=1),
        lambda: aq.dependency_results(job_id),
        lambda: aq.dependents(job_id),
    ):
        with pytest.raises(JobNotFound):
            await act()
    assert not await aq.exists()


def test_the_blocking_queue_follows_the_same_rule(sq: SyncQueue) -> None:
    assert sq.get("job_doesnotexist") is None
    with pytest.raises(JobNotFound, match="not a job id"):
        sq.wait("job_doesnotexist", timeout=0)
