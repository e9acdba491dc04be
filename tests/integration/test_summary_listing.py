"""``jobs(..., summary=True)`` (issue 14, row 1): the fields a list row shows, and
nothing heavy: no payload, result, traceback or progress; the error cut on the
server at a UTF-8 character boundary."""

from __future__ import annotations

from echomq import SyncQueue
from echomq.engine import SUMMARY_ERROR_BYTES

HEAVY = "x" * 100_000


def test_a_summary_leaves_the_heavy_fields_on_the_server(sq: SyncQueue) -> None:
    sq.add_many([{"name": "big", "data": {"blob": HEAVY}, "max_attempts": 1} for _ in range(3)])
    jobs = sq.claim(3)
    sq.progress(jobs[0], {"step": HEAVY})
    error = "a" + "é" * SUMMARY_ERROR_BYTES  # 1 + 2n bytes: a cut at 1024 would split one
    for job in jobs[1:]:
        sq.fail(job, error, "Traceback\n" + HEAVY, retry=False)
    for state in ("active", "dead"):
        full = {j.id: j for j in sq.jobs(state)}
        short = sq.jobs(state, summary=True)
        assert [j.id for j in short] == list(full)
        for job in short:
            whole = full[job.id]
            assert job.data is None and job.result is None
            assert job.traceback is None and job.progress is None
            for name in ("name", "state", "priority", "group", "attempts", "max_attempts"):
                assert getattr(job, name) == getattr(whole, name), name
            for name in ("score", "created_at", "finished_at", "claimed_at", "stalls", "run_at"):
                assert getattr(job, name) == getattr(whole, name), name
            if whole.error is not None:
                assert job.error is not None
                assert len(job.error.encode()) <= SUMMARY_ERROR_BYTES
                assert whole.error.startswith(job.error) and len(job.error) >= 500
    assert full[jobs[1].id].data == {"blob": HEAVY}  # the full listing still has everything
