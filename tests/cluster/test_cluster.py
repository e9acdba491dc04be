"""Queues on a real Valkey Cluster (DESIGN §5, §7): spread, one slot, failover, durability.

The contract suites (core, worker, CLI) already run on the session's cluster
as their third backend; these tests check what only a cluster has: shards,
hash slots, replicas, per-node script caches, and a primary that dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict
from collections.abc import Iterator

import pytest
import redis.cluster

from commandstats import script_calls as count_script_calls
from echomq import NotReplicated, Queue, SyncQueue, Worker
from echomq.keys import QueueKeys
from echomq.scripts.library import library
from failover import (
    FailoverReport,
    StalledReplicaAdd,
    check_after_failover,
    durable_add_to_stalled_replica,
    lagging_replica_loss,
    run_failover,
)
from faults.figures import FAILOVER_RUNS_ENV, env_int, record
from localcluster import SLOTS, LocalCluster
from servers import PrivateServer, ServerFactory

QUEUES = 64
#: primary kills per failover case (ECHOMQ_FAILOVER_RUNS; docs/scaling.md's table uses 5).
FAILOVER_RUNS = env_int(FAILOVER_RUNS_ENV, 1, high=20)
FAILOVER_TIMEOUT = 60 + 60 * FAILOVER_RUNS


def crc16(data: bytes) -> int:
    """CRC16-XMODEM (poly 0x1021, init 0): the checksum of cluster key slots."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        crc &= 0xFFFF
    return crc


def key_slot(key: str) -> int:
    """The slot of ``key``: CRC16 of its hash tag (the first non-empty ``{…}``) mod 16384."""
    raw = key.encode()
    start = raw.find(b"{")
    if start != -1:
        end = raw.find(b"}", start + 1)
        if end > start + 1:
            raw = raw[start + 1 : end]
    return crc16(raw) % SLOTS


def fill(q: SyncQueue) -> None:
    """Give a queue keys of every kind: lanes, a delayed job, an active job, an idempotency key."""
    q.add("j", {"n": 1})
    q.add("j", {"n": 2}, group="acme", key="order-7")
    q.add("j", delay=3600)
    q.set_weight("acme", 3)
    q.claim(1)


def read_on_replica(replica: PrivateServer, key: str) -> dict[str, str]:
    """HGETALL on a replica itself (READONLY: no redirection to the primary)."""
    with replica.client() as client:
        client.readonly()
        return dict(client.hgetall(key))


#: ms a replica's replication stream stands still (CLIENT PAUSE WRITE) under a durable add.
REPLICATION_PAUSE_MS = 500


@contextlib.contextmanager
def replication_paused(replica: PrivateServer) -> Iterator[None]:
    """The replica stops applying its primary's stream for REPLICATION_PAUSE_MS
    (CLIENT PAUSE WRITE: a replica's link to its primary pauses with it) and
    still serves reads; an add that returned without waiting for the replica
    (no WAIT) is then not on it. Unpaused when the block ends."""
    with replica.client() as client:
        client.execute_command("CLIENT", "PAUSE", REPLICATION_PAUSE_MS, "WRITE")
        try:
            yield
        finally:
            client.execute_command("CLIENT", "UNPAUSE")


def test_crc16_matches_the_reference_vector() -> None:
    assert crc16(b"123456789") == 0x31C3
    assert key_slot("emq:{mail}:meta") == key_slot("mail") == key_slot("x{mail}y{other}")


def test_the_cluster_has_three_primaries_each_with_one_replica(local_cluster: LocalCluster) -> None:
    primaries = local_cluster.primaries()
    assert len(primaries) == 3
    assert all(len(local_cluster.replicas_of(p)) == 1 for p in primaries)
    assert {local_cluster.replicas_of(p)[0].port for p in primaries}.isdisjoint(
        p.port for p in primaries
    )


def test_64_queues_spread_over_all_primaries_each_in_one_slot(
    local_cluster: LocalCluster, queue_name: str
) -> None:
    names = [f"{queue_name}-{i:02d}" for i in range(QUEUES)]
    for name in names:
        with SyncQueue(name, local_cluster.url) as q:
            fill(q)

    holders: dict[str, set[int]] = defaultdict(set)
    keys: dict[str, list[str]] = defaultdict(list)
    primaries = local_cluster.primaries()
    for node in primaries:
        with node.client() as client:
            for key in client.scan_iter(match=f"emq:{{{queue_name}-*", count=1000):
                name = key[len("emq:{") : key.index("}")]
                holders[name].add(node.port)
                keys[name].append(key)
                assert client.cluster("KEYSLOT", key) == key_slot(key)

    assert sorted(holders) == names
    assert all(len(ports) == 1 for ports in holders.values())  # a queue lives on one node
    for name in names:
        slot = key_slot(QueueKeys(name).meta)
        assert {key_slot(k) for k in keys[name]} == {slot}
        assert any(":job:" in k for k in keys[name])  # data-dependent keys too
    per_primary = {p.port: sum(1 for h in holders.values() if p.port in h) for p in primaries}
    assert all(count > 0 for count in per_primary.values()), per_primary


def queues_on_each_primary(cluster: LocalCluster, stem: str) -> dict[int, str]:
    """One queue name per primary (by computed slot), for tests that need every shard."""
    chosen: dict[int, str] = {}
    for i in range(1000):
        name = f"{stem}-{i}"
        node = cluster.primary_for_slot(key_slot(name))
        assert node is not None
        chosen.setdefault(node.port, name)
        if len(chosen) == len(cluster.primaries()):
            return chosen
    raise AssertionError("no queue name found for some primary")


def test_scripts_are_loaded_on_every_primary_that_runs_them(
    local_cluster: LocalCluster, queue_name: str
) -> None:
    chosen = queues_on_each_primary(local_cluster, queue_name)
    for name in chosen.values():
        with SyncQueue(name, local_cluster.url) as q:
            q.add("j")
            assert len(q.claim(1)) == 1
    for port in chosen:
        with local_cluster.node_on(port).client() as client:
            assert client.function_list(library().name) != []


def script_calls(node: PrivateServer) -> int:
    with node.client() as client:
        return count_script_calls(client)


def test_scripts_go_straight_to_the_primary_of_the_queue(
    local_cluster: LocalCluster, queue_name: str
) -> None:
    owner = local_cluster.primary_for_slot(key_slot(queue_name))
    others = [p for p in local_cluster.primaries() if p is not owner]
    assert owner is not None and len(others) == 2
    with SyncQueue(queue_name, local_cluster.url) as q:
        q.add("warm-up")  # the client has read the topology, the node has the scripts
        [job] = q.claim(1)
        q.complete(job)
        before = {p.port: script_calls(p) for p in local_cluster.primaries()}
        q.add_many([{"name": "j"}] * 5)
        for job in q.claim(5):
            q.complete(job)
    after = {p.port: script_calls(p) for p in local_cluster.primaries()}
    assert after[owner.port] - before[owner.port] == 7  # add_many, claim, 5 x complete
    assert all(after[p.port] == before[p.port] for p in others)  # no MOVED detours


def test_a_primary_that_lost_its_scripts_gets_them_again(
    local_cluster: LocalCluster, queue_name: str
) -> None:
    with SyncQueue(queue_name, local_cluster.url) as q:
        q.add("j")
        owner = local_cluster.primary_for_slot(key_slot(queue_name))
        assert owner is not None
        with owner.client() as client:
            client.script_flush()  # as on a node that lost its scripts and functions
            client.function_flush()
            assert q.add("j") and len(q.claim(2)) == 2  # not found, FUNCTION LOAD, FCALL again
            assert client.function_list(library().name) != []


async def test_an_idle_worker_blocks_on_the_node_of_its_queue(
    local_cluster: LocalCluster, queue_name: str
) -> None:
    owner = local_cluster.primary_for_slot(key_slot(queue_name))
    assert owner is not None
    done: list[str] = []
    async with Queue(queue_name, local_cluster.url) as q:
        worker = Worker(q, {"j": lambda job: done.append(job.id)}, concurrency=2)
        task = asyncio.create_task(worker.run(install_signals=False))
        try:
            await wait_until(lambda: worker.idle)

            def blocked_on_owner() -> bool:
                with owner.client() as client:
                    return any(c["cmd"] == "blpop" for c in client.client_list())

            # idle is set just before the BLPOP is sent (it may first open a connection)
            await wait_until(blocked_on_owner)  # fails if the wait is on another node
            job_id = await q.add("j")
            await wait_until(lambda: done == [job_id])
        finally:
            worker.stop(immediate=True)
            await asyncio.wait_for(task, 10)


def test_a_durable_add_is_on_the_replica_when_it_returns(
    local_cluster: LocalCluster, queue_name: str
) -> None:
    owner = local_cluster.primary_for_slot(key_slot(queue_name))
    assert owner is not None
    [replica] = local_cluster.replicas_of(owner)
    keys = QueueKeys(queue_name)
    with SyncQueue(queue_name, local_cluster.url, durable=True) as q:
        q.add("warm-up")  # the client knows the topology and the scripts first
        with replication_paused(replica):
            job_id = q.add("j", {"n": 1})
            assert read_on_replica(replica, keys.job(job_id))["n"] == "j"
        with replication_paused(replica):
            ids = q.add_many([{"name": "k"}, {"name": "k"}])
            assert all(read_on_replica(replica, keys.job(i)) for i in ids)


async def test_an_async_durable_add_is_on_the_replica_when_it_returns(
    local_cluster: LocalCluster, queue_name: str
) -> None:
    owner = local_cluster.primary_for_slot(key_slot(queue_name))
    assert owner is not None
    [replica] = local_cluster.replicas_of(owner)
    keys = QueueKeys(queue_name)
    async with Queue(queue_name, local_cluster.url) as q:
        await q.add("warm-up")
        with replication_paused(replica):
            job_id = await q.add("j", durable=True)
            assert read_on_replica(replica, keys.job(job_id))["n"] == "j"
        with replication_paused(replica):
            ids = await q.add_many([{"name": "k"}] * 3, durable=True)
            assert all(read_on_replica(replica, keys.job(i)) for i in ids)


STALL_TIMEOUT = 1.0  # durable_timeout of the add sent to a stopped replica


def assert_durable_add_waited(result: StalledReplicaAdd) -> None:
    """What a durable add must do while the replica is stopped (see failover.py)."""
    assert result.refused is not None, "a durable add returned while its replica was stopped"
    assert "not acknowledged by 1 replica" in str(result.refused)
    # it waited its timeout for the replica (a missing WAIT would answer at once)
    assert result.seconds >= STALL_TIMEOUT - 0.25, f"refused after {result.seconds:.3f}s"
    assert result.on_primary, "the refused add's job is not on the primary"
    assert result.blocked_until_resumed, "a durable add returned while its replica was stopped"
    assert result.on_replica, "a durable add returned before its replica had the job"


def test_a_durable_add_to_a_stopped_replica_waits_then_raises_not_replicated(
    local_cluster: LocalCluster, queue_name: str
) -> None:
    _, replica = local_cluster.queue_nodes(queue_name)
    try:
        result = durable_add_to_stalled_replica(
            local_cluster.url, replica, queue_name, timeout=STALL_TIMEOUT
        )
    finally:
        local_cluster.wait_until_healthy()  # the replica's failure flag, if any, clears
    assert_durable_add_waited(result)


async def test_an_async_durable_add_to_a_stopped_replica_raises_not_replicated(
    local_cluster: LocalCluster, queue_name: str
) -> None:
    _, replica = local_cluster.queue_nodes(queue_name)
    async with Queue(queue_name, local_cluster.url, durable_timeout=STALL_TIMEOUT) as q:
        await q.add("warm-up", durable=True)
        replica.pause()
        try:
            started = time.monotonic()
            with pytest.raises(NotReplicated, match="not acknowledged by 1 replica") as caught:
                await q.add("stalled", durable=True)
            waited = time.monotonic() - started
        finally:
            replica.resume()
        [job_id] = caught.value.ids
        assert await q.get(job_id) is not None  # written on the primary all the same
    assert waited >= STALL_TIMEOUT - 0.25, f"refused after {waited:.3f}s: no wait for the replica"
    await asyncio.to_thread(local_cluster.wait_until_healthy)


async def wait_until(condition: object, timeout: float = 10.0) -> None:
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s")
        await asyncio.sleep(0.01)


# -- a primary dies ---------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(FAILOVER_TIMEOUT)
async def test_a_killed_primary_is_replaced_and_clients_carry_on(
    fresh_cluster: LocalCluster, queue_name: str
) -> None:
    for run in range(FAILOVER_RUNS):
        name = f"{queue_name}-{run}"
        report = await run_failover(fresh_cluster, name, durable=False)
        print(report.summary())
        record_failover(report)

        assert report.promoted_after < 15.0
        assert report.acks_after_promotion > 0, "producers did not resume"
        assert report.runs_after_promotion > 0, "workers did not resume"
        assert report.workers_stopped == []
        # without WAIT, an add acknowledged in the primary's last moments may be
        # gone (docs/scaling.md has the counts); whatever is left is consistent
        check_after_failover(fresh_cluster, name, report)
        await asyncio.to_thread(fresh_cluster.wait_until_healthy)


@pytest.mark.slow
@pytest.mark.timeout(FAILOVER_TIMEOUT)
async def test_durable_adds_lose_nothing_acknowledged_in_a_failover(
    fresh_cluster: LocalCluster, queue_name: str
) -> None:
    for run in range(FAILOVER_RUNS):
        name = f"{queue_name}-{run}"
        report = await run_failover(fresh_cluster, name, durable=True)
        print(report.summary())
        record_failover(report)

        assert report.acknowledged > 0 and report.acks_after_promotion > 0
        assert report.lost == []
        assert report.workers_stopped == []
        check_after_failover(fresh_cluster, name, report)
        await asyncio.to_thread(fresh_cluster.wait_until_healthy)


def record_failover(report: FailoverReport) -> None:
    record(
        "failover",
        durable=report.durable,
        acked=report.acknowledged,
        lost=len(report.lost),
        failed_adds=report.failed_adds,
        not_replicated=report.not_replicated,
        reruns=report.reruns,
        promoted_after=round(report.promoted_after, 3),
        adds_per_second=round(report.adds_per_second),
        workers_stopped=len(report.workers_stopped),
    )


@pytest.mark.slow
@pytest.mark.timeout(FAILOVER_TIMEOUT)
def test_a_lagging_replica_loses_acknowledged_adds_unless_durable(
    fresh_cluster: LocalCluster, queue_name: str
) -> None:
    """The replica stalls (SIGSTOP) while the primary acknowledges adds, then the
    primary dies: plain adds acknowledged meanwhile are gone; a durable add was
    never acknowledged (NotReplicated), so nothing it promised is lost."""
    for run in range(FAILOVER_RUNS):
        name = f"{queue_name}-{run}"
        loss = lagging_replica_loss(fresh_cluster, name)
        print(f"lagging replica: {loss.lost} of {loss.acknowledged} acknowledged adds lost")
        record(
            "lagging_replica",
            acked=loss.acknowledged,
            lost=loss.lost,
            durable_refused=loss.durable_refused,
        )

        assert loss.durable_refused
        assert loss.lost > 0
        assert fresh_cluster.primary_for_slot(key_slot(name)) is not None


def test_a_durable_add_without_any_replica_raises_not_replicated(
    server_factory: ServerFactory, queue_name: str
) -> None:
    server = server_factory("valkey")
    with SyncQueue(queue_name, server.url, durable=True, durable_timeout=0.1) as q:
        with pytest.raises(NotReplicated, match="not acknowledged by 1 replica") as caught:
            q.add("j")
        [job_id] = caught.value.ids
        assert q.get(job_id) is not None  # written on the primary all the same


def test_a_durable_add_on_a_single_server_waits_for_its_replica(
    server_factory: ServerFactory, queue_name: str
) -> None:
    primary = server_factory("valkey", {"repl-diskless-sync-delay": "0"})
    replica = server_factory("valkey", {"replicaof": f"127.0.0.1 {primary.port}"})
    with replica.client() as client:
        deadline = time.monotonic() + 10
        while client.info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, "the replica never synced"
            time.sleep(0.02)
    with SyncQueue(queue_name, primary.url, durable=True) as q:
        job_id = q.add("j")
    with replica.client() as client:
        assert client.hget(QueueKeys(queue_name).job(job_id), "n") == "j"
    result = durable_add_to_stalled_replica(primary.url, replica, queue_name, timeout=STALL_TIMEOUT)
    assert_durable_add_waited(result)


def test_durable_timeout_is_checked() -> None:
    with pytest.raises(ValueError, match="durable_timeout"):
        SyncQueue("q", "redis://127.0.0.1:1/0", durable_timeout=0)
    with pytest.raises(ValueError, match="durable_timeout"):
        Queue("q", "redis://127.0.0.1:1/0", durable_timeout=60)


def test_a_function_call_is_routed_by_its_first_key_without_asking_the_server(
    local_cluster: LocalCluster, queue_name: str
) -> None:
    """redis-py asks a node for an FCALL's keys (COMMAND GETKEYS, one more round
    trip per call) unless the client routes it like EVALSHA: echomq's does."""

    def counts() -> tuple[int, int]:
        """(COMMAND GETKEYS calls, script calls) of every primary so far."""
        getkeys = scripts = 0
        for node in local_cluster.primaries():
            with node.client() as client:
                stats = client.info("commandstats")
                getkeys += sum(
                    int(v.get("calls", 0)) for k, v in stats.items() if "getkeys" in k.lower()
                )
                scripts += count_script_calls(client)
        return getkeys, scripts

    async def async_calls() -> None:
        async with Queue(queue_name, local_cluster.url) as aq:
            for _ in range(10):
                await aq.add("j")
            await aq.claim(5)
            await aq.stats()

    with SyncQueue(queue_name, local_cluster.url) as q:
        q.add("warm-up")  # the library is loaded; topology read
        getkeys_before, scripts_before = counts()
        for _ in range(10):
            q.add("j")
        q.claim(5)
        q.stats()
        asyncio.run(async_calls())
        getkeys_after, scripts_after = counts()
        assert scripts_after - scripts_before >= 24  # the calls did run as scripts
        assert getkeys_after == getkeys_before


def test_closing_a_sync_cluster_queue_closes_its_connections_to_every_node(
    local_cluster: LocalCluster, queue_name: str
) -> None:
    """redis-py's cluster client made from a url leaves each node's pool open on
    close; echomq's closes them, so no socket waits for the garbage collector."""
    marker = f"emq-close-{queue_name}"[:60]

    def connected() -> int:
        """Connections named ``marker`` on every primary."""
        total = 0
        for node in local_cluster.primaries():
            with node.client() as client:
                total += sum(1 for c in client.client_list() if c.get("name") == marker)
        return total

    q = SyncQueue(queue_name, local_cluster.url)
    q.add("warm-up")  # the library is loaded on every primary: a connection to each
    client = q.sender.client()
    assert isinstance(client, redis.cluster.RedisCluster)
    for node in client.get_primaries():  # type: ignore[no-untyped-call]
        client.execute_command("CLIENT", "SETNAME", marker, target_nodes=node)  # type: ignore[no-untyped-call]
    assert connected() == len(local_cluster.primaries())
    q.close()
    deadline = time.monotonic() + 5.0
    while connected() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert connected() == 0
