"""Prometheus metrics at /metrics (prometheus_client): counters in code, gauges at scrape.

Not public: the endpoint answers only `Authorization: Bearer <METRICS_TOKEN>` and does not
exist (404) while METRICS_TOKEN is unset. With several server processes set
PROMETHEUS_MULTIPROC_DIR (prometheus_client's multiprocess mode) so a scrape sees them all.
"""

from __future__ import annotations

import hmac
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from decimal import Decimal
from functools import wraps
from typing import Any, TypeVar

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.registry import REGISTRY, Collector

from contextproto.errors import error_body
from contextproto.usage import TokenUsage

logger = logging.getLogger(__name__)

DISPATCHES = Counter(
    "contextproto_dispatches_total",
    "Protocol tool dispatches (not replays) by tool and outcome (ok or the error code).",
    ["tool", "outcome"],
)
REPLAYS = Counter("contextproto_dispatch_replays_total", "Dispatches answered from a receipt.")
PROJECTION_SECONDS = Histogram(
    "contextproto_projection_seconds",
    "Time to build and store one projection snapshot.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
REQUESTS = Counter(
    "contextproto_http_requests_total", "API requests by method and status.", ["method", "status"]
)
TOKENS = Counter(
    "contextproto_model_tokens_total",
    "Model tokens of recorded turns by kind (input_uncached, cache_read, cache_write, output) "
    "and agent version.",
    ["agent_version", "kind"],
)
COST = Counter(
    "contextproto_model_cost_total",
    "Cost of recorded turns at their version's prices (the version's currency units), by "
    "agent version; turns of versions without prices add nothing.",
    ["agent_version"],
)
GATEWAY_REQUESTS = Counter(
    "contextproto_gateway_requests_total",
    "Gateway answers by client API (openai, anthropic, responses), HTTP status and error code "
    "(`ok` for a reply): refusals and unknown paths under /gateway/ included.",
    ["format", "status", "code"],
)
GATEWAY_OVERHEAD_SECONDS = Histogram(
    "contextproto_gateway_overhead_seconds",
    "Time a gateway request spends in the service outside its upstream model calls.",
    ["format"],
    buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
TRACE_SPANS_EXPORTED = Counter(
    "contextproto_trace_spans_exported_total",
    "Trace spans the OTLP collector accepted (contract §22).",
)
TRACE_SPANS_DROPPED = Counter(
    "contextproto_trace_spans_dropped_total",
    "Trace spans dropped instead of slowing a request: queue_full (the bounded export queue "
    "was full), export_failed (the collector refused, timed out or was unreachable), shutdown "
    "(still queued when the process stopped).",
    ["reason"],
)
TRACE_EXPORTS_FAILED = Counter(
    "contextproto_trace_exports_failed_total",
    "Batches of trace spans the collector did not accept (each after the exporter's retries).",
)
OTHER_VERSIONS = "other"
_labelled_versions: set[str] = set()
_labels_lock = threading.Lock()

F = TypeVar("F", bound=Callable[..., Any])


def timed(histogram: Histogram) -> Callable[[F], F]:
    """Observe the wall time of every call of the decorated function, failures included."""

    def decorate(function: F) -> F:
        @wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                histogram.observe(time.perf_counter() - started)

        return wrapper  # type: ignore[return-value]

    return decorate


def dispatch_outcome(tool: str, result: Mapping[str, Any]) -> None:
    error = result.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    DISPATCHES.labels(tool=tool, outcome="ok" if result.get("success") else str(code)).inc()


def gateway_request(
    client_format: str, status: int, code: str, overhead_seconds: float | None
) -> None:
    """Count one gateway answer and the time it spent outside its upstream calls (None for a
    request refused before it was served: its key or its body)."""
    GATEWAY_REQUESTS.labels(format=client_format, status=str(status), code=code).inc()
    if overhead_seconds is not None:
        GATEWAY_OVERHEAD_SECONDS.labels(format=client_format).observe(overhead_seconds)


def version_label(version_id: str) -> str:
    """The version's label value, or "other" once this process labels the maximum of them.

    Versions grow with configuration, not traffic, but nothing bounds them: the cap
    (METRICS_AGENT_VERSION_LABELS) keeps a scrape's series bounded; sums stay exact.
    """
    with _labels_lock:
        if version_id in _labelled_versions:
            return version_id
        if len(_labelled_versions) >= settings.METRICS_AGENT_VERSION_LABELS:
            return OTHER_VERSIONS
        _labelled_versions.add(version_id)
        return version_id


def usage_recorded(version_id: str, tokens: TokenUsage, cost: Decimal | None) -> None:
    """Count one turn's tokens by kind and its cost (called after the usage is committed)."""
    label = version_label(version_id)
    for kind, count in (
        ("input_uncached", tokens.uncached_input_tokens),
        ("cache_read", tokens.cache_read_input_tokens),
        ("cache_write", tokens.cache_write_input_tokens),
        ("output", tokens.output_tokens),
    ):
        TOKENS.labels(agent_version=label, kind=kind).inc(count)
    if cost is not None:
        COST.labels(agent_version=label).inc(float(cost))


# Collectors read at scrape time, added by the apps that own their data (sessions_app's
# AppConfig.ready adds the maintenance and queue gauges): the project package reads no app.
SCRAPE_COLLECTORS: list[Callable[[], Collector]] = []


def register_scrape_collector(factory: Callable[[], Collector]) -> None:
    """Add a collector built afresh for every scrape (idempotent per factory)."""
    if factory not in SCRAPE_COLLECTORS:
        SCRAPE_COLLECTORS.append(factory)


def metrics_view(request: HttpRequest) -> HttpResponse:
    token = settings.METRICS_TOKEN
    if not token:
        return JsonResponse(error_body("not_found", "Not found.", 404), status=404)
    sent = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
    if not hmac.compare_digest(sent.encode(), token.encode()):
        response = JsonResponse(
            error_body("not_authenticated", "Send 'Authorization: Bearer <METRICS_TOKEN>'.", 401),
            status=401,
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    scrape = CollectorRegistry()
    for factory in SCRAPE_COLLECTORS:
        scrape.register(factory())
    body = generate_latest(registry) + generate_latest(scrape)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
