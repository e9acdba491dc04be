"""The ``echomq`` command line: one module per command group, wired up here.

Exit status: 0 success, 1 a user error reported in one line (unreachable
server, unknown id, bad weight, bad JSON, …), 2 a usage error. Shell
completion comes from click: ``eval "$(_ECHOMQ_COMPLETE=bash_source echomq)"``
(``zsh_source`` and ``fish_source`` for those shells).

Each command's module is imported only when that command runs (or when
``--help`` lists them all): ``echomq stats`` never imports the dashboard's web
stack or the demo, which keeps a short command quick to start.
"""

from __future__ import annotations

import importlib

import click

from echomq import __version__
from echomq.cli.common import CONTEXT_SETTINGS, EchoGroup

__all__ = ["COMMANDS", "cli", "main"]

#: command name → ``module:attribute`` of its click command, in help order.
COMMANDS: dict[str, str] = {
    "demo": "echomq.cli.demo:demo",
    "worker": "echomq.cli.worker:worker",
    "add": "echomq.cli.jobs:add",
    "inspect": "echomq.cli.jobs:inspect",
    "position": "echomq.cli.position:position",
    "remove": "echomq.cli.jobs:remove",
    "find": "echomq.cli.find:find",
    "logs": "echomq.cli.observe:logs",
    "workers": "echomq.cli.observe:workers",
    "metrics": "echomq.cli.observe:metrics",
    "queues": "echomq.cli.queues:queues",
    "stats": "echomq.cli.stats:stats",
    "events": "echomq.cli.events:events",
    "lanes": "echomq.cli.stats:lanes",
    "weight": "echomq.cli.stats:weight",
    "lane": "echomq.cli.lane:lane",
    "pause": "echomq.cli.queues:pause",
    "resume": "echomq.cli.queues:resume",
    "drop": "echomq.cli.drop:drop",
    "config": "echomq.cli.config:config",
    "score": "echomq.cli.score:score",
    "dead": "echomq.cli.dead:dead",
    "schedules": "echomq.cli.schedules:schedules",
    "batch": "echomq.cli.batches:batch",
    "server": "echomq.cli.server:server",
    "dashboard": "echomq.cli.dashboard:dashboard",
    "relay": "echomq.cli.relay:relay",
}


class LazyGroup(EchoGroup):
    """The root group: commands are imported by name, on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, _, attribute = target.partition(":")
        command = getattr(importlib.import_module(module_name), attribute)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "-V", "--version", prog_name="echomq")
def cli() -> None:
    """echomq: a job queue on Valkey/Redis with exact priority order and weighted fair lanes.

    With no --url and no ECHOMQ_URL, every command uses the embedded Valkey
    (started on first use, shared by all your echomq processes; `echomq
    server stop` stops it). Commands act on the queue named by -q, else
    ECHOMQ_QUEUE, else "default"; `echomq queues` lists them all.

    \b
    Examples:
      echomq demo
      echomq add send --data '{"to": 42}' --group acme --priority 1
      echomq worker myapp.tasks:handlers --concurrency 20
      echomq queues
      echomq stats --watch
      echomq events --follow
      echomq score encode 2 7

    \b
    Shell completion (bash; use zsh_source or fish_source for those shells):
      eval "$(_ECHOMQ_COMPLETE=bash_source echomq)"
    """


def main() -> None:
    """Entry point of the ``echomq`` script."""
    cli(prog_name="echomq")
