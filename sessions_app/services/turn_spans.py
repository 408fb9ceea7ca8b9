"""A turn the service drives, as spans (contract §22): the view, the model call, the tools.

Used by both drivers of the runtime's loop: the built-in runtime's run step in a worker and a
gateway request. The `chat {model}` span is open around the model call and the commit of its
answer; once the turn is written, `turn_recorded` puts on it what the model answered (its
model and id, why it stopped, the recorded usage and cost), adds the `context_view` span (what
the protocol did to the view) and one `execute_tool` span per call the service answered (a
protocol call's receipt, or the error the service wrote for a call no client runs). With
tracing off nothing here reads or computes anything.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from contextproto import telemetry
from contextproto.protocol.messages import KIND_TOOL_CALL, KIND_TOOL_RESULT, RawMessage
from contextproto.telemetry import SessionFacts, Span
from contextproto.telemetry.genai import output_message
from sessions_app.models import ProjectionSnapshot
from sessions_app.reads import trace_facts
from sessions_app.services.dispatch import Receipt

logger = logging.getLogger(__name__)


def turn_recorded(
    chat: Span,
    facts: SessionFacts,
    snapshot: ProjectionSnapshot,
    *,
    raw: Mapping[str, Any] | None,
    stop_reason: str | None,
    text: str | None,
    written: Iterable[RawMessage],
    agent: Span | None = None,
    at: int | None = None,
) -> None:
    """Describe a written turn on its open `chat` span (module docstring); never fails the
    turn. `snapshot` carries the usage its commit recorded; `raw` is the provider's reply;
    `agent` the span the view and tool spans go under, beside the chat (the current one's
    parent when not given); `at`, when the turn is described later (after the reply), the
    time (ns) the view and tool spans take: the chat's end, when they used to be recorded."""
    if not chat.is_recording():
        return
    try:
        with telemetry.within(agent) if agent is not None else contextlib.nullcontext():
            _recorded(chat, facts, snapshot, raw or {}, stop_reason, text, list(written), at)
    except Exception:
        # Tracing is an observer: a failure to describe the turn is logged, the turn stands.
        logger.exception("Recording the spans of a turn failed (session %s)", facts.session_id)


def _recorded(
    chat: Span,
    facts: SessionFacts,
    snapshot: ProjectionSnapshot,
    raw: Mapping[str, Any],
    stop_reason: str | None,
    text: str | None,
    written: list[RawMessage],
    at: int | None,
) -> None:
    tokens, cost = trace_facts.snapshot_usage(snapshot)
    model, response_id = raw.get("model"), raw.get("id")
    telemetry.chat_result(
        chat,
        response_model=model if isinstance(model, str) else None,
        response_id=response_id if isinstance(response_id, str) else None,
        finish_reasons=[stop_reason] if stop_reason else (),
        usage=tokens,
        cost=cost,
    )
    calls = [m for m in written if m.kind == KIND_TOOL_CALL]
    if telemetry.capture_content():
        output = output_message(
            text,
            [(m.tool_call_id or "", m.tool_name or "", m.arguments) for m in calls],
            finish_reason=stop_reason,
        )
        telemetry.chat_content(chat, view=snapshot.messages or [], output=[output])
    telemetry.record_view(
        facts, trace_facts.snapshot_effect(snapshot), upper_bound=snapshot.upper_bound, at=at
    )
    record_tools(facts, written, at=at)


def record_tools(
    facts: SessionFacts,
    written: Sequence[RawMessage],
    *,
    receipt: Receipt | None = None,
    at: int | None = None,
) -> None:
    """One `execute_tool` span per call in `written` that the service answered there (a
    protocol call's receipt, or the error it wrote for a call no client runs); a client's or
    a host's call runs there and has none here. `receipt`: the turn's protocol receipt, which
    says whether its call was answered again; `at` as `telemetry.tool_span` reads it."""
    results = {m.tool_call_id: m for m in written if m.kind == KIND_TOOL_RESULT and m.tool_call_id}
    for call in written:
        if call.kind != KIND_TOOL_CALL or call.tool_call_id not in results:
            continue
        result = results[call.tool_call_id]
        with telemetry.tool_span(
            facts, name=call.tool_name or "", call_id=call.tool_call_id, at=at
        ) as span:
            replayed = (
                receipt.replayed
                if receipt is not None and receipt.tool_call_id == call.tool_call_id
                else None
            )
            telemetry.tool_result(span, error_code=error_code(result), replayed=replayed)
            telemetry.tool_content(span, arguments=call.arguments, result=_json(result.content))


def _json(content: object) -> Any:
    if isinstance(content, str):
        try:
            return json.loads(content)
        except ValueError:
            return content
    return content


def error_code(result: RawMessage) -> str | None:
    """The error code of a tool result the service wrote (its JSON), None for a success."""
    body = _json(result.content)
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping) and isinstance(error.get("code"), str):
            return str(error["code"])
        if body.get("success") is True:
            return None
    return "tool_error" if result.is_error else None
