"""A relay process for the outbox fault test (tests/faults/test_outbox_faults.py).

``python -m faults.outbox_relay DB_URL VALKEY_URL MARKS CHANCE``: the real
Relay, except that after an add call returned and before its rows are
deleted it kills itself with SIGKILL with probability CHANCE (one line
appended to MARKS first), so the test is sure to cover that window besides
the kills it sends from outside at random moments.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import sys
from pathlib import Path
from typing import Any

from echomq.outbox import Outbox, Relay
from echomq.outbox.relay import Outcome

BATCH = 20


class CrashingRelay(Relay):
    def __init__(self, *args: Any, marks: Path, chance: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.marks = marks
        self.chance = chance

    def _add(self, queue: str, rows: list[Any]) -> Outcome:
        outcome = super()._add(queue, rows)
        if random.random() < self.chance:
            with self.marks.open("a", encoding="utf-8") as marks:
                marks.write(f"{os.getpid()} {queue} {len(rows)}\n")
            os.kill(os.getpid(), signal.SIGKILL)
        return outcome


def main() -> None:
    db, url, marks, chance = sys.argv[1:5]
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    relay = CrashingRelay(
        Outbox(db), url, batch=BATCH, poll=0.5, marks=Path(marks), chance=float(chance)
    )
    relay.run()


if __name__ == "__main__":
    main()
