"""Fixtures of the cluster tests: the session's cluster, or a fresh one to break."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localcluster import LocalCluster, require_cluster_binaries


@pytest.fixture
def fresh_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """A cluster of its own for a test that kills nodes; stopped after the test."""
    require_cluster_binaries()
    cluster = LocalCluster(tmp_path / "cluster")
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
