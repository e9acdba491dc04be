"""``echomq server`` refuses a data directory other users may write, in one line (issue 14)."""

from __future__ import annotations

from pathlib import Path

from cli.clitools import RunCli, one_line_error


def test_a_shared_data_dir_is_refused_in_one_line(cli: RunCli, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    for command in (("server", "start"), ("server", "stop"), ("stats",)):
        args = command if command[0] == "server" else (*command, "--queue", "q")
        line = one_line_error(cli(*args, queue=False, env={"ECHOMQ_HOME": str(shared)}))
        assert f"refusing to use {shared} as the echomq data dir" in line, line
        assert "group or others may write to it (mode 0777)" in line
    assert list(shared.iterdir()) == []  # nothing written there
