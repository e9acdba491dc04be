"""What a batch child costs: server commands of its add, claim(1) and complete,
beside a plain job's on the same queue (printed; DESIGN §9: only the queue's
own batch jobs pay, test_command_counts checks the others pay nothing)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis

from echomq import SyncQueue
from integration.test_command_counts import commands_run, plain_counts, total


def test_a_batch_child_costs_a_bounded_few_commands_more(
    make_sync: Callable[..., SyncQueue], queue_name: str, redis_client: redis.Redis
) -> None:
    plain = plain_counts(make_sync(queue_name + "-plain"), redis_client)
    sq = make_sync(queue_name + "-batch")
    b = sq.batch(on_complete={"name": "done"})
    b.add_many([{"name": "backlog", "data": i} for i in range(5)])  # as plain_counts
    sq.complete(sq.claim(1)[0])  # warm up; the batch is open: nothing fires
    b.add("warm", 0)
    counts = {"add": commands_run(redis_client, lambda: b.add("child", 1))}
    got: list[Any] = []
    counts["claim"] = commands_run(redis_client, lambda: got.extend(sq.claim(1)))
    assert got and got[0].batch == b.id
    counts["complete"] = commands_run(redis_client, lambda: sq.complete(got[0], None))
    for call in ("add", "claim", "complete"):
        print(f"\n{call}: plain {total(plain, call)}, batch child {total(counts, call)}")
        assert total(counts, call) <= total(plain, call) + 5  # measured: +4, +2, +5
