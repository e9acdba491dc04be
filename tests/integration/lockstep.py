"""What the lockstep model tests share (test_order_model.py, test_schedule_model.py):
their Hypothesis profile, the orderings each example runs under, server times
in milliseconds, and reading the ids of one kind of event as a step makes them.
(The profile's examples and seed: test_order_model.py's docstring.)
"""

from __future__ import annotations

import os
from datetime import datetime

from hypothesis import HealthCheck, settings

from echomq import SyncQueue
from echomq.events import Event
from echomq.options import Ordering

CI = bool(os.environ.get("CI")) or os.environ.get("HYPOTHESIS_PROFILE") == "ci"
settings.register_profile(
    "order-model",
    max_examples=500 if CI else 60,
    deadline=None,
    derandomize=CI,  # a fixed seed in CI, a random one locally
    print_blob=True,
    # the client fixtures are shared by all examples of a test on purpose
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
PROFILE = settings.get_profile("order-model")

#: the orderings the real-clock lockstep tests run every example under; the aged
#: one needs each call's server time, so it has tests of its own
#: (test_order_model.py section 9)
ORDERINGS: tuple[Ordering, ...] = ("composite", "mint")


def ms(moment: datetime | None) -> int:
    assert moment is not None
    return round(moment.timestamp() * 1000)


class EventIds:
    """Reads a queue's event stream on from where it last stopped (it starts at its end)."""

    def __init__(self, queue: SyncQueue) -> None:
        self.queue = queue
        self.cursor = queue.read_events(None).cursor

    def since_last(self, kind: str) -> list[str]:
        """The job ids of the ``kind`` events since the last read, in stream order."""
        return [e.job_id for e in self.events_since_last(kind) if e.job_id]

    def events_since_last(self, kind: str) -> list[Event]:
        """The ``kind`` events since the last read, in stream order."""
        found: list[Event] = []
        while True:
            page = self.queue.read_events(self.cursor)
            assert page.missed == 0
            self.cursor = page.cursor
            found += [e for e in page.events if e.kind == kind]
            if not page.events:
                return found
