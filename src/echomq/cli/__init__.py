"""The ``echomq`` command line: one module per command group, wired up here.

Exit status: 0 success, 1 a user error reported in one line (unreachable
server, unknown id, bad weight, bad JSON, …), 2 a usage error. Shell
completion comes from click: ``eval "$(_ECHOMQ_COMPLETE=bash_source echomq)"``
(``zsh_source`` and ``fish_source`` for those shells).
"""

from __future__ import annotations

import click

from echomq import __version__
from echomq.cli import dashboard, dead, demo, jobs, server, stats, worker
from echomq.cli.common import CONTEXT_SETTINGS, EchoGroup
from echomq.cli.score import score

__all__ = ["cli", "main"]


@click.group(cls=EchoGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "-V", "--version", prog_name="echomq")
def cli() -> None:
    """echomq: a job queue on Valkey/Redis with exact priority order and weighted fair lanes.

    With no --url and no ECHOMQ_URL, every command uses the embedded Valkey
    (started on first use, shared by all your echomq processes).

    \b
    Examples:
      echomq demo
      echomq add send --data '{"to": 42}' --group acme --priority 1
      echomq worker myapp.tasks:handlers --concurrency 20
      echomq stats --watch
      echomq score encode 2 7

    \b
    Shell completion (bash; use zsh_source or fish_source for those shells):
      eval "$(_ECHOMQ_COMPLETE=bash_source echomq)"
    """


for command in (
    demo.demo,
    worker.worker,
    jobs.add,
    jobs.inspect,
    stats.stats,
    stats.lanes,
    stats.weight,
    score,
    dead.dead,
    server.server,
    dashboard.dashboard,
):
    cli.add_command(command)


def main() -> None:
    """Entry point of the ``echomq`` script."""
    cli(prog_name="echomq")
