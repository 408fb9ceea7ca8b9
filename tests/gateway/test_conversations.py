"""One conversation, one session (contract §14, SPEC §19.1 step 3): a conversation id a client
sends on its own names one session per Application, a sub-agent's own id a child session
linked to its parent; a first request under a side model starts nothing.

In process (Django's test client); the concurrent first requests of one conversation are in
test_exactly_once.py (two worker processes on PostgreSQL).
"""

from __future__ import annotations

from typing import Any

from django.test import Client

from agents.services import application_create
from sessions_app.models import GatewayConversation, GatewayExchange, Message, Session

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
ANTHROPIC_TOOLS = [{"name": "lookup", "input_schema": {"type": "object"}}]


def _conversation(key: str, conversation_id: str) -> Any:
    return Client().get(
        f"/api/v1/gateway-conversations/{conversation_id}/", HTTP_AUTHORIZATION=f"Bearer {key}"
    )


def test_a_conversation_header_names_one_session_across_requests(gateway, scripted, app_and_key):
    scripted([{"text": "One."}, {"text": "Two."}])
    header = {"X-Contextproto-Conversation": "conv-1"}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    first = gateway.openai({"model": "helper", "messages": messages}, headers=header)
    assert first.status_code == 200, first.content
    session = first["X-Contextproto-Session"]
    # Shown once, as for any session the gateway starts.
    assert first["X-Contextproto-Session-Key"]
    messages += [first.json()["choices"][0]["message"], {"role": "user", "content": "again"}]
    second = gateway.openai({"model": "helper", "messages": messages}, headers=header)
    assert second.status_code == 200, second.content
    assert second["X-Contextproto-Session"] == session
    assert "X-Contextproto-Session-Key" not in second
    assert second.json()["choices"][0]["message"]["content"] == "Two."
    assert Session.objects.count() == 1
    kinds = Message.objects.filter(session_id=session).order_by("index")
    assert list(kinds.values_list("kind", flat=True)) == ["input", "text", "input", "text"]
    answer = _conversation(app_and_key[1], "conv-1")
    assert answer.status_code == 200
    assert answer.json() == {"conversationId": "conv-1", "sessionId": session, "childSessions": []}


def test_without_a_conversation_header_each_first_request_is_a_new_session(gateway, scripted):
    scripted([{"text": "One."}, {"text": "One."}])
    body = {"model": "helper", "messages": [{"role": "user", "content": "hi"}]}
    sessions = {gateway.openai(body)["X-Contextproto-Session"] for _ in range(2)}
    assert len(sessions) == 2


def test_claude_code_sub_agents_get_child_sessions_linked_to_the_conversation(
    gateway, scripted, app_and_key
):
    """Claude Code's headers: `x-claude-code-session-id` on every request, a sub-agent's
    `x-claude-code-agent-id` (and `x-claude-code-parent-agent-id` for one a sub-agent started)."""
    scripted(
        [{"text": "Main."}, {"text": "Explored."}, {"text": "Deeper."}], wire="anthropic-messages"
    )
    conversation = "5b1f0c7e-8a34-4d7e-9e43-0f2b3c4d5e6f"
    base = {"model": "helper", "max_tokens": 100, "tools": ANTHROPIC_TOOLS}

    def ask(text: str, **agent: str) -> Any:
        headers = {"x-claude-code-session-id": conversation}
        if agent.get("agent"):
            headers["x-claude-code-agent-id"] = agent["agent"]
        if agent.get("parent"):
            headers["x-claude-code-parent-agent-id"] = agent["parent"]
        answer = gateway.anthropic(
            {**base, "messages": [{"role": "user", "content": text}]}, headers=headers
        )
        assert answer.status_code == 200, answer.content
        return answer["X-Contextproto-Session"]

    main = ask("Fix the bug.")
    explorer = ask("Find the bug.", agent="a1")
    deeper = ask("Look in utils.", agent="a2", parent="a1")
    assert len({main, explorer, deeper}) == 3
    rows = {r.agent_id: r for r in GatewayConversation.objects.all()}
    assert (rows[""].session_id, rows[""].parent_id) == (Session.objects.get(pk=main).pk, None)
    assert str(rows["a1"].parent_id) == main
    assert str(rows["a2"].parent_id) == explorer
    answer = _conversation(app_and_key[1], conversation).json()
    assert answer["sessionId"] == main
    assert answer["childSessions"] == [
        {"agentId": "a1", "sessionId": explorer},
        {"agentId": "a2", "sessionId": deeper},
    ]


def test_codex_session_id_header_names_the_conversation(gateway, scripted):
    scripted([{"text": "One."}, {"text": "Two."}])
    header = {"session-id": "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    first = gateway.openai({"model": "helper", "messages": messages}, headers=header)
    messages += [first.json()["choices"][0]["message"], {"role": "user", "content": "more"}]
    second = gateway.openai({"model": "helper", "messages": messages}, headers=header)
    assert second["X-Contextproto-Session"] == first["X-Contextproto-Session"]


def test_one_conversation_id_in_two_applications_is_two_sessions(gateway, scripted, make_version):
    scripted([{"text": "One."}])
    other, other_key = application_create(name="Other Co")
    make_version(
        other,
        name="helper",
        provider="scripted",
        model_config={"steps": [{"text": "Theirs."}], "wireFormat": "openai-chat"},
    )
    header = {"X-Contextproto-Conversation": "shared-id"}
    body = {"model": "helper", "messages": [{"role": "user", "content": "hi"}]}
    ours = gateway.openai(body, headers=header)
    theirs = gateway.openai(body, headers=header, key=other_key)
    assert theirs.json()["choices"][0]["message"]["content"] == "Theirs."
    assert ours["X-Contextproto-Session"] != theirs["X-Contextproto-Session"]
    assert (
        _conversation(other_key, "shared-id").json()["sessionId"]
        == (theirs["X-Contextproto-Session"])
    )


def test_a_conversation_in_progress_seen_first_is_imported_with_a_warning(gateway, scripted):
    scripted([{"text": "Three."}])
    body = {
        "model": "helper",
        "messages": [
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "two"},
            {"role": "user", "content": "three?"},
        ],
    }
    answer = gateway.openai(body, headers={"X-Contextproto-Conversation": "imported"})
    assert answer.status_code == 200, answer.content
    assert answer["X-Contextproto-Warning"] == "new-session"


def test_the_conversation_header_wins_over_a_minted_call_id(gateway, scripted):
    """SPEC §19.1's order: the conversation id (step 3) before a minted call id (step 4)."""
    scripted([{"toolCalls": [{"name": "lookup", "arguments": {}}]}, {"text": "Fresh start."}])
    first = gateway.openai(
        {"model": "helper", "tools": TOOLS, "messages": [{"role": "user", "content": "go"}]}
    )
    reply = first.json()["choices"][0]["message"]
    call_id = reply["tool_calls"][0]["id"]
    messages = [
        {"role": "user", "content": "go"},
        reply,
        {"role": "tool", "tool_call_id": call_id, "content": "found"},
    ]
    second = gateway.openai(
        {"model": "helper", "tools": TOOLS, "messages": messages},
        headers={"X-Contextproto-Conversation": "named-later"},
    )
    assert second.status_code == 200, second.content
    assert second["X-Contextproto-Session"] != first["X-Contextproto-Session"]
    assert second["X-Contextproto-Warning"] == "new-session"


def test_a_conversation_id_too_long_is_refused_with_the_header_named(gateway, scripted):
    scripted([{"text": "One."}])
    answer = gateway.openai(
        {"model": "helper", "messages": [{"role": "user", "content": "hi"}]},
        headers={"X-Contextproto-Conversation": "x" * 256},
    )
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["details"]["field"] == "x-contextproto-conversation"
    assert not Session.objects.exists()


def test_a_side_model_request_before_the_conversations_first_is_a_side_exchange_of_it(
    gateway, scripted, app_and_key
):
    """Claude Code's title request under its small/fast model (`claude-*haiku*` by default)
    may come before the conversation's own first request: answered apart, recorded on the
    conversation's session (started empty by it), where the first real request goes on."""
    version = scripted([{"text": "Bug hunt"}, {"text": "On it."}], wire="anthropic-messages")
    _aliases(app_and_key[1], version)
    headers = {"x-claude-code-session-id": "c-1"}
    title = gateway.anthropic(
        {
            "model": "claude-haiku-4-5",
            "max_tokens": 50,
            "system": "Write a title.",
            "messages": [{"role": "user", "content": "Fix the bug."}],
        },
        headers=headers,
    )
    assert title.status_code == 200, title.content
    assert title["X-Contextproto-Side"] == "true"
    assert title.json()["content"][0]["text"] == "Bug hunt"
    (session,) = Session.objects.all()
    assert session.last_index == 0  # nothing of it in the log
    assert GatewayExchange.objects.get(side=True).session_id == session.pk
    main = gateway.anthropic(
        {
            "model": "claude-opus-5-5",
            "max_tokens": 50,
            "tools": ANTHROPIC_TOOLS,
            "messages": [{"role": "user", "content": "Fix the bug."}],
        },
        headers=headers,
    )
    assert main.status_code == 200, main.content
    assert "X-Contextproto-Side" not in main
    assert main["X-Contextproto-Session"] == str(session.pk)
    assert main.json()["content"][0]["text"] == "On it."
    kinds = Message.objects.filter(session=session).order_by("index")
    assert list(kinds.values_list("kind", flat=True)) == ["input", "text"]


def test_a_side_model_request_without_a_conversation_starts_nothing(gateway, scripted, app_and_key):
    version = scripted([{"text": "Bug hunt"}], wire="anthropic-messages")
    _aliases(app_and_key[1], version)
    title = gateway.anthropic(
        {
            "model": "claude-haiku-4-5",
            "max_tokens": 50,
            "messages": [{"role": "user", "content": "Fix the bug."}],
        }
    )
    assert title.status_code == 200, title.content
    assert title["X-Contextproto-Side"] == "true"
    assert not Session.objects.exists()
    assert GatewayExchange.objects.get(side=True).session_id is None


def _aliases(key: str, version: Any) -> None:
    answer = Client().put(
        "/api/v1/gateway-settings/",
        {"modelAliases": [{"pattern": "claude-*", "agentVersion": f"helper@{version.number}"}]},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    assert answer.status_code == 200, answer.content


def test_a_first_request_under_a_side_model_with_tools_is_a_conversation(
    gateway, scripted, app_and_key
):
    version = scripted([{"text": "Exploring."}], wire="anthropic-messages")
    Client().put(
        "/api/v1/gateway-settings/",
        {"modelAliases": [{"pattern": "claude-*", "agentVersion": f"helper@{version.number}"}]},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {app_and_key[1]}",
    )
    answer = gateway.anthropic(
        {
            "model": "claude-haiku-4-5",
            "max_tokens": 50,
            "tools": ANTHROPIC_TOOLS,
            "messages": [{"role": "user", "content": "Explore."}],
        },
        headers={"x-claude-code-session-id": "c-2", "x-claude-code-agent-id": "explore-1"},
    )
    assert answer.status_code == 200, answer.content
    assert "X-Contextproto-Side" not in answer
    assert GatewayConversation.objects.get(agent_id="explore-1").parent_id is None
