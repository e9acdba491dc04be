"""A reference model of one batch (DESIGN §10 "Batches", docs/lifecycle.md
"Batches"), in plain Python, with no I/O: what each transition of a child does
to the batch's counts and which callbacks it makes fire.

- a child is ``waiting`` (also delayed, retry pending), ``active``,
  ``completed``, ``dead`` or ``cancelled``; a child removed before it finished
  leaves the batch (total − 1), one removed after keeps its count;
- nothing fires before the close, nothing after a cancel; then each callback
  fires once: ``death`` when some child is dead, ``complete`` when every child
  completed or died, ``success`` when every child completed (so a dead child
  revived by ``retry_dead`` that completes may make ``success`` fire later,
  never ``complete`` or ``death`` again);
- ``cancel``: children not started end ``cancelled``, running ones ``dead``;
  a batch that succeeded or failed already is not cancelled.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FINISHED = frozenset({"completed", "dead", "cancelled"})


@dataclass
class BatchModel:
    children: dict[str, str] = field(default_factory=dict)  # id → state
    closed: bool = False
    cancelled: bool = False
    fired: list[str] = field(default_factory=list)  # callback kinds, in firing order
    gone: set[str] = field(default_factory=set)  # removed after they finished: counted still

    # -- transitions -----------------------------------------------------------------
    def add(self, job_id: str) -> None:
        assert not self.closed and not self.cancelled
        self.children[job_id] = "waiting"

    def move(self, job_id: str, state: str) -> None:
        self.children[job_id] = state
        self.settle()

    def remove(self, job_id: str) -> None:
        if self.children[job_id] not in FINISHED:
            del self.children[job_id]  # it leaves the batch
        else:
            self.gone.add(job_id)
        self.settle()

    def close(self) -> None:
        self.closed = True
        self.settle()

    def cancel(self) -> bool:
        """Cancel the batch; a batch that succeeded or failed already stays so (False)."""
        if self.state() in ("succeeded", "failed"):
            return False
        self.cancelled = True
        for job_id, state in self.children.items():
            if state == "waiting":
                self.children[job_id] = "cancelled"
            elif state == "active":
                self.children[job_id] = "dead"
        return True

    def claimed_cancelled(self, job_id: str) -> None:
        """A claim met a waiting child of the cancelled batch (one revived by
        retry_dead after the cancel): it is cancelled, never run."""
        assert self.cancelled and self.children[job_id] == "waiting"
        self.children[job_id] = "cancelled"

    def settle(self) -> None:
        if self.cancelled or not self.closed:
            return
        counts = self.counts()
        if counts["dead"]:
            self.fire("death")
        if counts["completed"] + counts["dead"] == len(self.children):
            self.fire("complete")
            if counts["dead"] == 0:
                self.fire("success")

    def fire(self, kind: str) -> None:
        if kind not in self.fired:
            self.fired.append(kind)

    # -- what batch_status shows ---------------------------------------------------------
    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(("waiting", "active", "completed", "dead", "cancelled"), 0)
        for state in self.children.values():
            out[state] += 1
        return out

    def state(self) -> str:
        if self.cancelled:
            return "cancelled"
        if not self.closed:
            return "open"
        counts = self.counts()
        if counts["completed"] + counts["dead"] < len(self.children):
            return "running"
        return "succeeded" if counts["dead"] == 0 else "failed"

    def in_state(self, state: str) -> list[str]:
        """The children in ``state`` that still exist."""
        return sorted(j for j, s in self.children.items() if s == state and j not in self.gone)

    def present(self) -> list[str]:
        return sorted(j for j in self.children if j not in self.gone)
