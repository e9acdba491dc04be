"""Batches under faults (DESIGN §10 "Batches"): every callback is added exactly
once, never before the close and never for a cancelled batch, when

1. workers are killed -9 in the middle of a batch's children (some of which
   die), and a fan-in job waits on a batch (``depends_on=[batch]``);
2. the server is killed -9 and restarted (AOF, ``appendfsync always``) while
   the last children's completions are being sent;
3. the server is killed -9 and restarted while the close is being sent;
4. a batch is cancelled while workers run its children.

Why it holds: a callback is added by the script of the transition that makes
it due, in the same atomic step as its fired flag (includes/batch.lua); a
call cut by the crash either happened whole (on disk with fsync always) or
not at all, and sending it again changes nothing (the same lease completes a
job once; a closed batch closes once). The counts of callbacks fired are
printed.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis

from echomq.sync import SyncQueue
from faults.procs import Workers, wait_for
from faults.test_server_crash import PERSISTENCE
from servers import PrivateServer, ServerFactory

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def callbacks_of(batch_id: str) -> dict[str, Any]:
    """The three callbacks of a batch, as "work" jobs the fault workers run."""
    return {
        f"on_{kind}": {"name": "work", "data": {"callback": kind, "batch": batch_id}}
        for kind in ("success", "complete", "death")
    }


def fired_jobs(client: redis.Redis, queue: str) -> Counter[tuple[str, str]]:
    """(batch id, callback kind) → how many callback jobs exist (any state)."""
    import orjson

    out: Counter[tuple[str, str]] = Counter()
    for key in client.scan_iter(match=f"emq:{{{queue}}}:job:*", count=1000):
        raw = client.hget(key, "d")
        data = orjson.loads(raw) if raw else None
        if isinstance(data, dict) and "callback" in data:
            out[(str(data["batch"]), str(data["callback"]))] += 1
    return out


def restart(server: PrivateServer) -> None:
    server.kill()
    server.start()


def retried(send: Any) -> Any:
    """``send()``, sent again while the server is down (a client's retry)."""
    while True:
        try:
            return send()
        except Exception:  # refused, reset, LOADING: the server restarts
            time.sleep(0.05)


def die_during_last_completions(server: PrivateServer, queue_name: str) -> str:
    """A closed batch of 40 held by this test: 30 complete, then the server is
    killed -9 while the last 10 completions are being sent (each sent again
    until it is answered). Returns the batch id."""
    with SyncQueue(queue_name, server.url) as queue:
        batch = queue.batch(**callbacks_of("second"))
        batch.add_many([{"name": "held"} for _ in range(40)])
        batch.close()
        held = queue.claim(40, lease=600)  # the workers are stopped: this test holds them
        assert len(held) == 40
        queue.complete_many([(job, 1) for job in held[:30]])
    sent: list[str] = []

    def complete_last() -> None:
        with SyncQueue(queue_name, server.url) as q:
            for job in held[30:]:
                retried(lambda job=job: q.complete(job, 1))
                sent.append(job.id)

    sender = threading.Thread(target=complete_last)
    sender.start()
    wait_for(lambda: len(sent) >= 4, 30, "the first of the last completions")
    restart(server)
    sender.join(60)
    assert not sender.is_alive() and len(sent) == 10
    return batch.id


def die_during_close(server: PrivateServer, queue_name: str) -> str:
    """A batch whose 20 children completed is closed while the server is killed
    -9 (the close sent again until answered). Returns the batch id."""
    with SyncQueue(queue_name, server.url) as queue:
        batch = queue.batch(**callbacks_of("third"))
        batch.add_many([{"name": "held"} for _ in range(20)])
        queue.complete_many([(job, 1) for job in queue.claim(20, lease=600)])
    closed: list[str] = []

    def close_it() -> None:
        with SyncQueue(queue_name, server.url) as q:
            closed.append(retried(lambda: q.close_batch(batch.id)))

    closer = threading.Thread(target=close_it)
    closer.start()
    restart(server)
    closer.join(60)
    assert closed == ["succeeded"]
    return batch.id


@pytest.mark.parametrize("kind", ["valkey", "redis"])
def test_batch_callbacks_exactly_once_across_kills(
    server_factory: ServerFactory, queue_name: str, kind: str, tmp_path: Path
) -> None:
    server: PrivateServer = server_factory(kind, PERSISTENCE["always"])
    workers = Workers(server.url, queue_name, tmp_path, env={"FAULT_CONCURRENCY": "8"})
    expected: dict[str, set[str]] = {}
    with SyncQueue(queue_name, server.url) as queue:
        queue.configure(keep_completed=1_000_000, keep_dead=1_000_000)
        # 1. workers killed -9 mid-batch: 300 children, 3 kill their worker, 4 die
        children: list[dict[str, Any]] = [
            {"name": "work", "data": {"sleep": 0.02}} for _ in range(293)
        ]
        children += [{"name": "work", "data": {"kill": "middle", "sleep": 0.4}} for _ in range(3)]
        children += [{"name": "work", "data": {"fail": True}, "max_attempts": 1}] * 4
        first = queue.batch(**callbacks_of("first"))
        first.add_many(children)
        fan_out = queue.batch(**callbacks_of("fan"))
        fan_out.add_many([{"name": "work", "data": {"sleep": 0.01}} for _ in range(100)])
        fan_in = queue.add("work", {"fan_in": True}, depends_on=[fan_out.id])
        first.close(), fan_out.close()
        expected["first"] = {"death", "complete"}
        expected["fan"] = {"success", "complete"}
    try:
        workers.spawn(), workers.spawn()
        workers.wait_ready(2)
        with SyncQueue(queue_name, server.url) as queue:

            def settled() -> bool:
                for proc in workers.procs:
                    if proc.poll() is not None and len(workers.alive()) < 2:
                        workers.spawn()  # replace a worker that killed itself
                done = queue.batch_status(first.id).state == "failed"
                fanned = (job := queue.get(fan_in)) is not None and job.state == "completed"
                return done and fanned and queue.stats().counts["waiting"] == 0

            wait_for(settled, 120, "the first batch and the fan-in to finish")
            killed = [p for p in workers.procs if p.returncode == -9]
            assert len(killed) >= 1, workers.logs()  # the children that kill their worker did
            status = queue.batch_status(first.id)
            assert (status.completed, status.dead) == (296, 4), status
        workers.stop_all()  # parts 2 and 3 hold their children themselves
        # 2. the server dies while the last completions are being sent
        second = die_during_last_completions(server, queue_name)
        expected["second"] = {"success", "complete"}
        # 3. the server dies while the close is being sent
        third = die_during_close(server, queue_name)
        expected["third"] = {"success", "complete"}
        # 4. cancelled while workers run its children: nothing fires
        workers.spawn(), workers.spawn()
        with SyncQueue(queue_name, server.url) as queue:
            fourth = queue.batch(**callbacks_of("fourth"))
            fourth.add_many([{"name": "work", "data": {"sleep": 0.05}} for _ in range(200)])
            fourth.close()
            wait_for(lambda: queue.batch_status(fourth.id).completed >= 10, 30, "some ran")
            assert queue.cancel_batch(fourth.id) is True
            expected["fourth"] = set()
            wait_for(lambda: queue.stats().counts["waiting"] == 0, 60, "the callbacks ran")
            wait_for(lambda: queue.stats().counts["delayed"] == 0, 60, "nothing left due")
            wait_for(lambda: queue.stats().counts["active"] == 0, 60, "nothing running")
            status = queue.batch_status(fourth.id)
            assert status.state == "cancelled" and status.finished == 200, status
    finally:
        workers.stop_all()
    with server.client() as client:
        counts = fired_jobs(client, queue_name)
    names = {
        "first": first.id,
        "fan": fan_out.id,
        "second": second,
        "third": third,
        "fourth": fourth.id,
    }
    print(f"\ncallbacks fired ({kind}):")
    for label, batch_id in names.items():
        got = {k: v for (b, k), v in counts.items() if b == label}
        print(f"  {label:6} {batch_id}: {dict(sorted(got.items()))}")
        assert got == dict.fromkeys(expected[label], 1), (label, got, workers.logs())
