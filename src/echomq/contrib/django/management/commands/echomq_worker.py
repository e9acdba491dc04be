"""``manage.py echomq_worker MODULE:HANDLERS [--relay] [echomq worker options]``: a
worker inside the Django project (docs/django.md).

The arguments are ``echomq worker``'s (``--concurrency``, ``--queue``, …);
``--url`` defaults to ``settings.ECHOMQ['URL']``. With ``--relay`` the
outbox relay runs on a thread of the same process while the worker runs.
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from echomq.contrib.django.outbox import echomq_settings, outbox_for


class Command(BaseCommand):
    help = "Run an echomq worker (echomq worker's options); --relay also runs the outbox relay."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--relay", action="store_true", help="Also run the outbox relay.")
        parser.add_argument("worker_args", nargs="*", help="echomq worker's arguments")

    def run_from_argv(self, argv: list[str]) -> None:
        # everything after the command name but --relay goes to echomq worker as is
        self._relay = "--relay" in argv[2:]
        self._worker_args = [a for a in argv[2:] if a != "--relay"]
        self.execute()

    def execute(self, *args: Any, **options: Any) -> None:
        self.handle()

    def handle(self, *args: Any, **options: Any) -> None:
        from echomq.cli.worker import worker

        configured = echomq_settings()
        argv = list(getattr(self, "_worker_args", options.get("worker_args", [])))
        url = configured.get("URL")
        if url and "--url" not in argv:
            argv += ["--url", url]
        stop = threading.Event()
        thread = None
        if getattr(self, "_relay", options.get("relay", False)):
            from echomq.outbox import Relay

            relay = Relay(
                outbox_for(), url, queues=configured.get("QUEUES"), poll=configured.get("POLL")
            )
            thread = threading.Thread(
                target=relay.run, args=(stop,), name="echomq-relay", daemon=True
            )
            thread.start()
        try:
            worker.main(args=argv, prog_name="manage.py echomq_worker")
        finally:
            stop.set()
            if thread is not None:
                thread.join(10)
