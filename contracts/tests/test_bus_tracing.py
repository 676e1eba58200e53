"""A delivery is one span in the trace its event carries (``traceparent``), whoever published
it and however: no span per publish, no trace context in FastStream's headers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from contracts.bus import Bus, Delivery
from contracts.events import Event, new_id
from contracts.settings import ServiceSettings
from contracts.tracing import current_trace_id, setup_tracing
from tests.support import unique_name, wait_until


class Traced(Event):
    payload: str


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = setup_tracing("bus-tracing-test", "node")
    provider.add_span_processor(SimpleSpanProcessor(exporter))  # type: ignore[attr-defined]
    try:
        yield exporter
    finally:
        exporter.shutdown()


@pytest.fixture
async def bus(redis_url: str) -> AsyncIterator[Bus]:
    made = Bus(ServiceSettings(redis_url=redis_url, graceful_timeout_s=5), "tracing-test")
    try:
        yield made
    finally:
        await made.stop()


async def test_a_delivery_is_one_span_in_the_trace_its_event_carries(
    bus: Bus, spans: InMemorySpanExporter
) -> None:
    topic = unique_name("traced")
    seen: list[tuple[str, str | None]] = []

    async def handle(event: Traced, _: Delivery) -> None:
        seen.append((event.payload, current_trace_id()))

    bus.subscribe(topic, Traced, handle, group=unique_name("g"))
    await bus.start()
    with trace.get_tracer("test").start_as_current_span("publisher") as publisher:
        await bus.publish(
            topic, Traced(correlation_id=new_id(), conversation_id=new_id(), payload="a")
        )
    # An event whose trace context was set where it began (a replayed dead letter, another
    # process's event), published outside any span: delivered in that trace.
    carried = Traced(
        correlation_id=new_id(),
        conversation_id=new_id(),
        payload="b",
        traceparent=f"00-{'ab' * 16}-{'cd' * 8}-01",
    )
    await bus.publish(topic, carried)
    await wait_until(lambda: len(seen) == 2)

    assert seen == [("a", format(publisher.get_span_context().trace_id, "032x")), ("b", "ab" * 16)]
    mine = [span for span in spans.get_finished_spans() if topic in span.name]
    assert [span.name for span in mine] == [f"{topic} process"] * 2
    assert mine[0].parent is not None
    assert mine[0].parent.span_id == publisher.get_span_context().span_id
    assert mine[1].parent is not None
    assert mine[1].parent.span_id == int("cd" * 8, 16)
