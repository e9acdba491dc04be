"""``manage.py echomq_relay``: turn committed outbox rows into jobs (docs/django.md)."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from echomq.contrib.django.outbox import echomq_settings, outbox_for
from echomq.errors import EchoMQError
from echomq.urls import redact_url


class Command(BaseCommand):
    help = "Turn committed outbox rows into jobs, exactly once, in row order per queue."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", help="Valkey/Redis url (default: settings.ECHOMQ['URL']).")
        parser.add_argument(
            "--queue", "-q", action="append", dest="queues", help="Only this queue."
        )
        parser.add_argument("--database", help="Django database alias (default: 'default').")
        parser.add_argument(
            "--once", action="store_true", help="Relay what is committed now, exit."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from echomq.outbox import Relay

        configured = echomq_settings()
        url = options["url"] or configured.get("URL")
        try:
            outbox = outbox_for(options["database"])
            relay = Relay(
                outbox,
                url,
                queues=options["queues"] or configured.get("QUEUES"),
                poll=configured.get("POLL"),
            )
            if options["once"]:
                outbox.check_table()
                relay.relay_once()
                self.stdout.write(f"relayed {relay.relayed} row(s), {relay.dead} dead")
                return
            self.stderr.write(
                f"relaying to {redact_url(url or 'the embedded Valkey')}; Ctrl-C stops"
            )
            stop = threading.Event()
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: stop.set())
            relay.run(stop)
            self.stderr.write(f"relay stopped: {relay.relayed} row(s) relayed, {relay.dead} dead")
        except EchoMQError as exc:
            raise CommandError(redact_url(str(exc).splitlines()[0])) from None
        finally:
            if "relay" in locals():
                relay.close()
