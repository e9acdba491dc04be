"""echomq.otel with the OpenTelemetry SDK's in-memory exporter: the producer's trace
context rides in the job's headers, and each run is a span linked to it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from echomq import Queue
from echomq.otel import TracingMiddleware, instrument, uninstrument
from echomq.testing import drain

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrument()
    yield provider, exporter
    uninstrument()


async def test_a_run_span_is_a_child_of_and_linked_to_the_producer_span(
    echomq_queue: Queue, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    q = echomq_queue

    @q.task(name="charge", max_attempts=1)
    async def charge(cents: int) -> int:
        if cents < 0:
            raise ValueError("refund")
        return cents

    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("checkout") as producer:
        job_id = await charge.enqueue(100)
    failing = await charge.enqueue(-1)  # no span around it: no trace context
    job = await q.get(job_id)
    assert job is not None and job.headers is not None and "traceparent" in job.headers
    plain = await q.get(failing)
    assert plain is not None and plain.headers is None

    await drain(q, [charge], middleware=[TracingMiddleware(provider)], concurrency=1)
    runs = {s.attributes["messaging.message.id"]: s for s in exporter.get_finished_spans()
            if s.name == "echomq run charge" and s.attributes}  # fmt: skip
    ok, bad = runs[job_id], runs[failing]
    context = producer.get_span_context()
    assert ok.kind is SpanKind.CONSUMER
    assert ok.parent is not None and ok.parent.span_id == context.span_id
    assert ok.context is not None and ok.context.trace_id == context.trace_id
    assert [link.context.span_id for link in ok.links] == [context.span_id]
    assert ok.status.status_code is StatusCode.UNSET
    assert bad.parent is None and not bad.links
    assert bad.status.status_code is StatusCode.ERROR
    assert [e.name for e in bad.events] == ["exception"]
