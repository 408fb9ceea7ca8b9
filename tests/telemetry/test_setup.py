"""Tracing is set up once per process from the standard OTEL_* variables, off without an
endpoint (no provider at all then), and a forked process exports from a thread of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import INVALID_SPAN

from contextproto import telemetry
from contextproto.settings import otel_traces_endpoint
from contextproto.telemetry.export import ExportQueue

ROOT = Path(__file__).resolve().parents[2]

# What a fresh process reports of its tracing after its first span helper ran.
PROBE = """
import json, os
import django
django.setup()
from opentelemetry import trace
from contextproto import telemetry
from contextproto.telemetry import setup
with telemetry.request_span("GET", "/probe", {}) as span:
    recording = span.is_recording()
print(json.dumps({
    "enabled": telemetry.enabled(),
    "provider": setup._provider is not None,
    "global": type(trace.get_tracer_provider()).__name__,
    "recording": recording,
    "capture": telemetry.capture_content(),
    "service": setup._provider.resource.attributes.get("service.name") if setup._provider else None,
}))
"""


def probe(**env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "contextproto.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_without_an_endpoint_there_is_no_provider_and_spans_record_nothing():
    found = probe()
    assert found == {
        "enabled": False,
        "provider": False,
        "global": "ProxyTracerProvider",  # the API's default: nothing of the SDK was built
        "recording": False,
        "capture": False,
        "service": None,
    }


def test_an_endpoint_sets_tracing_up_on_first_use_with_the_standard_variables():
    found = probe(
        OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9",
        OTEL_SERVICE_NAME="quotes-gateway",
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true",
    )
    assert found == {
        "enabled": True,
        "provider": True,
        "global": "TracerProvider",  # global, so the MCP SDK's spans join our traces
        "recording": True,
        "capture": True,
        "service": "quotes-gateway",
    }
    assert probe(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://127.0.0.1:9/v1/traces")["service"] == (
        "contextproto"
    )


@pytest.mark.parametrize(
    ("env", "endpoint"),
    [
        ({}, ""),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, "http://c:4318"),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:4318/v1/traces",
            },
            "http://t:4318/v1/traces",
        ),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, ""),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, ""),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            },
            "http://c:4318",
        ),
    ],
)
def test_the_endpoint_comes_from_the_standard_variables(monkeypatch, env, endpoint):
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert otel_traces_endpoint() == endpoint


def test_a_grpc_endpoint_is_refused_loudly(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
    with pytest.raises(ImproperlyConfigured, match="OTLP/HTTP only"):
        otel_traces_endpoint()


def test_tracing_off_hands_out_the_non_recording_span():
    telemetry.configure(None)
    with telemetry.request_span(
        "GET", "/x", {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
    ) as span:
        assert span is INVALID_SPAN
    with telemetry.chat_span(None) as span:
        assert span is INVALID_SPAN
    assert not telemetry.enabled() and not telemetry.capture_content()


class Recorder:
    """An exporter that keeps what it is given, and says in which process it was built."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.batches: list[int] = []

    def export(self, batch):
        self.batches.append(len(batch))
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


# What Celery's prefork pool does: the warning is about the child's inherited threads, which
# is exactly what the queue's fork hook replaces.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_process_exports_from_its_own_thread_and_exporter(traces):
    built: list[Recorder] = []

    def factory() -> Recorder:
        built.append(Recorder())
        return built[-1]

    queue = ExportQueue(factory, schedule_delay=60)
    telemetry.configure(queue)
    parent_thread = queue._thread
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, then leave without running the parent's cleanup
        try:
            with telemetry.job_span("in the child"):
                pass
            flushed = telemetry.flush()
            report = {
                "exporters": [r.pid for r in built],
                "own_thread": queue._thread is not parent_thread and queue._thread.is_alive(),
                "exported": built[-1].batches,
                "flushed": flushed,
            }
            os.write(write, json.dumps(report).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        report = json.loads(pipe.read())
    os.waitpid(pid, 0)
    assert report["exporters"] == [os.getpid(), pid]  # the child built its own exporter
    assert report["own_thread"] and report["flushed"] and report["exported"] == [1]
    assert parent_thread.is_alive() and threading.current_thread() is threading.main_thread()
    assert built[-1].batches == []  # the parent's exporter saw nothing of the child's span
    telemetry.configure(None)
