"""OpenTelemetry tracing shared by every service.

Trace context always flows (ids appear in logs, events and API responses), so one trace id spans
gateway → redactor → orchestrator → gateway. Spans are exported only when an operator sets
``OTEL_TRACES_EXPORTER`` (``otlp`` or ``console``); the exporter then reads the standard
``OTEL_EXPORTER_OTLP_*`` variables itself. The default exports nothing.
"""

from __future__ import annotations

from typing import Literal

from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

Exporter = Literal["none", "otlp", "console"]


class TracingSettings(BaseSettings):
    """The subset of the standard OTEL_* variables Deskpilot itself acts on."""

    model_config = SettingsConfigDict(env_prefix="OTEL_", env_ignore_empty=True, extra="ignore")

    traces_exporter: Exporter = Field("none", description="none, otlp or console.")
    sdk_disabled: bool = Field(False, description="true turns tracing off entirely.")


_provider: TracerProvider | None = None


def setup_tracing(service: str, node: str) -> trace.TracerProvider:
    """Install the process-wide tracer provider once and return it."""
    global _provider
    if _provider is not None:
        return _provider
    settings = TracingSettings()
    provider = TracerProvider(
        resource=Resource.create({"service.name": service, "service.instance.id": node})
    )
    exporter: SpanExporter | None = None
    if settings.sdk_disabled:
        exporter = None
    elif settings.traces_exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    elif settings.traces_exporter == "console":
        exporter = ConsoleSpanExporter()
    if exporter is not None:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    _provider = provider
    return provider


def shutdown_tracing() -> None:
    if _provider is not None:
        _provider.shutdown()


def current_trace_id() -> str | None:
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


def current_traceparent() -> tuple[str | None, str | None]:
    """The W3C traceparent/tracestate of the active span, for an event's envelope."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get("traceparent"), carrier.get("tracestate")


def context_from_traceparent(traceparent: str | None, tracestate: str | None = None) -> object:
    """An OpenTelemetry context whose parent is the given W3C trace context."""
    carrier = {k: v for k, v in (("traceparent", traceparent), ("tracestate", tracestate)) if v}
    return propagate.extract(carrier)
