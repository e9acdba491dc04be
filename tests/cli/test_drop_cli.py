"""``echomq drop QUEUE``: deletes a queue for good, after asking (or --yes)."""

from __future__ import annotations

from cli.clitools import RunCli, one_line_error
from echomq import SyncQueue


def test_drop_asks_then_deletes(cli: RunCli, sq: SyncQueue, backend_url: str) -> None:
    sq.add_many([{"name": "x"} for _ in range(3)])
    name = sq.name
    refused = cli("drop", name, "--url", backend_url, queue=False, stdin="n\n")
    assert refused.returncode == 1
    assert f"Delete queue {name} (3 jobs) for good?" in refused.stdout
    assert sq.exists() is True and sq.stats().counts["waiting"] == 3
    done = cli("drop", name, "--url", backend_url, queue=False, stdin="y\n")
    assert done.returncode == 0, done.stderr
    assert f"dropped queue {name} (3 jobs)" in done.stdout
    assert sq.exists() is False and sq.stats().counts["waiting"] == 0


def test_drop_yes_skips_the_question(cli: RunCli, sq: SyncQueue, backend_url: str) -> None:
    sq.add("x")
    proc = cli("drop", sq.name, "--yes", "--url", backend_url, queue=False)
    assert proc.returncode == 0, proc.stderr
    assert "for good?" not in proc.stdout and sq.exists() is False


def test_drop_refuses_a_bad_name(cli: RunCli, backend_url: str) -> None:
    proc = cli("drop", "bad name!", "--yes", "--url", backend_url, queue=False)
    assert proc.returncode == 1
    assert "bad name!" in one_line_error(proc)
