"""``echomq dashboard``: serve the web dashboard (echomq.web) with uvicorn.

Bound to 127.0.0.1 by default, and then answering only to loopback host
names (a DNS-rebound name is refused). Read-only unless a token is given
(``--token`` or ``ECHOMQ_DASHBOARD_TOKEN``); the printed link carries the
token in its ``#fragment``, which the browser never sends to any server.
"""

from __future__ import annotations

import ipaddress
import logging
import socket

import click

from echomq import connection
from echomq.cli.common import CONTEXT_SETTINGS, fail
from echomq.web import LOOPBACK_HOSTS, TOKEN_ENV


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


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option(
    "--url",
    envvar="ECHOMQ_URL",
    show_envvar=True,
    metavar="URL",
    help="Server url (redis://, rediss://, unix://); default: the embedded Valkey.",
)
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
    "--token",
    envvar=TOKEN_ENV,
    show_envvar=True,
    metavar="TOKEN",
    help="Enables actions (retry, purge, weight, pause) for requests carrying it.",
)
@click.option(
    "--interval",
    default=2.0,
    show_default=True,
    type=click.FloatRange(0.2, 60),
    help="Seconds between samples and page refreshes.",
)
def dashboard(
    url: str | None,
    queues: tuple[str, ...],
    host: str,
    port: int,
    token: str | None,
    interval: float,
) -> None:
    """Serve the web dashboard: queues, lanes, tiers, dead letters, /metrics.

    \b
    Examples:
      echomq dashboard
      echomq dashboard --token "$(openssl rand -hex 16)" --port 9000
      curl -s http://127.0.0.1:8080/metrics
    """
    import uvicorn  # the web stack is imported only by this command

    from echomq.web.app import create_app

    resolved = connection.resolve_url(url)  # keeps redis+cluster:// for create_app
    probe = connection.sync_client(resolved)
    try:
        probe.ping()  # an unreachable server: one line, exit 1 (EchoGroup)
    finally:
        probe.close()
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
        click.echo(f"actions enabled; open {base}#token={token} or paste the token in the page")
    else:
        click.echo(f"read-only: start with --token or {TOKEN_ENV} to enable actions")
    if not loopback:
        click.echo(
            f"warning: listening on {host}: anyone who can reach it can read the queues", err=True
        )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    uvicorn.run(app, host=host.strip("[]"), port=port, log_level="warning", access_log=False)
