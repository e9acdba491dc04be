"""``echomq server status|start|stop|logs``, and commands on the embedded server.

Each test uses the ``embedded`` fixture: a fresh temporary ECHOMQ_HOME that is
passed to the CLI, so the user's own embedded server is never touched.
"""

from __future__ import annotations

import json

from cli.clitools import RunCli, one_line_error
from echomq.embedded import EmbeddedServer
from echomq.ids import is_id


def test_status_start_logs_stop(cli: RunCli, embedded: EmbeddedServer) -> None:
    env = {"ECHOMQ_HOME": str(embedded.data_dir)}
    down = json.loads(cli("server", "status", "--json", queue=False, env=env).stdout)
    assert down["running"] is False and down["data_dir"] == str(embedded.data_dir)
    assert "not running" in cli("server", "status", queue=False, env=env).stdout
    one_line_error(cli("server", "logs", queue=False, env=env))  # never started: no log yet

    assert cli("server", "start", queue=False, env=env).stdout.startswith("started: unix://")
    up = json.loads(cli("server", "status", "--json", queue=False, env=env).stdout)
    assert up["running"] is True and up["pid"] == embedded.status()["pid"]
    assert up["used_memory"] > 0 and up["uptime_seconds"] >= 0
    text = cli("server", "status", queue=False, env=env).stdout
    for fragment in ("running", str(up["pid"]), up["socket"], "memory", "uptime"):
        assert fragment in text, fragment
    logs = cli("server", "logs", "-n", "5", queue=False, env=env).stdout.splitlines()
    assert 0 < len(logs) <= 5 and any("Ready to accept connections" in line for line in logs)

    stop = cli("server", "stop", queue=False, env=env)
    assert stop.returncode == 0 and "stopped" in stop.stdout
    assert not embedded.is_running()
    again = cli("server", "stop", queue=False, env=env)
    assert again.returncode == 0 and "was not running" in again.stdout


def test_queue_commands_start_and_use_the_embedded_server(
    cli: RunCli, embedded: EmbeddedServer
) -> None:
    env = {"ECHOMQ_HOME": str(embedded.data_dir)}
    added = cli("add", "hello", "--data", '{"x": 1}', "-q", "emb", queue=False, env=env)
    assert added.returncode == 0, added.stderr
    assert is_id(added.stdout.strip()) and embedded.is_running()
    stats = json.loads(cli("stats", "--json", "-q", "emb", queue=False, env=env).stdout)
    assert stats["counts"]["waiting"] == 1
    via_env = cli("stats", "--json", queue=False, env={**env, "ECHOMQ_QUEUE": "emb"})
    assert json.loads(via_env.stdout)["queue"] == "emb"
