"""Metrics kept on the server (DESIGN §10): per minute and job name, counts and run/wait
histograms written by the completion scripts in the same call, for a queue with
``configure(metrics=True)``; nothing for a queue without."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis

from echomq import InvalidOption, SyncQueue
from echomq.metrics import BUCKETS, KEPT_MINUTES
from integration.test_command_counts import commands_run

pytestmark = pytest.mark.timeout(90)


def test_every_finished_job_is_counted_with_its_run_and_wait(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    sq.configure(metrics=True)
    sq.add_many([{"name": "mail"} for _ in range(3)] + [{"name": "report", "max_attempts": 2}])
    jobs = sq.claim(4)
    time.sleep(0.3)  # every run takes a measurable time (server clock)
    by_name: dict[str, list[Any]] = {}
    for job in jobs:
        by_name.setdefault(job.name, []).append(job)
    sq.complete_many([(job, None) for job in by_name["mail"]])
    [report] = by_name["report"]
    sq.fail(report, "boom", retry_delay=0)  # failed: a retry follows
    [again] = sq.claim(1)
    sq.fail(again, "boom again", retry=False)  # dead
    points = {p.name: p for p in sq.metrics()}
    mail, rep = points["mail"], points["report"]
    assert (mail.completed, mail.failed, mail.dead) == (3, 0, 0)
    assert (rep.completed, rep.failed, rep.dead) == (0, 1, 1)
    assert mail.run.count == 3 and mail.wait.count == 3 and rep.run.count == 2
    assert mail.run.sum >= 3 * 0.3 and 0.3 <= (mail.run.quantile(0.5) or 0) <= 0.5
    assert mail.run.cumulative()[-1] == (float("inf"), 3)
    assert len(mail.run.counts) == len(BUCKETS) + 1
    now = datetime.now(UTC)
    assert now - timedelta(minutes=2) <= mail.minute <= now
    assert [p.name for p in sq.metrics(name="mail")] == ["mail"]
    key = sq.engine.keys.metrics(int(mail.minute.timestamp()) // 60)
    ttl = redis_client.pttl(key)
    assert KEPT_MINUTES * 60_000 - 120_000 < ttl <= KEPT_MINUTES * 60_000


def test_a_queue_without_the_setting_keeps_no_metrics(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    sq.add("x")
    sq.complete(sq.claim(1)[0], None)
    assert sq.metrics() == []
    minute = int(time.time()) // 60
    assert not any(redis_client.exists(sq.engine.keys.metrics(m)) for m in (minute - 1, minute))


def test_a_complete_many_call_pays_at_most_two_commands_for_metrics(
    make_sync: Callable[..., SyncQueue], queue_name: str, redis_client: redis.Redis
) -> None:
    """However many jobs and names: one HMGET and one HSET of the minute's hash
    (the first call of a minute also sets its TTL: measured again then)."""

    def measure(q: SyncQueue) -> int:
        q.add_many([{"name": f"n{i % 7}"} for i in range(200)])
        q.complete_many([(job, None) for job in q.claim(20)])  # warm: the minute's hash exists
        for _ in range(3):
            jobs = q.claim(20)
            items = [(job, 1) for job in jobs]
            measured = commands_run(redis_client, lambda: q.complete_many(items))  # noqa: B023
            if "pexpire" not in measured:  # not the first call of a new minute
                break
        return sum(measured.values())

    # both queues store a setting (metrics is one): the read of the settings is
    # what any stored setting costs a call (docs/design.md §9), not the metrics
    plain_q = make_sync(queue_name + "-plain")
    plain_q.configure(max_stalls=2)
    plain = measure(plain_q)
    counted = make_sync(queue_name + "-metrics")
    counted.configure(metrics=True)
    with_metrics = measure(counted)
    assert 0 < with_metrics - plain <= 2, (plain, with_metrics)
    assert sum(p.completed for p in counted.metrics()) == 40


def test_bad_input_is_refused(sq: SyncQueue) -> None:
    for minutes in (0, KEPT_MINUTES + 1, True, 1.5):
        with pytest.raises(InvalidOption, match="minutes"):
            sq.metrics(minutes=minutes)  # type: ignore[arg-type]
    with pytest.raises(InvalidOption, match="job name"):
        sq.metrics(name="")
    with pytest.raises(InvalidOption, match="metrics 'yes'"):
        sq.configure(metrics="yes")  # type: ignore[arg-type]
    assert "metrics" not in sq.settings()


def test_oldest_waiting_is_per_lane_the_earliest_due_of_its_tiers(sq: SyncQueue) -> None:
    old_low_tier = sq.add("x", group="a", priority=5)  # waits longest, behind tier 0
    time.sleep(0.3)
    sq.add("x", group="a", priority=0)
    sq.add("x")
    time.sleep(0.3)
    got = sq.oldest_waiting(["a", None, "empty"])
    assert got["empty"] == 0.0
    assert 0.6 <= got["a"] < 30 and 0.3 <= got[None] < got["a"]
    sq.remove(old_low_tier)
    assert sq.oldest_waiting(["a"])["a"] < got["a"] - 0.2
    with pytest.raises(InvalidOption, match="at most 1000"):
        sq.oldest_waiting(["a"] * 1001)
