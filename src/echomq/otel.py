"""Tracing with OpenTelemetry (``pip install 'echomq[otel]'``).

- :func:`instrument` makes every task enqueue carry the caller's trace
  context in the job's headers (``traceparent``, W3C), a few dozen bytes.
- :class:`TracingMiddleware`, given to a worker
  (``Worker(q, tasks, middleware=[TracingMiddleware()])``), runs each job
  inside a CONSUMER span ``echomq run <name>``, a child of the producer's
  span and linked to it, with the job's id, queue and attempt as attributes;
  an exception is recorded on the span and marks it as an error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode, TracerProvider

from echomq.job import Job
from echomq.tasks import header_sources

TRACER_NAME = "echomq"


def inject() -> dict[str, str]:
    """The current trace context as job headers (empty outside a span)."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


def instrument() -> None:
    """Make every task enqueue carry the current trace context (idempotent)."""
    if inject not in header_sources:
        header_sources.append(inject)


def uninstrument() -> None:
    """Undo :func:`instrument`."""
    while inject in header_sources:
        header_sources.remove(inject)


class TracingMiddleware:
    """A worker middleware: one span per run, child of and linked to the producer's."""

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        self._tracer = trace.get_tracer(TRACER_NAME, tracer_provider=tracer_provider)

    async def __call__(self, job: Job, call_next: Callable[[], Awaitable[Any]]) -> Any:
        parent = propagate.extract(job.headers or {})
        producer = trace.get_current_span(parent).get_span_context()
        links = [trace.Link(producer)] if producer.is_valid else []
        with self._tracer.start_as_current_span(
            f"echomq run {job.name}",
            context=parent,
            kind=SpanKind.CONSUMER,
            links=links,
            attributes={
                "messaging.system": "echomq",
                "messaging.message.id": job.id,
                "echomq.job.name": job.name,
                "echomq.job.attempt": job.attempts,
            },
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                return await call_next()
            except BaseException as exc:
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                raise
