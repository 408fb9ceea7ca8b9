"""Set tracing up once per process, from the standard OTEL_* variables; off without an endpoint.

Off (no OTEL_EXPORTER_OTLP_ENDPOINT / …_TRACES_ENDPOINT): no tracer provider is created and
every span helper hands out the API's non-recording span, so tracing costs a request one
attribute read. On: the first span of a process builds the SDK's TracerProvider (resource
from OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES, sampler from OTEL_TRACES_SAMPLER) with
the counted export queue (`export.ExportQueue`) over the OTLP/HTTP protobuf exporter (which
reads the endpoint, OTEL_EXPORTER_OTLP_HEADERS, timeout and compression itself), and makes
it the global provider, so the MCP SDK's own server spans join the same traces.

The provider is global once per process (the API allows one); `configure` swaps the export
queue behind it, which is how tests point it at an in-memory exporter or a local collector.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider

from contextproto.telemetry.export import ExportQueue

logger = logging.getLogger(__name__)

INSTRUMENTATION = "contextproto"
DEFAULT_SERVICE_NAME = "contextproto"


@dataclass
class _State:
    """This process's tracing: None until set up (`pid` says in which process it was)."""

    pid: int | None = None
    tracer: trace.Tracer | None = None
    queue: SpanProcessor | None = None
    capture_content: bool = False


_state = _State()
_setup_lock = threading.Lock()
_provider: TracerProvider | None = None


class _Current(SpanProcessor):
    """The global provider's one processor: hands spans to the queue configured now."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        queue = _state.queue
        if queue is not None:
            queue.on_end(span)

    def shutdown(self) -> None:
        queue = _state.queue
        if queue is not None:
            queue.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        queue = _state.queue
        return queue.force_flush(timeout_millis) if queue is not None else True


def _env_number(name: str, default: float) -> float:
    raw = os.environ.get(name, "")
    try:
        return float(raw) if raw else default
    except ValueError:
        logger.warning("%s=%r is not a number; using %s", name, raw, default)
        return default


def otlp_queue(endpoint: str | None = None) -> ExportQueue:
    """The export queue over an OTLP/HTTP exporter (the endpoint from OTEL_* unless given),
    sized by OTEL_BSP_MAX_QUEUE_SIZE, OTEL_BSP_MAX_EXPORT_BATCH_SIZE, OTEL_BSP_SCHEDULE_DELAY."""
    # A base endpoint from OTEL_EXPORTER_OTLP_ENDPOINT gets /v1/traces from the exporter
    # itself; an explicit one is the full signal URL, as the exporter expects.
    return ExportQueue(
        lambda: OTLPSpanExporter(endpoint=endpoint),
        max_queue_size=int(_env_number("OTEL_BSP_MAX_QUEUE_SIZE", 2048)),
        max_batch=int(_env_number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)),
        schedule_delay=_env_number("OTEL_BSP_SCHEDULE_DELAY", 5000) / 1000,
    )


def _resource() -> Resource:
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    return resource


def _global_provider() -> TracerProvider:
    """The process's provider, made global the first time (the API allows one per process)."""
    global _provider
    if _provider is None:
        _provider = TracerProvider(resource=_resource(), shutdown_on_exit=False)
        _provider.add_span_processor(_Current())
        trace.set_tracer_provider(_provider)
        atexit.register(shutdown)
    return _provider


def configure(
    queue: SpanProcessor | Callable[[], SpanProcessor] | None,
    *,
    capture_content: bool = False,
) -> None:
    """Send this process's spans to `queue` (None: tracing off), replacing any earlier one.

    `queue` is a span processor (an `ExportQueue`, or the SDK's SimpleSpanProcessor over an
    in-memory exporter in tests) or a callable building one. `capture_content`: message
    contents on the GenAI spans (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT).
    """
    with _setup_lock:
        old = _state.queue
        built = queue() if callable(queue) and not isinstance(queue, SpanProcessor) else queue
        _state.queue = built
        _state.capture_content = capture_content
        _state.tracer = (
            _global_provider().get_tracer(INSTRUMENTATION) if built is not None else None
        )
        _state.pid = os.getpid()
    if old is not None and old is not built:
        old.shutdown()


def configure_from_settings() -> None:
    """Tracing as the environment says (settings.OTEL_*): the OTLP queue, or off."""
    if settings.OTEL_TRACES_ENDPOINT:
        configure(otlp_queue, capture_content=settings.OTEL_CAPTURE_MESSAGE_CONTENT)
    else:
        configure(None)


def tracer() -> trace.Tracer | None:
    """This process's tracer, set up on first use (and again in a forked child); None when off.

    A forked child keeps the parent's provider and queue; the queue restarts its own thread
    and exporter there (`ExportQueue`), so only the pid is noted.
    """
    if _state.pid != os.getpid():
        with _setup_lock:
            first = _state.pid is None
            _state.pid = os.getpid()
        if first:
            configure_from_settings()
    return _state.tracer


def enabled() -> bool:
    """Whether spans are recorded in this process (cheap: check before costly attributes)."""
    return tracer() is not None


def capture_content() -> bool:
    """Whether message contents go on the GenAI spans (opted in; never keys)."""
    return _state.capture_content and _state.tracer is not None


def flush() -> bool:
    """Export what is queued now (tests; the end of a short-lived process)."""
    queue = _state.queue
    return queue.force_flush() if queue is not None else True


def shutdown() -> None:
    """Stop exporting (the process exits): what is queued gets a short, bounded chance."""
    with _setup_lock:
        queue, _state.queue, _state.tracer = _state.queue, None, None
    if queue is not None:
        queue.shutdown()
