"""Reconciliation, as a property (contract §14): however a client sends its conversation (all of it,
trimmed from the front, only what is new) and however often it retries a request whose reply
it lost, the session's log is the one a plain full-history client leaves."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessions_app.models import Message
from tests.gateway.conftest import Gateway

pytestmark = pytest.mark.django_db

TURNS = 4
LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look something up.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    },
}


def _script() -> list[dict[str, Any]]:
    """Odd turns call the client's tool first; every turn notes something with a protocol
    tool, so the log holds protocol calls the client never sees."""
    steps: list[dict[str, Any]] = []
    for turn in range(TURNS):
        if turn % 2:
            steps.append({"toolCalls": [{"name": "lookup", "arguments": {"q": f"t{turn}"}}]})
        steps.append(
            {
                "text": f"noting {turn}",
                "toolCalls": [
                    {
                        "name": "context_task_memory_set",
                        "arguments": {"purpose": "note", "memory": f"turn {turn}"},
                    }
                ],
            }
        )
        steps.append({"text": f"answer {turn}"})
    return steps


Behaviour = tuple[str, int, bool]  # how the request is sent, how much is dropped, retried?

behaviours = st.tuples(
    st.sampled_from(["full", "trimmed", "incremental"]), st.integers(1, 20), st.booleans()
)


def _drive(gateway: Gateway, plan: list[Behaviour]) -> str:
    """Play the conversation with one behaviour per request; return the session id."""
    history: list[dict[str, Any]] = []
    key: str | None = None
    session = ""
    requests = iter(plan)
    turn = 0
    pending: list[dict[str, Any]] = [{"role": "user", "content": f"question {turn}"}]
    while turn < TURNS:
        how, drop, retry = next(requests, ("full", 0, False))
        if how == "full":
            sent = history + pending
        elif how == "trimmed":
            sent = history[min(drop, len(history)) :] + pending
        else:
            sent = list(pending)
        body = {"model": "helper", "messages": sent, "tools": [LOOKUP]}
        response = gateway.openai(body, key=key)
        assert response.status_code == 200, response.content
        if retry:  # the reply was lost: the same request again gets it again
            again = gateway.openai(body, key=key or response["X-Contextproto-Session-Key"])
            assert again.status_code == 200, again.content
            assert again.content == response.content
            assert again["X-Contextproto-Replayed"] == "true"
        key = key or response["X-Contextproto-Session-Key"]
        session = response["X-Contextproto-Session"]
        message = response.json()["choices"][0]["message"]
        answer = {k: v for k, v in message.items() if k in ("role", "content", "tool_calls")}
        history += [*pending, answer]
        if message.get("tool_calls"):
            call = message["tool_calls"][0]
            pending = [{"role": "tool", "tool_call_id": call["id"], "content": "found it"}]
        else:
            turn += 1
            pending = [{"role": "user", "content": f"question {turn}"}]
    return session


def _log(session: str) -> list[tuple[Any, ...]]:
    """The log without what differs between two sessions by nature (ids, times)."""
    return [
        (m.role, m.kind, json.dumps(m.content), m.tool_name, json.dumps(m.arguments), m.window_id)
        for m in Message.objects.filter(session_id=session).order_by("index")
    ]


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plan=st.lists(behaviours, min_size=1, max_size=3 * TURNS))
def test_any_client_behaviour_leaves_the_log_of_a_full_history_client(gateway, scripted, plan):
    scripted(_script(), name="helper")
    reference = _log(_drive(gateway, []))
    assert _log(_drive(gateway, plan)) == reference
    assert len(reference) == 4 * TURNS + 2 * (TURNS // 2)
