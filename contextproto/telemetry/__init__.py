"""Traces (contract §22): OpenTelemetry GenAI spans, exported over OTLP/HTTP when configured.

One place for the whole concern: `setup` (once per process, from the standard OTEL_*
variables; off without an endpoint), `export` (the bounded, counted export queue), `spans`
(the span API every path instruments itself with) and `genai` (our messages in the
conventions' shapes). The names a caller needs are here.
"""

from opentelemetry.trace import Span

from contextproto.telemetry.setup import (
    capture_content,
    configure,
    configure_from_settings,
    enabled,
    flush,
    shutdown,
)
from contextproto.telemetry.spans import (
    SessionFacts,
    agent_span,
    annotate_current,
    chat_content,
    chat_result,
    chat_span,
    continued_context,
    current_span,
    fail,
    http_response,
    job_span,
    record_view,
    request_span,
    tool_content,
    tool_result,
    tool_span,
    usage_attributes,
    view_attributes,
    within,
)

__all__ = [
    "SessionFacts",
    "Span",
    "agent_span",
    "annotate_current",
    "capture_content",
    "chat_content",
    "chat_result",
    "chat_span",
    "configure",
    "configure_from_settings",
    "continued_context",
    "current_span",
    "enabled",
    "fail",
    "flush",
    "http_response",
    "job_span",
    "record_view",
    "request_span",
    "shutdown",
    "tool_content",
    "tool_result",
    "tool_span",
    "usage_attributes",
    "view_attributes",
    "within",
]
