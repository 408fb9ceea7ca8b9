"""Part 3 of the gateway section (bench/bench_gateway.py): streaming, first text to first text.

The fake model streams STREAM_CHUNKS text pieces over STREAM_SECONDS and stamps when it wrote
each request's first and last piece (`time.monotonic()`, one clock for every process of the
machine); the client stamps when each arrived. Paths, interleaved like the overhead rounds:
direct, the LiteLLM proxy, and the gateway (uvicorn, 1 worker) for a Chat Completions and a
Responses API client, each continuing its own 1k session with its new message only.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchlib import median, p95
from gateway_overhead import round_order, user
from gateway_setup import (
    GATEWAY_PATH,
    LITELLM_MODEL,
    RESPONSES_PATH,
    STREAM_CHUNKS,
    STREAM_ROUNDS,
    STREAM_SECONDS,
    STREAM_WARMUP,
    Client,
    Process,
    Streamed,
    chat_text,
    responses_text,
)

FULL_TEXT = "".join(f"piece{k} " for k in range(STREAM_CHUNKS))  # what the fake streams


@dataclass
class StreamPath:
    key: str
    label: str
    send: Callable[[str, int], Streamed]  # (mark, round) -> what the client saw
    seen: list[tuple[str, Streamed]] = field(default_factory=list)  # (its mark, what came)
    problems: Counter = field(default_factory=Counter)


def stream_paths(
    fake: Process, litellm: Process | None, gateway: Process, prepared: dict[str, Any]
) -> list[StreamPath]:
    def chat_body(mark: str, n: int, tag: str) -> dict[str, Any]:
        return {
            "model": LITELLM_MODEL,
            "messages": [user(n, tag, f" [stream:{mark}]")],
            "stream": True,
            "stream_options": {"include_usage": True},
        }

    direct = Client(fake.base)
    paths = [
        StreamPath(
            "direct",
            "direct to the fake model",
            lambda mark, n: direct.stream(
                "/v1/chat/completions", chat_body(mark, n, "direct"), chat_text
            ),
        )
    ]
    if litellm is not None:
        proxy = Client(litellm.base, {"Authorization": f"Bearer {prepared['master_key']}"})
        paths.append(
            StreamPath(
                "litellm",
                "LiteLLM proxy, Chat Completions",
                lambda mark, n: proxy.stream(
                    "/v1/chat/completions", chat_body(mark, n, "litellm"), chat_text
                ),
            )
        )
    key = prepared["key"]

    def gateway_client(name: str) -> Client:
        session = prepared["sessions"][name].session_id
        return Client(
            gateway.base,
            {"Authorization": f"Bearer {key}", "X-Contextproto-Session": str(session)},
        )

    chat = gateway_client("gw1:stream@1k")
    responses = gateway_client("gw1:stream-responses@1k")
    paths += [
        StreamPath(
            "gw1:stream@1k",
            "gateway (1 worker), Chat Completions client",
            lambda mark, n: chat.stream(GATEWAY_PATH, chat_body(mark, n, "gateway"), chat_text),
        ),
        StreamPath(
            "gw1:stream-responses@1k",
            "gateway (1 worker), Responses API client",
            lambda mark, n: responses.stream(
                RESPONSES_PATH,
                {
                    "model": "x",
                    "input": [user(n, "gateway-responses", f" [stream:{mark}]")],
                    "stream": True,
                },
                responses_text,
            ),
        ),
    ]
    return paths


def _problem(seen: Streamed) -> str | None:
    if seen.status != 200 or seen.error:
        return f"status {seen.status}: {seen.error[:200]}"
    if not seen.text.strip().endswith(FULL_TEXT.strip()):  # earlier text may come before
        return f"text {seen.text[-60:]!r}, not the fake's {STREAM_CHUNKS} pieces"
    return None


def measure_stream(paths: list[StreamPath], fake_base: str) -> list[dict[str, Any]]:
    """STREAM_WARMUP + STREAM_ROUNDS interleaved rounds; per path (ms, p50 and p95): the
    client's first text after the fake wrote its first piece, the same for the last piece,
    and the time to the first text beyond the fake's own (one piece interval)."""
    fake_client = Client(fake_base)
    for n in range(STREAM_WARMUP + STREAM_ROUNDS):
        for path in round_order(paths, n):
            mark = f"{path.key.replace(':', '-').replace('@', '-')}-{n}"
            seen = path.send(mark, n)
            problem = _problem(seen)
            if problem:
                path.problems[problem] += 1
            elif n >= STREAM_WARMUP:
                path.seen.append((mark, seen))
    _status, _headers, raw = fake_client.request("GET", "/stream-marks")
    marks: dict[str, list[float]] = json.loads(raw or b"{}")
    interval = STREAM_SECONDS / STREAM_CHUNKS
    rows = []
    for path in paths:
        first, last, ttft = [], [], []
        for mark, seen in path.seen:
            if mark not in marks:
                path.problems["the fake has no stamp of this stream"] += 1
                continue
            sent_first, sent_last = marks[mark]
            first.append((seen.first - sent_first) * 1000)
            last.append((seen.last - sent_last) * 1000)
            ttft.append((seen.first - seen.started - interval) * 1000)
        rows.append(
            {
                "key": path.key,
                "label": path.label,
                "requests": len(first),
                "first_p50": median(first),
                "first_p95": p95(first),
                "last_p50": median(last),
                "last_p95": p95(last),
                "ttft_p50": median(ttft),
                "ttft_p95": p95(ttft),
                "problems": dict(path.problems),
            }
        )
    return rows
