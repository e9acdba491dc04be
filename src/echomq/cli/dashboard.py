"""``echomq dashboard``: serve the web dashboard (echomq.web) with uvicorn.

Bound to 127.0.0.1 by default, and then answering only to loopback host
names (a DNS-rebound name is refused). Read-only unless a token is given:
``--token-file`` (a file only its owner can read), else ``--token`` or
``ECHOMQ_DASHBOARD_TOKEN``. The token is never printed: ``--token`` sits in
the process's command line, which every local user can read (``ps``), and the
environment variable is readable by the user's own processes and root.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import stat
from pathlib import Path

import click
from click.core import ParameterSource

from echomq import urls
from echomq.cli.common import CONTEXT_SETTINGS, fail, open_queue, url_option
from echomq.web import LOOPBACK_HOSTS, TOKEN_ENV

#: where a --token given in argv comes from (click's parameter source)
COMMAND_LINE = ParameterSource.COMMANDLINE
#: seconds a stopping dashboard waits for open requests (an event stream never ends by itself).
SHUTDOWN_GRACE = 2


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_port_free(host: str, port: int) -> None:
    """Fail in one line now rather than with a uvicorn traceback later."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host.strip("[]"), port))
        except OSError as exc:
            fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")


def read_token_file(path: Path) -> str:
    """The token in ``path`` (first line, spaces stripped); a one-line error if the
    file is unreadable, empty, or readable or writable by other users."""
    try:
        with path.open("rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            raw = f.read(4096)
    except OSError as exc:
        fail(f"cannot read the token file {path}: {exc.strerror or exc}")
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        fail(
            f"the token file {path} is open to other users (mode {stat.S_IMODE(mode):04o}); "
            f"make it private: chmod 600 {path}"
        )
    lines = raw.decode("utf-8", errors="replace").splitlines()
    token = lines[0].strip() if lines else ""
    if not token:
        fail(f"the token file {path} is empty; put the token on its first line")
    return token


@click.command(context_settings=CONTEXT_SETTINGS)
@url_option
@click.option(
    "--queue",
    "-q",
    "queues",
    multiple=True,
    metavar="NAME",
    help="Show only this queue (repeatable); default: every queue on the server.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=8080,
    show_default=True,
    type=click.IntRange(1, 65535),
    help="Port to listen on.",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="PATH",
    help="Read the action token from this file (mode 600); the safe way to give it.",
)
@click.option(
    "--token",
    envvar=TOKEN_ENV,
    show_envvar=True,
    metavar="TOKEN",
    help="Enables actions (retry, purge, weight, pause) for requests carrying it. "
    "Visible to other local users in the command line (ps): prefer --token-file.",
)
@click.option(
    "--interval",
    default=2.0,
    show_default=True,
    type=click.FloatRange(0.2, 60),
    help="Seconds between throughput samples (and page refreshes while a page's "
    "live event stream is down; with it up, events drive the page).",
)
def dashboard(
    url: str | None,
    queues: tuple[str, ...],
    host: str,
    port: int,
    token_file: Path | None,
    token: str | None,
    interval: float,
) -> None:
    """Serve the web dashboard: queues, lanes, tiers, dead letters, /metrics.

    \b
    Examples:
      echomq dashboard
      (umask 077; openssl rand -hex 16 > ~/.echomq-token)
      echomq dashboard --token-file ~/.echomq-token --port 9000
      curl -s http://127.0.0.1:8080/metrics
    """
    if token_file is not None:
        if token:
            fail(f"give --token-file or --token/{TOKEN_ENV}, not both")
        token = read_token_file(token_file)
    elif token and click.get_current_context().get_parameter_source("token") == COMMAND_LINE:
        click.echo(
            "warning: --token is visible to every local user (ps); prefer --token-file", err=True
        )
    import uvicorn  # the web stack is imported only by this command

    from echomq.web.app import create_app

    resolved = urls.resolve_url(url)  # keeps redis+cluster:// for create_app
    with open_queue("default", resolved) as q:
        q.exists()  # an unreachable server: one line, exit 1 (EchoGroup)
    check_port_free(host, port)
    loopback = is_loopback(host)
    app = create_app(
        resolved,
        queues or None,
        token or None,
        interval=interval,
        allowed_hosts=LOOPBACK_HOSTS if loopback else None,
    )
    shown = f"[{host}]" if ":" in host else host
    base = f"http://{shown}:{port}/"
    click.echo(f"echomq dashboard on {base}  (metrics: {base}metrics)")
    if token:
        # never the token itself: terminals are logged, shared and scrolled back
        click.echo(f"actions enabled: paste the token into the page, or open {base}#token=<token>")
    else:
        click.echo(f"read-only: start with --token-file (or {TOKEN_ENV}) to enable actions")
    if not loopback:
        click.echo(
            f"warning: listening on {host}: anyone who can reach it can read the queues", err=True
        )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    uvicorn.run(
        app,
        host=host.strip("[]"),
        port=port,
        log_level="warning",
        access_log=False,
        # an open tab's event stream must not hold a stopping dashboard up
        timeout_graceful_shutdown=SHUTDOWN_GRACE,
    )
