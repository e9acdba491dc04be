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


def test_list_pages_newest_first(cli: RunCli, sq: SyncQueue) -> None:
    assert cli("batch", "list").stdout.startswith("no batch in queue")
    made = []
    for i in range(3):
        b = sq.batch(on_success={"name": "done"}) if i == 0 else sq.batch()
        b.add_many([{"name": "child"}] * 2)
        made.append(b.id)
    sq.complete(sq.claim(1)[0])  # the oldest batch's first child
    first = cli("batch", "list", "--count", "2").stdout.splitlines()
    assert [line.split()[0] for line in first[:2]] == [made[2], made[1]]
    assert first[2].startswith("more: --cursor '")
    cursor = first[2].split("'")[1]
    rest = cli("batch", "list", "--count", "2", "--cursor", cursor).stdout.splitlines()
    assert len(rest) == 1 and rest[0].startswith(made[0])
    assert "open" in rest[0] and "] 1/2" in rest[0] and "completed 1" in rest[0]
    assert "0/1 fired" in rest[0]
    data = json.loads(cli("batch", "list", "--json").stdout)
    assert [b["id"] for b in data["batches"]] == made[::-1] and data["cursor"] is None
    assert (data["batches"][2]["completed"], data["batches"][2]["finished"]) == (1, 1)


def test_list_user_errors_are_one_line(cli: RunCli, sq: SyncQueue) -> None:
    assert "not a cursor" in one_line_error(cli("batch", "list", "--cursor", "nope"))
