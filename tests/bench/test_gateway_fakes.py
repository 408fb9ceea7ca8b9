"""The gateway section's stand-ins (bench/fake_upstream.py, bench/otlp_sink.py) and its stream
measurement (bench/gateway_stream.py): what the figures rest on.

The fake must be what the clients it stands behind accept (the official SDK's Chat
Completions and Responses stream helpers, which refuse events out of order), stream its
pieces over time rather than at once, and stamp them on the clock the client reads; the sink
must accept what the OTLP exporter sends and count its spans.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import fake_upstream  # noqa: E402  (bench/ is a script directory, not a package)
import gateway_stream  # noqa: E402
import otlp_sink  # noqa: E402
from gateway_setup import Client, chat_text, responses_text  # noqa: E402

CHUNKS, SECONDS = 5, 0.25


@contextmanager
def _served(server: Any) -> Iterator[str]:
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@contextmanager
def fake(delay: float = 0.01) -> Iterator[str]:
    handler = fake_upstream.handler(fake_upstream.Fake(delay, CHUNKS, SECONDS))
    with _served(fake_upstream.Server(("127.0.0.1", 0), handler)) as base:
        yield base


def _sdk(base: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)


def _marks(base: str) -> dict[str, list[float]]:
    _status, _headers, raw = Client(base).request("GET", "/stream-marks")
    return json.loads(raw)


def test_the_fake_answers_a_protocol_call_then_text_as_the_sdk_reads_it() -> None:
    with fake() as base:
        client = _sdk(base)
        plain = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
        assert plain.choices[0].message.content == "OK."
        asked = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "note it [protocol:7]"}]
        )
        call = asked.choices[0].message.tool_calls[0]
        assert call.function.name == "context_task_memory_set"
        answered = client.chat.completions.create(
            model="m",
            messages=[
                {"role": "user", "content": "note it [protocol:7]"},
                {"role": "assistant", "tool_calls": [call.model_dump()]},
                {"role": "tool", "tool_call_id": call.id, "content": "ok"},
            ],
        )
        assert answered.choices[0].message.content == "Noted."
        response = client.responses.create(model="m", input="hi")
        assert response.output_text == "OK."


def test_a_chat_stream_arrives_piece_by_piece_and_is_stamped() -> None:
    with fake() as base:
        started = time.monotonic()
        stream = _sdk(base).chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "go [stream:one]"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        arrivals, text, usage = [], "", None
        for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            if chunk.choices and chunk.choices[0].delta.content:
                arrivals.append(time.monotonic())
                text += chunk.choices[0].delta.content
        first, last = _marks(base)["one"]
    assert text == gateway_stream_text()
    assert usage is not None and usage.total_tokens == fake_upstream.USAGE["total_tokens"]
    assert len(arrivals) == CHUNKS
    # Spread over the stream's time, not sent at once; each piece read after it was written.
    assert arrivals[-1] - arrivals[0] >= SECONDS * (CHUNKS - 1) / CHUNKS * 0.8
    assert started < first <= arrivals[0] and last <= arrivals[-1]
    assert first - started >= SECONDS / CHUNKS * 0.8


def gateway_stream_text() -> str:
    return "".join(f"piece{k} " for k in range(CHUNKS))


def test_a_responses_stream_satisfies_the_sdk_helper() -> None:
    with fake() as base:
        with _sdk(base).responses.stream(model="m", input="go [stream:two]") as stream:
            deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
            final = stream.get_final_response()
        assert "two" in _marks(base)
    assert final.output_text == gateway_stream_text() == "".join(deltas)
    assert len(deltas) == CHUNKS


def test_the_bench_client_reads_a_stream_as_it_comes() -> None:
    with fake() as base:
        client = Client(base)
        chat = client.stream(
            "/v1/chat/completions",
            {"model": "m", "messages": [{"role": "user", "content": "[stream:c]"}], "stream": True},
            chat_text,
        )
        responses = client.stream(
            "/v1/responses", {"model": "m", "input": "[stream:r]", "stream": True}, responses_text
        )
        marks = _marks(base)
    for seen, mark in ((chat, "c"), (responses, "r")):
        assert seen.status == 200 and not seen.error
        assert seen.text == gateway_stream_text()
        assert seen.started < marks[mark][0] <= seen.first
        assert marks[mark][1] <= seen.last
        assert seen.last - seen.first >= SECONDS * 0.5


def test_measure_stream_compares_each_path_with_the_upstreams_stamps(monkeypatch) -> None:
    monkeypatch.setattr(gateway_stream, "STREAM_ROUNDS", 2)
    monkeypatch.setattr(gateway_stream, "STREAM_WARMUP", 1)
    monkeypatch.setattr(gateway_stream, "FULL_TEXT", gateway_stream_text())
    with fake() as base:
        client = Client(base)
        path = gateway_stream.StreamPath(
            "direct",
            "direct",
            lambda mark, n: client.stream(
                "/v1/chat/completions",
                {
                    "model": "m",
                    "messages": [{"role": "user", "content": f"[stream:{mark}]"}],
                    "stream": True,
                },
                chat_text,
            ),
        )
        broken = gateway_stream.StreamPath(
            "broken", "broken", lambda mark, n: client.stream("/nowhere", {}, chat_text)
        )
        rows = gateway_stream.measure_stream([path, broken], base)
    direct, failed = rows
    assert direct["requests"] == 2 and not direct["problems"]
    assert 0 <= direct["first_p50"] < 50 and 0 <= direct["last_p50"] < 50
    assert failed["requests"] == 0 and sum(failed["problems"].values()) == 3


def test_the_sink_accepts_the_otlp_exporter_and_counts_its_spans() -> None:
    counts = otlp_sink.Counts()
    server = otlp_sink.Server(("127.0.0.1", 0), otlp_sink.handler(counts))
    with _served(server) as base:
        exporter = OTLPSpanExporter(endpoint=base + "/v1/traces")
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracer = provider.get_tracer("bench-test")
        for n in range(3):
            with tracer.start_as_current_span(f"span {n}"):
                pass
        provider.shutdown()
        _status, _headers, raw = Client(base).request("GET", "/stats")
    stats = json.loads(raw)
    assert stats["spans"] == 3 and stats["requests"] == 3 and stats["bytes"] > 0
