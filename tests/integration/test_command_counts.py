"""Server commands per call for a plain queue (DESIGN §9, issue 29).

A plain queue: the default lane, nothing stored or configured, a small
backlog of waiting jobs, nothing due, expired or blocked. Its calls are
counted as the server counts them: the sum of ``calls`` over every
``cmdstat_*`` of INFO commandstats, the FCALL itself included, read before
and after the call (the first INFO counts itself once it has answered:
one is taken off).

On the cluster the counts are summed over every primary, not only the one
that owns the queue's slot (where all of a queue's keys and so all its
script work live, by the hash tag): a command the client sends elsewhere
(a topology refresh, a redirected retry, a call routed to the wrong node)
is a cost of the call too, and counting one node would hide it. Replicas
are left out: they count the commands a script's effects replicate to
them, which no client sent. What a cluster's own machinery sends a primary
is left out by name (``NOT_CLIENT_COMMANDS``: a replica's REPLCONF ACK,
once a second), and what the cluster client sends once when it connects
(CLUSTER SLOTS, COMMAND, the library's FUNCTION LOAD on every primary) is
spent in the warm-up round before anything is counted. Nothing else is
taken off, so a script command on the cluster counts as it does on one
server, and the counts there are the same.

The ceilings below are a ratchet: what the scripts achieve now (stored
formats 2 and 3: the feature word, the timed sets' bounds and the default lane's
counts in the meta hash, docs/design.md §9). DESIGN §9's targets (add 10,
claim(1) 12, complete 10) are tests of their own.

A feature used on one queue costs nothing on another: configuring every
feature on queue B leaves queue A's counts exactly as they were.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from commandstats import SCRIPT_COMMANDS
from echomq import Dedupe, SyncQueue
from echomq.joblogs import JobLog
from echomq.options import ORDERINGS
from echomq.outbox import Outbox, Relay
from echomq.registry import info_text

#: ceilings (what the scripts run now); lower them when the scripts improve
ADD_CEILING = 10
CLAIM_CEILING = 12
COMPLETE_CEILING = 9

#: DESIGN §9's targets
ADD_TARGET = 10
CLAIM_TARGET = 12
COMPLETE_TARGET = 10

BACKLOG = 5

#: commands a cluster's own machinery sends a primary, never a client (a
#: replica acknowledges its replication offset with REPLCONF ACK once a second)
NOT_CLIENT_COMMANDS = frozenset({"replconf"})


def _servers(client: redis.Redis | RedisCluster) -> list[redis.Redis]:
    """The servers whose counts are summed: the server, or every primary of a cluster."""
    if isinstance(client, RedisCluster):
        primaries = client.get_primaries()  # type: ignore[no-untyped-call, unused-ignore]
        servers = [node.redis_connection for node in primaries if node.redis_connection]
        assert len(servers) == len(primaries), f"a primary without a connection: {primaries}"
        return servers
    return [client]


def _stats(server: redis.Redis) -> Counter[str]:
    info: dict[str, Any] = server.info("commandstats")
    return Counter(
        {
            name: int(v["calls"])
            for key, v in info.items()
            if (name := key.removeprefix("cmdstat_")) not in NOT_CLIENT_COMMANDS
        }
    )


def commands_run(client: redis.Redis | RedisCluster, run: Callable[[], object]) -> Counter[str]:
    """The commands the server (every primary of a cluster) ran during ``run()``, by
    name (INFO's own calls taken off)."""
    servers = _servers(client)
    assert servers, "no server to count on"
    before = sum((_stats(server) for server in servers), Counter[str]())
    run()
    after = sum((_stats(server) for server in servers), Counter[str]())
    delta = after - before
    delta["info"] -= len(servers)  # each first INFO, counted once it had answered
    return +delta


def measure(q: SyncQueue, client: redis.Redis | RedisCluster) -> dict[str, Counter[str]]:
    """The commands of a one-job add, claim(1) and complete on plain queue ``q``."""
    counts = {"add": commands_run(client, lambda: q.add("job", 1))}
    got: list[Any] = []
    counts["claim"] = commands_run(client, lambda: got.extend(q.claim(1)))
    assert len(got) == 1
    counts["complete"] = commands_run(client, lambda: q.complete(got[0], {"ok": 1}))
    assert q.get(got[0].id).state == "completed"  # type: ignore[union-attr]
    for call, counted in counts.items():  # counted where the call ran (not an idle node)
        scripts = sum(counted[command] for command in SCRIPT_COMMANDS)
        assert scripts == 1, f"{call}: {scripts} script calls counted, not 1: {dict(counted)}"
    return counts


def plain_counts(q: SyncQueue, client: redis.Redis | RedisCluster) -> dict[str, Counter[str]]:
    """A small backlog on ``q``, one warm-up round, then ``measure``."""
    q.add_many([{"name": "backlog", "data": i} for i in range(BACKLOG)])
    # warm up: the library loaded, the connection open, the ring's turn settled
    q.complete(q.claim(1)[0], None)
    q.add("warm", 0)
    return measure(q, client)


def total(counts: dict[str, Counter[str]], call: str) -> int:
    return sum(counts[call].values())


def _report(counts: dict[str, Counter[str]]) -> str:
    return "; ".join(
        f"{call} {sum(c.values())}: {dict(sorted(c.items()))}" for call, c in counts.items()
    )


def test_plain_queue_command_counts_stay_under_the_ceilings(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    counts = plain_counts(sq, redis_client)
    print("\n" + _report(counts))
    assert total(counts, "add") <= ADD_CEILING, _report(counts)
    assert total(counts, "claim") <= CLAIM_CEILING, _report(counts)
    assert total(counts, "complete") <= COMPLETE_CEILING, _report(counts)


@pytest.mark.parametrize("ordering", ORDERINGS)
def test_plain_queue_counts_hold_in_every_ordering(
    ordering: str, make_sync: Callable[..., SyncQueue], queue_name: str, redis_client: redis.Redis
) -> None:
    """A plain queue in the mint or aged ordering costs no more than in the
    composite one (docs/ordering.md): its key is taken without a counter."""
    counts = plain_counts(make_sync(f"{queue_name}-{ordering}", ordering=ordering), redis_client)
    print("\n" + _report(counts))
    assert total(counts, "add") <= ADD_CEILING, _report(counts)
    assert total(counts, "claim") <= CLAIM_CEILING, _report(counts)
    assert total(counts, "complete") <= COMPLETE_CEILING, _report(counts)


@pytest.mark.parametrize(
    ("call", "target"),
    [("add", ADD_TARGET), ("claim", CLAIM_TARGET), ("complete", COMPLETE_TARGET)],
)
def test_plain_queue_meets_the_design_targets(
    call: str, target: int, sq: SyncQueue, redis_client: redis.Redis
) -> None:
    counts = plain_counts(sq, redis_client)
    assert total(counts, call) <= target, _report(counts)


def _wait_until(check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_features_of_one_queue_cost_another_nothing(
    make_sync: Callable[..., SyncQueue],
    queue_name: str,
    redis_client: redis.Redis,
    backend_url: str,
    tmp_path: Path,
) -> None:
    a = make_sync(queue_name + "-a")
    b = make_sync(queue_name + "-b")
    before = plain_counts(a, redis_client)
    # queue B uses every feature: stored settings, queue-wide limits, lane
    # controls (cap, rate, max_waiting, pause), a schedule, a dependency, a wait, tags,
    # a batch (its children, a fan-in on it, a cancelled one with its cancelled child),
    # deduplication (every mode, one job held behind a running one), a job
    # relayed from a transactional outbox, an age_step; and queue C is aged,
    # with position read on both; a job with a log, a registered worker, metrics
    b.configure(
        max_attempts=3,
        keep_completed=10,
        concurrency=5,
        rate=(100, 1.0),
        age_step=0.5,
        metrics=True,
    )
    c = make_sync(queue_name + "-c", ordering="aged")
    c.configure(age_step=0.5)
    c.position(c.add("aged", 1, priority=2, group="x"))
    b.add("logged", 1)
    [logged] = b.claim(1, worker="w1")
    logged._log = JobLog(logged.attempts)
    logged.log("a line")
    b.extend_many([logged])  # the heartbeat carries it
    logged.log("another")
    b.complete(logged, None)  # and the outcome
    assert [line.message for line in b.logs(logged.id)] == ["a line", "another"]
    assert [(p.name, p.completed) for p in b.metrics()] == [("logged", 1)]
    parent = b.add("parent", 1)  # first in the ring: B's next claim takes it
    b.add("child", 1, depends_on=[parent])
    b.add("capped", 1, group="g")
    b.add("paused", 1, group="p")
    b.add("tagged", 1, group="p", tags={"customer": "42"})
    batch = b.batch(on_success={"name": "done"}, on_complete={"name": "done"})
    batch.add("batched", 1, group="p")
    batch.close()
    b.add("fan_in", 1, depends_on=[batch.id])
    gone = b.batch()
    gone.add("batched", 1, group="p")
    b.cancel_batch(gone.id)
    for mode, window in (("drop", 60.0), ("throttle", 60.0), ("debounce", 60.0)):
        for _ in range(2):
            b.add("deduped", 1, group="p", dedupe=Dedupe(mode, mode, window))  # type: ignore[arg-type]
    b.add("latest", 1, group="p", dedupe=Dedupe("latest", "latest"))
    ob = Outbox(f"sqlite:///{tmp_path / 'outbox.db'}")  # a job relayed from an outbox
    ob.create_table()
    with ob.engine.begin() as conn:
        ob.add(conn, b.name, "relayed", 1, group="p")
    relay = Relay(ob, backend_url)
    assert relay.relay_once() == 1
    relay.close()
    b.set_lane("g", concurrency=1, rate=(5, 1.0), max_waiting=100)
    b.set_lane("p", paused=True)
    b.schedule("tick", every=60.0, name="tick")
    b.worker_beat("w1", 30.0, info_text("host", 1, [b.name], 1, []))
    waited: list[Any] = []
    waiter = threading.Thread(target=lambda: waited.append(b.wait(parent, timeout=30.0)))
    waiter.start()
    try:
        _wait_until(lambda: bool(redis_client.exists(b.engine.keys.waiters)), "B's wait")
        assert b.position(parent).queue_ahead == 0
        after = measure(a, redis_client)
        print("\n" + _report(after))
        assert after == before, f"before: {_report(before)}\nafter: {_report(after)}"
    finally:
        job = b.claim(1)
        assert [j.id for j in job] == [parent]
        b.complete(job[0], None)
        waiter.join(timeout=30.0)
    assert not waiter.is_alive()
    assert waited[0].state == "completed"


def test_a_workers_claim_and_complete_cost_what_plain_ones_cost(
    make_sync: Callable[..., SyncQueue], queue_name: str, redis_client: redis.Redis
) -> None:
    """The worker's id travels with its claim and lands in the job's hash with the
    write the lease makes anyway (job.worker); a job that logged nothing sends no
    log: not one command more."""
    plain = plain_counts(make_sync(queue_name + "-plain"), redis_client)
    q = make_sync(queue_name + "-worker")
    q.add_many([{"name": "backlog", "data": i} for i in range(BACKLOG)])
    q.complete(q.claim(1, worker="w1")[0], None)
    q.add("warm", 0)
    got: list[Any] = []
    claim = commands_run(redis_client, lambda: got.extend(q.claim(1, worker="w1")))
    got[0]._log = JobLog(got[0].attempts)  # a worker's job whose handler logged nothing
    complete = commands_run(redis_client, lambda: q.complete(got[0], None))
    assert claim == plain["claim"] and complete == plain["complete"]
    assert q.get(got[0].id).worker == "w1"  # type: ignore[union-attr]


#: a completion and the next claim in one call (completeClaim.lua): what the two
#: cost apart, less the second FCALL (the claim starts as a call of its own:
#: it reads the clock and the meta hash again, after the completion wrote it)
COMPLETE_CLAIM_CEILING = COMPLETE_CEILING + CLAIM_CEILING - 1


def test_a_completion_and_claim_in_one_call_cost_the_two_less_one_fcall(
    make_sync: Callable[..., SyncQueue], queue_name: str, redis_client: redis.Redis
) -> None:
    plain = plain_counts(make_sync(queue_name + "-plain"), redis_client)
    q = make_sync(queue_name + "-combined")
    q.add_many([{"name": "backlog", "data": i} for i in range(BACKLOG)])
    [job] = q.claim(1)
    [job] = q.complete_and_claim([(job, None)], 1).claimed  # warm up
    got: list[Any] = []
    combined = commands_run(
        redis_client, lambda: got.extend(q.complete_and_claim([(job, {"ok": 1})], 1).claimed)
    )
    assert len(got) == 1 and q.get(job.id).state == "completed"  # type: ignore[union-attr]
    apart = plain["complete"] + plain["claim"]
    apart["fcall"] -= 1
    print(f"\ncomplete_and_claim {sum(combined.values())}: {dict(sorted(combined.items()))}")
    assert combined == +apart, f"combined {dict(combined)}, apart {dict(apart)}"
    assert sum(combined.values()) <= COMPLETE_CLAIM_CEILING


def _pruning_completion(q: SyncQueue, client: redis.Redis | RedisCluster) -> Counter[str]:
    """The commands of a completion that prunes one job for the count (keep_completed 2)."""
    for _ in range(3):
        q.complete(q.claim(1)[0], None)
    [job] = q.claim(1)
    return commands_run(client, lambda: q.complete(job, None))


def test_a_pruning_completion_reads_no_pruned_job_without_tags_or_logs(
    make_sync: Callable[..., SyncQueue], queue_name: str, redis_client: redis.Redis
) -> None:
    """Format 4's letter t: a completion that prunes a job reads the pruned job's
    fields (its tags' indexes, its log) only on a queue where some job has tags or
    a log; a queue that tagged a job pays one HMGET per pruned job. On a cluster
    every pruned job is read, whatever its queue holds (read before write: a slot
    migration may have moved its hash)."""
    plain = make_sync(queue_name + "-plain", keep_completed=2)
    plain.add_many([{"name": "job", "data": i} for i in range(6)])
    untagged = _pruning_completion(plain, redis_client)
    # the meta hash and the completed job (its lease), none for the pruned job
    # but on a cluster
    cluster = isinstance(redis_client, RedisCluster)
    assert untagged["hmget"] == (3 if cluster else 2), dict(untagged)
    if cluster:
        return
    assert plain.stats().counts["completed"] == 2
    tagged = make_sync(queue_name + "-tagged", keep_completed=2)
    tagged.add("tagged", 1, tags={"customer": "42"})
    tagged.add_many([{"name": "job", "data": i} for i in range(5)])
    with_tags = _pruning_completion(tagged, redis_client)
    assert with_tags["hmget"] == untagged["hmget"] + 1, (dict(untagged), dict(with_tags))
    index = "emq:{" + queue_name + "-tagged}:tag:customer=42"
    assert redis_client.exists(index) == 0  # the pruned job left its index (its last entry)


def test_a_stored_setting_is_read_once_per_change_not_per_call(
    make_sync: Callable[..., SyncQueue], queue_name: str, redis_client: redis.Redis
) -> None:
    """The settings' version in the feature word (includes/fixed.lua): a queue
    with a stored setting reads its settings hash after each change, not on
    every call; a change is obeyed from the next call on; and two queues with
    different settings each obey their own."""
    plain = plain_counts(make_sync(queue_name + "-p"), redis_client)
    q = make_sync(queue_name + "-s")
    other = make_sync(queue_name + "-o")
    q.configure(max_attempts=5)
    other.configure(max_attempts=7)
    counts = plain_counts(q, redis_client)  # the same commands as a plain queue's
    assert counts == plain, f"stored: {_report(counts)}\nplain: {_report(plain)}"
    # the first call after a change reads the hash, and obeys it
    q.configure(max_attempts=2)
    first = commands_run(redis_client, lambda: q.add("after", 1))
    assert first["hgetall"] == 1, dict(first)
    then = commands_run(redis_client, lambda: q.add("after", 1))
    assert then["hgetall"] == 0, dict(then)
    ids = [other.add("y", 1)]  # (its first call: it reads its settings once)
    for _ in range(3):  # alternating calls of two queues: each its own, none read again
        mine = commands_run(redis_client, lambda: ids.append(q.add("x", 1)))
        theirs = commands_run(redis_client, lambda: ids.append(other.add("y", 1)))
        assert mine["hgetall"] == theirs["hgetall"] == 0, (dict(mine), dict(theirs))
    for job_id in ids:
        job = q.get(job_id) or other.get(job_id)
        assert job is not None and job.max_attempts == (2 if job.name == "x" else 7)
    q.configure(max_attempts=None)  # the last setting removed: the client's own again
    job = q.get(q.add("z", 1))
    assert job is not None and job.max_attempts == 3
    assert "s" not in str(redis_client.hget(q.engine.keys.meta, "f"))


def test_a_queue_made_again_after_a_flush_obeys_its_new_settings(
    make_sync: Callable[..., SyncQueue], queue_name: str, redis_client: redis.Redis
) -> None:
    """The version is the server time of the change, so a queue deleted and made
    again under the same name with other settings never meets the options kept
    for the old one."""
    q = make_sync(queue_name)
    q.configure(max_attempts=5)
    first = q.get(q.add("a", 1))
    assert first is not None and first.max_attempts == 5
    for key in redis_client.scan_iter(match="emq:{" + queue_name + "}:*"):
        redis_client.delete(key)
    q.configure(max_attempts=6)
    again = q.get(q.add("b", 1))
    assert again is not None and again.max_attempts == 6
