"""echomq.contrib.django in a small project (tests/django_project) on SQLite and on
the private PostgreSQL: migrate, enqueue inside transaction.atomic() (commit: one
job; rollback: none; bad input: nothing written), manage.py echomq_relay and
manage.py echomq_worker --relay."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from echomq import SyncQueue

PROJECT = Path(__file__).resolve().parents[1] / "django_project"
SRC = Path(__file__).resolve().parents[2] / "src"
TIMEOUT = 60.0


@pytest.fixture(params=["sqlite", "postgresql"])
def shop_env(
    request: pytest.FixtureRequest, tmp_path: Path, valkey_url: str, queue_name: str
) -> dict[str, str]:
    if request.param == "sqlite":
        db = f"sqlite:{tmp_path / 'shop.db'}"
    else:
        url = sa.make_url(request.getfixturevalue("pg_url"))
        db = f"postgresql:{url.host}:{url.port}:{url.database}:{url.username}:{url.password}"
    env = {k: v for k, v in os.environ.items() if k != "ECHOMQ_URL"}
    env.update(
        PYTHONPATH=f"{SRC}:{PROJECT}",
        DJANGO_SETTINGS_MODULE="shop.settings",
        SHOP_DB=db,
        SHOP_VALKEY=valkey_url,
        SHOP_QUEUE=queue_name,
        SHOP_RECEIPTS=str(tmp_path / "receipts"),
    )
    return env


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, str(PROJECT / "manage.py"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done


PLACE_ORDERS = """
import django, sys
django.setup()
from shop.views import place_order
from shop.models import Order
from echomq.contrib.django import enqueue
from echomq.contrib.django.models import OutboxRow
from echomq.errors import InvalidPriority
from django.db import transaction
kept = place_order(10)
try:
    place_order(20, fail=True)
except RuntimeError:
    pass
try:
    with transaction.atomic():
        enqueue("q", "x", {}, priority=-1)
except InvalidPriority:
    pass
assert OutboxRow.objects.count() == 1, OutboxRow.objects.count()
print(kept)
"""


def test_enqueue_in_atomic_then_relay(
    shop_env: dict[str, str], valkey_url: str, queue_name: str
) -> None:
    manage(shop_env, "migrate", "-v", "0")
    placed = subprocess.run(
        [sys.executable, "-c", PLACE_ORDERS],
        env=shop_env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        cwd=PROJECT,
    )
    assert placed.returncode == 0, placed.stderr
    order = int(placed.stdout.strip())
    relayed = manage(shop_env, "echomq_relay", "--once")
    assert "relayed 1 row(s), 0 dead" in relayed.stdout
    with SyncQueue(queue_name, valkey_url) as q:
        [job] = q.claim(10)
    assert (job.name, job.data, job.priority) == ("send_receipt", {"order": order}, 1)


def test_worker_with_relay_runs_the_committed_job(shop_env: dict[str, str]) -> None:
    manage(shop_env, "migrate", "-v", "0")
    worker = subprocess.Popen(
        [
            sys.executable,
            str(PROJECT / "manage.py"),
            "echomq_worker",
            "--relay",
            "shop.handlers:handlers",
            "--queue",
            shop_env["SHOP_QUEUE"],
        ],
        env=shop_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    receipts = Path(shop_env["SHOP_RECEIPTS"])
    try:
        placed = subprocess.run(
            [sys.executable, "-c", PLACE_ORDERS],
            env=shop_env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
            cwd=PROJECT,
        )
        assert placed.returncode == 0, placed.stderr
        deadline = time.monotonic() + TIMEOUT / 2
        while not (receipts.exists() and receipts.read_text().strip()):
            assert worker.poll() is None, worker.communicate()
            assert time.monotonic() < deadline, "no receipt within the deadline"
            time.sleep(0.05)
        assert receipts.read_text().split() == [placed.stdout.strip()]
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=TIMEOUT / 2)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
