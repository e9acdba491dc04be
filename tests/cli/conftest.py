"""Drive the real ``echomq`` command line as a subprocess against a private server.

Every CLI test gets ``cli``: a function that runs ``python -m echomq.cli ARGS``
with ``--url`` and ``--queue`` appended for the test's own server and queue
(unless told not to), ECHOMQ_URL and ECHOMQ_QUEUE removed from the
environment, and ECHOMQ_HOME pointing at the session's temporary directory
(so nothing can reach the user's embedded server). It returns the finished
process: ``.returncode``, ``.stdout``, ``.stderr``.

The CLI is a thin layer over the queue, whose contract tests run on every
backend; here every test runs on Valkey and on the local Valkey Cluster
(``--url redis+cluster://…``), not on Redis, to keep the suite fast.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from cli.clitools import CLI, TIMEOUT, RunCli, cli_env, queue_args
from echomq import SyncQueue

#: the backends of tests/conftest.py that the CLI tests leave out.
LEFT_OUT = ("redis",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the CLI tests' runs on Redis.

    Why not override ``backend`` here with fewer params: pytest groups
    session-scoped params by index, so an override's 2nd param would share a
    group with the root fixture's 2nd ("redis") and the cached ``backend_url``
    of one would leak into the other's tests.
    """
    here = Path(__file__).parent
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("backend") if callspec is not None else None
        left_out = backend in LEFT_OUT and item.path.is_relative_to(here)
        (dropped if left_out else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture
def cli(backend_url: str, queue_name: str) -> RunCli:
    def run(
        *args: str,
        queue: bool = True,
        url: str | None = None,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        argv = queue_args(args, url or backend_url, queue_name) if queue else list(args)
        return subprocess.run(
            [*CLI, *argv],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=cli_env(env),
            cwd=cwd,
            check=False,
        )

    return run


@pytest.fixture
def sq(backend_url: str, queue_name: str) -> Iterator[SyncQueue]:
    """The test's queue, for arranging state and checking what the CLI did."""
    q = SyncQueue(queue_name, backend_url)
    try:
        yield q
    finally:
        q.close()
