"""Slots shared by the queues of one worker (``Worker([q1, q2], weights=…)``).

Each queue is guaranteed its share of ``concurrency`` (split by weight, at
least one slot each), and slots a queue leaves unused are lent to the others:

- a queue claims up to its own share, plus the unused share of every queue
  that has no backlog (its last claim came back short);
- a queue without backlog keeps one slot in reserve while it waits on its
  doorbell (what its wake-up claim may take), so an idle queue costs the
  busy ones one slot;
- once it has work again its share is its own: it stops lending, and gets
  the borrowed slots back as the borrowers' handlers finish (running
  handlers are never interrupted).

So under full load every queue runs its weighted share, and a slot idles
only while no queue has work for it. A worker with one queue uses none of this.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence, Sized
from typing import Protocol


class Holder(Protocol):
    """What the pool reads of one queue's session."""

    @property
    def handling(self) -> int:
        """Handlers running."""
        ...

    @property
    def reserved(self) -> int:
        """Slots a claim in flight may fill."""
        ...

    @property
    def executions(self) -> Sized:
        """Jobs held, running or being recorded."""
        ...

    @property
    def slot_freed(self) -> asyncio.Event: ...

    @property
    def lends(self) -> bool:
        """True while the queue has no backlog (its last claim came back short)."""
        ...


class SlotPool:
    """``concurrency`` slots among sessions with guaranteed ``shares``."""

    def __init__(self, concurrency: int, holders: Sequence[Holder], shares: Sequence[int]) -> None:
        self.concurrency = concurrency
        self._holders = list(holders)
        self._share = {id(h): share for h, share in zip(holders, shares, strict=True)}

    def free_for(self, me: Holder) -> int:
        """How many jobs ``me`` may claim now (0: wait for a slot)."""
        holders = self._holders
        if sum(len(h.executions) for h in holders) >= 2 * self.concurrency:
            return 0
        taken = sum(h.handling + (h.reserved if h is not me else 0) for h in holders)
        room = self.concurrency - taken
        own = self._share[id(me)] - me.handling
        lent = sum(  # a lender keeps one slot for its wake-up claim, made or not yet
            max(0, self._share[id(h)] - h.handling - max(1, h.reserved))
            for h in holders
            if h is not me and h.lends
        )
        return max(0, min(room, own + lent))

    def notify(self) -> None:
        """A slot freed, or a queue started lending: every queue waiting for a slot
        looks again."""
        for holder in self._holders:
            holder.slot_freed.set()
