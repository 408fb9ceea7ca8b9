"""A host's turn (`POST sessions/{id}/turns/`) as spans under the request's (contract §22).

The host called its model itself, so the turn is recorded after the fact, from what the
service wrote: `invoke_agent {agent}` holding the view span (what the protocol did to the
view the model answered), the model call `chat {model}` (the answer's model, id and stop
reason, the usage and cost the service recorded; contents when opted in) and one
`execute_tool {tool}` per call the service answered (a protocol call's receipt, or the
error result the service wrote for a later call). The call handed to the host runs there.
A replay records nothing again (its tokens were counted once).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from contextproto import telemetry
from contextproto.protocol.messages import KIND_TOOL_CALL
from contextproto.protocol.model_answers import ModelAnswer
from contextproto.telemetry.genai import output_message
from contextproto.telemetry.spans import TURN_SOURCE
from sessions_app.models import ProjectionSnapshot, Session
from sessions_app.reads import trace_facts
from sessions_app.services.turn_spans import record_tools
from sessions_app.services.turns import TurnRecorded

logger = logging.getLogger(__name__)


def name_session(session: Session) -> None:
    """Name the session on the request's span before the turn runs, so a refused turn's
    trace is the session's too."""
    if telemetry.enabled():
        telemetry.annotate_current(trace_facts.session_facts(session))


def record_turn(
    *,
    session: Session,
    snapshot_id: str,
    answer: ModelAnswer,
    sent: object,
    recorded: TurnRecorded,
) -> None:
    """Record the turn's spans under the current span; never fails the turn.

    `session` with its version and agent loaded (`session_for` selects them); `sent` is the
    answer as the host sent it (the provider's reply: its `model` and `id`).
    """
    if not telemetry.enabled():
        return
    try:
        _record(session, snapshot_id, answer, sent, recorded)
    except Exception:
        # Tracing is an observer: a failure to describe the turn is logged, the turn stands.
        logger.exception("Recording the spans of a turn failed (session %s)", session.id)


def _record(
    session: Session,
    snapshot_id: str,
    answer: ModelAnswer,
    sent: object,
    recorded: TurnRecorded,
) -> None:
    base = trace_facts.session_facts(session)
    if recorded.replayed:
        telemetry.annotate_current(base, {"contextproto.turn.replayed": True})
        return
    snapshot = ProjectionSnapshot.objects.get(session_id=session.id, pk=snapshot_id)
    facts = trace_facts.turn_facts(base, snapshot)
    telemetry.annotate_current(facts)
    reply = sent if isinstance(sent, Mapping) else {}
    host_call = recorded.host_call
    with telemetry.agent_span(
        facts,
        attributes={
            TURN_SOURCE: "host",
            **({"contextproto.turn.host_call": host_call.tool_name or ""} if host_call else {}),
        },
    ):
        telemetry.record_view(
            facts, trace_facts.snapshot_effect(snapshot), upper_bound=snapshot.upper_bound
        )
        model = reply.get("model") if isinstance(reply.get("model"), str) else None
        with telemetry.chat_span(facts, model=model, attributes={TURN_SOURCE: "host"}) as chat:
            tokens, cost = trace_facts.snapshot_usage(snapshot)
            response_id = reply.get("id")
            telemetry.chat_result(
                chat,
                response_model=model,
                response_id=response_id if isinstance(response_id, str) else None,
                finish_reasons=[answer.stop_reason] if answer.stop_reason else (),
                usage=tokens,
                cost=cost,
            )
            if telemetry.capture_content():
                calls = [
                    (m.tool_call_id or "", m.tool_name or "", m.arguments)
                    for m in recorded.messages
                    if m.kind == KIND_TOOL_CALL
                ]
                output = output_message(
                    answer.text, calls, thinking=answer.thinking, finish_reason=answer.stop_reason
                )
                telemetry.chat_content(chat, view=snapshot.messages or [], output=[output])
        record_tools(facts, recorded.messages, receipt=recorded.receipt)
