"""Recording completions in batches: one ``completeMany`` call for many jobs.

Sending one script call per finished job makes the client's per-command cost
(packing 20-odd arguments, a round trip) the worker's bottleneck. The
completions are coalesced (echomq.flows.coalescing, as concurrent adds are):
the first is sent at once, and every completion that arrives while a call is
in flight goes into the next call together: no added latency for a lone job,
one round trip per batch under load. Each job keeps its own outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from echomq.errors import LeaseLost
from echomq.flows.coalescing import Coalescer
from echomq.job import Job, encode_payload
from echomq.queue import Queue

#: most completions in one call, so no script runs long.
MAX_BATCH = 500

_Completion = tuple[Job, str]  # the job, its result as JSON text


class CompletionBatcher:
    """``await complete(job, result)`` behaves like ``queue.complete`` but shares round trips."""

    def __init__(self, queue: Queue) -> None:
        self._queue = queue
        self._calls = Coalescer[_Completion, None](
            self._send, max_batch=MAX_BATCH, name="echomq-completions"
        )

    async def complete(self, job: Job, result: Any) -> None:
        """Record ``result``; raises LeaseLost, JobNotFound, PayloadError or a transient error."""
        # encoded here, once, so one bad result cannot fail the whole batch
        text = encode_payload(result, what="result", limit=self._queue.options.max_payload)
        await self._calls.submit((job, text))

    async def close(self) -> None:
        """Wait for completions already handed over to be sent."""
        await self._calls.close()

    async def _send(self, batch: list[_Completion]) -> list[BaseException | None]:
        outcomes: list[BaseException | None] = [
            LeaseLost(f"job {job.id}: complete refused, lease released")
            if job.lease_token is None  # released at shutdown meanwhile
            else None
            for job, _ in batch
        ]
        held = [i for i, outcome in enumerate(outcomes) if outcome is None]
        if not held:
            return outcomes
        errors: Sequence[BaseException | None]
        try:
            errors = await self._queue.complete_many([batch[i] for i in held], encoded=True)
        except Exception as exc:  # the whole call failed: each held job sees it (and may retry)
            errors = [exc] * len(held)
        for i, error in zip(held, errors, strict=True):
            outcomes[i] = error
        return outcomes
