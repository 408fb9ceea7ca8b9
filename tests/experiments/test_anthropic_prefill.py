"""The Anthropic adapter's prefill choice (engine level, no database)."""

from __future__ import annotations

from contextproto.protocol.adapter_anthropic import DERIVED_EDGE_MARKER, NOTE_ANTHROPIC_PREFILL
from contextproto.protocol.adapters import adapt
from contextproto.protocol.messages import ModelMessage, ProjectionSource
from contextproto.protocol.projection import Projection


def _projection(placement: str) -> Projection:
    messages = [
        ModelMessage(role="system", kind="system", content="sys"),
        ModelMessage(role="assistant", kind="context_header", content="header"),
        ModelMessage(role="user", kind="input", content="go"),
        ModelMessage(
            role="assistant",
            kind="tool_call",
            content="",
            tool_call_id="c1",
            tool_name="lookup",
            arguments={},
        ),
        ModelMessage(role="tool", kind="tool_result", content="r1", tool_call_id="c1"),
    ]
    state = ModelMessage(
        role="user" if placement == "trailing_user" else "assistant",
        kind="context_state",
        content="{state}",
    )
    if placement == "before_history_assistant":
        messages.insert(2, state)
    else:
        messages.append(state)
    return Projection(
        messages=tuple(messages),
        sources=tuple(ProjectionSource(derived_type="raw", session_id="s") for _ in messages),
        window_id="main",
        revision=1,
        upper_bound=3,
        run_id=None,
        protocol="unified@3",
        options={"stateMessagePlacement": placement},
        error_tool_call_ids=frozenset(),
    )


def test_a_model_accepting_prefills_gets_the_trailing_state_as_an_assistant_turn() -> None:
    request = adapt(_projection("trailing_assistant"), "anthropic-messages", assistant_prefill=True)
    messages = request.body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[-1]["content"] == [{"type": "text", "text": "{state}"}]
    assert NOTE_ANTHROPIC_PREFILL in request.notes
    # The leading header still travels as marked user text: only the trailing edge moved.
    assert messages[0]["content"][0]["text"] == DERIVED_EDGE_MARKER + "header"


def test_without_prefill_the_trailing_state_travels_as_marked_user_text() -> None:
    request = adapt(_projection("trailing_assistant"), "anthropic-messages")
    messages = request.body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[-1]["content"][-1]["text"] == DERIVED_EDGE_MARKER + "{state}"
    assert NOTE_ANTHROPIC_PREFILL not in request.notes


def test_prefill_changes_nothing_for_the_other_placements() -> None:
    for placement in ("before_history_assistant", "trailing_user"):
        projection = _projection(placement)
        with_prefill = adapt(projection, "anthropic-messages", assistant_prefill=True)
        assert with_prefill == adapt(projection, "anthropic-messages"), placement
    openai = _projection("trailing_assistant")
    assert adapt(openai, "openai-chat", assistant_prefill=True) == adapt(openai, "openai-chat")
