"""Recording completions in batches: one ``completeMany`` call for many jobs.

Sending one script call per finished job makes the client's per-command cost
(packing 20-odd arguments, a round trip) the worker's bottleneck. The batcher
sends the first completion at once, and every completion that arrives while
a call is in flight goes into the next call together: no added latency for a
lone job, one round trip per batch under load.
"""

from __future__ import annotations

import asyncio
from typing import Any

from echomq.errors import LeaseLost
from echomq.job import Job, encode_payload
from echomq.queue import Queue

#: most completions in one call, so no script runs long.
MAX_BATCH = 500

_Pending = tuple[Job, str, "asyncio.Future[None]"]  # job, result as JSON text, caller


class CompletionBatcher:
    """``await complete(job, result)`` behaves like ``queue.complete`` but shares round trips."""

    def __init__(self, queue: Queue) -> None:
        self._queue = queue
        self._pending: list[_Pending] = []
        self._sender: asyncio.Task[None] | None = None

    async def complete(self, job: Job, result: Any) -> None:
        """Record ``result``; raises LeaseLost, JobNotFound, PayloadError or a transient error."""
        # encoded here, once, so one bad result cannot fail the whole batch
        text = encode_payload(result, what="result", limit=self._queue.options.max_payload)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((job, text, future))
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send_all(), name="echomq-completions")
        await future

    async def close(self) -> None:
        """Wait for completions already handed over to be sent."""
        if self._sender is not None:
            await asyncio.gather(self._sender, return_exceptions=True)

    async def _send_all(self) -> None:
        while self._pending:
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            await self._send(batch)

    async def _send(self, batch: list[_Pending]) -> None:
        held = []
        for job, text, future in batch:
            if job.lease_token is None:  # released at shutdown meanwhile
                _settle(future, LeaseLost(f"job {job.id}: complete refused, lease released"))
            else:
                held.append((job, text, future))
        if not held:
            return
        try:
            errors = await self._queue.complete_many(
                [(job, text) for job, text, _ in held], encoded=True
            )
        except Exception as exc:  # the whole call failed: every caller sees it (and may retry)
            for _, _, future in held:
                _settle(future, exc)
            return
        for (_, _, future), error in zip(held, errors, strict=True):
            _settle(future, error)


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():  # its caller was cancelled
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
