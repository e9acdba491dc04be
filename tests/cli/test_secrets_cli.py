"""Passwords in server urls are never printed (issue 14, row 7)."""

from __future__ import annotations

from cli.clitools import RunCli, one_line_error

SECRET = "hunter2-9d1f"


def test_server_status_hides_the_password_of_echomq_url(cli: RunCli) -> None:
    url = f"redis://app:{SECRET}@127.0.0.1:1/0"
    done = cli("server", "status", queue=False, env={"ECHOMQ_URL": url})
    assert done.returncode == 0, done.stderr
    assert "redis://app:***@127.0.0.1:1/0" in done.stdout
    assert SECRET not in done.stdout + done.stderr


def test_errors_hide_the_password_of_the_url(cli: RunCli) -> None:
    for url in (f"ftp://app:{SECRET}@db:1/0", f"redis+cluster://app:{SECRET}@db:1/3"):
        line = one_line_error(cli("stats", url=url))
        assert "app:***@db" in line and SECRET not in line


def test_unreachable_cluster_and_unix_urls_hide_the_password(cli: RunCli) -> None:
    for url in (
        f"redis+cluster://:{SECRET}@127.0.0.1:1",
        f"unix://app:{SECRET}@/nonexistent/echomq.sock",
        f"unix:///nonexistent/echomq.sock?password={SECRET}",
        f"app:{SECRET}@127.0.0.1:1",
    ):
        done = cli("stats", url=url)
        one_line_error(done)
        assert SECRET not in done.stdout + done.stderr, url
