"""``echomq batch status|cancel ID``."""

from __future__ import annotations

import json

from cli.clitools import RunCli, one_line_error
from echomq import SyncQueue
from echomq.batches import new_batch_id


def test_status_and_cancel(cli: RunCli, sq: SyncQueue) -> None:
    b = sq.batch(on_success={"name": "done"})
    b.add_many([{"name": "child", "data": "<b>[red]x"}] * 4)
    b.close()
    sq.complete(sq.claim(1)[0])
    text = cli("batch", "status", b.id).stdout
    assert f"batch {b.id}: running" in text
    assert "1/4" in text and "waiting 3" in text and "on_success not fired" in text
    data = json.loads(cli("batch", "status", b.id, "--json").stdout)
    assert (data["total"], data["completed"], data["finished"], data["state"]) == (
        4, 1, 1, "running",
    )  # fmt: skip
    proc = cli("batch", "cancel", b.id)
    assert proc.returncode == 0 and "3 cancelled before they ran" in proc.stdout
    assert sq.batch_status(b.id).state == "cancelled"
    assert "cancelled" in cli("batch", "status", b.id).stdout


def test_user_errors_are_one_line(cli: RunCli, sq: SyncQueue) -> None:
    assert "no batch" in one_line_error(cli("batch", "status", new_batch_id()))
    assert "not a batch id" in one_line_error(cli("batch", "cancel", "job_nope"))
