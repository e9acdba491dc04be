"""Which queues a server holds: the one queue discovery, for the CLI and the dashboard.

Which queues exist is read from the server, never kept in a registry: every
queue that ever held a job has a meta hash ``emq:{Q}:meta`` (echomq.keys), so
a SCAN for that pattern lists them. A :class:`QueueWalk` is such a SCAN done
one bounded call at a time, on every primary of a cluster one after the other,
that can stop after a number of calls and go on later where it stopped:

- ``echomq queues`` (and the CLI's "which queue holds this job") walks once,
  to the end or to its bounds (:func:`list_queues`, blocking);
- the dashboard walks a bounded round every few seconds (:func:`walk_async`),
  a queue once found staying listed until a full pass no longer finds it
  (echomq.web.registry).

The walk reaches the server through the queue it is given (its client, shared
with the queues it finds); this module is the only code that lists a server's
keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from echomq.keys import META_PATTERN, queue_of_meta

if TYPE_CHECKING:
    from echomq.queue import Queue
    from echomq.sync import SyncQueue

#: keys asked for per SCAN call.
STEP_KEYS = 2000
#: most SCAN calls of one blocking walk (with STEP_KEYS: about 2 million keys).
MAX_STEPS = 1000
#: most queues one blocking walk lists.
MAX_QUEUES = 1000


class QueueWalk:
    """A resumable walk over a server's queues: each step is one SCAN call of
    ``step_keys`` keys on one primary. ``found`` holds the queues seen in the
    pass under way; when a pass ends, ``last_pass`` holds every queue it found
    and the next step starts a new pass."""

    def __init__(self, step_keys: int = STEP_KEYS) -> None:
        self.step_keys = step_keys
        #: queues seen in the pass under way
        self.found: set[str] = set()
        #: every queue the last full pass found (None: no pass has ended yet)
        self.last_pass: set[str] | None = None
        #: (primary, cursor) still to walk in this pass; None: no pass under way
        self._pending: list[tuple[Any, int]] | None = None

    @property
    def in_pass(self) -> bool:
        """True while a pass is under way (its nodes are known)."""
        return self._pending is not None

    def start(self, nodes: list[Any]) -> None:
        """Begin a pass over ``nodes`` (the primaries; [None] for one server)."""
        self._pending = [(node, 0) for node in nodes]

    def next_step(self) -> tuple[Any, int]:
        """The primary and cursor of the next SCAN call."""
        assert self._pending, "start a pass first"
        return self._pending[0]

    def took(self, cursor: int, keys: list[str]) -> bool:
        """Record the reply of the call ``next_step`` named; True if it ended the pass."""
        assert self._pending, "start a pass first"
        self.found.update(name for name in map(queue_of_meta, keys) if name is not None)
        node, _ = self._pending[0]
        if cursor != 0:
            self._pending[0] = (node, cursor)
            return False
        self._pending.pop(0)
        if self._pending:
            return False
        self.last_pass, self.found, self._pending = self.found, set(), None
        return True


async def walk_async(queue: Queue, walk: QueueWalk, max_steps: int) -> bool:
    """Up to ``max_steps`` SCAN calls of ``walk`` on ``queue``'s server; True if
    they ended a pass (``walk.last_pass`` then holds every queue found)."""
    if not walk.in_pass:
        walk.start(await queue.sender.nodes())
    for _ in range(max_steps):
        node, cursor = walk.next_step()
        if walk.took(*await queue.sender.scan_page(node, cursor, META_PATTERN, walk.step_keys)):
            return True
    return False


@dataclass(frozen=True, slots=True)
class Listing:
    """The queues one bounded walk found, sorted; ``complete`` is False if it stopped short."""

    names: list[str]
    complete: bool


def list_queues(queue: SyncQueue, limit: int = MAX_QUEUES) -> Listing:
    """The names of up to ``limit`` queues on ``queue``'s server: one pass, ended
    after MAX_STEPS SCAN calls or once more than ``limit`` queues were found."""
    walk = QueueWalk()
    walk.start(queue.sender.nodes())
    for _ in range(MAX_STEPS):
        node, cursor = walk.next_step()
        if walk.took(*queue.sender.scan_page(node, cursor, META_PATTERN, walk.step_keys)):
            assert walk.last_pass is not None
            return Listing(sorted(walk.last_pass)[:limit], len(walk.last_pass) <= limit)
        if len(walk.found) > limit:
            break
    return Listing(sorted(walk.found)[:limit], False)
