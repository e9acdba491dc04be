"""What Queue and SyncQueue share: the constructor, the options and the engine.

The two classes differ only in how they send a call (await or not); every
option is declared once, here.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from echomq import replication
from echomq.engine import Engine
from echomq.options import Backoff, Ordering, QueueOptions

ClientT = TypeVar("ClientT")


class QueueShell(Generic[ClientT]):
    """A named queue's settings and engine; subclasses add the I/O."""

    def __init__(
        self,
        name: str,
        url: str | None = None,
        *,
        ordering: Ordering = "composite",
        client: ClientT | None = None,
        durable: bool = False,
        durable_timeout: float = replication.DEFAULT_TIMEOUT,
        max_stalls: int = 1,
        max_attempts: int = 3,
        backoff: Backoff | None = None,
        keep_completed: int = 1000,
        keep_completed_age: float = 86_400.0,
        keep_dead: int = 10_000,
        keep_dead_age: float = 7 * 86_400.0,
        max_payload: int = 512 * 1024,
    ) -> None:
        options = QueueOptions(
            ordering=ordering,
            max_stalls=max_stalls,
            max_attempts=max_attempts,
            backoff=backoff or Backoff(),
            keep_completed=keep_completed,
            keep_completed_age=keep_completed_age,
            keep_dead=keep_dead,
            keep_dead_age=keep_dead_age,
            max_payload=max_payload,
        )
        self.engine = Engine(name, options)
        self.name = name
        self.url = url
        self.durable = durable
        self.durable_timeout = replication.check_timeout(durable_timeout)
        self._client = client
        self._owns_client = client is None

    @property
    def options(self) -> QueueOptions:
        return self.engine.options

    @property
    def owns_client(self) -> bool:
        """True if the queue made its client from ``url`` (no ``client=`` was passed)."""
        return self._owns_client
