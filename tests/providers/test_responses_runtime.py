"""The built-in runtime on the Responses API (contract §4.5, §21): a model's reasoning items are
stored with its answer and sent back unchanged to the Responses upstream on the next turn,
while a Chat Completions view of the same session never carries them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sessions_app.models import Message
from sessions_app.services.projection import projection_build, snapshot_to_wire
from sessions_app.services.runs import run_start
from sessions_app.services.runtime import run_advance
from sessions_app.services.sessions import session_create
from tests.providers.responses_shapes import openai_responses_problems
from tests.providers.servers import FakeAPI
from tests.providers.test_openai_responses import REASONING_ITEM, USAGE

KEY_ENV = "TEST_PROVIDER_KEY"
MEMORY_CALL = {
    "id": "fc_1",
    "type": "function_call",
    "status": "completed",
    "call_id": "call_memory",
    "name": "context_task_memory_set",
    "arguments": json.dumps({"purpose": "note the order", "memory": "3 chairs"}),
}
ANSWER = {
    "id": "msg_2",
    "type": "message",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "3 chairs: 270 CHF.", "annotations": []}],
}


def _response(*output: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "resp_x",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "gpt-test",
        "output": list(output),
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
        "usage": USAGE,
    }


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test")


def test_reasoning_goes_back_unchanged_to_the_responses_upstream_and_nowhere_else(
    openai_api: FakeAPI, application, make_version, django_capture_on_commit_callbacks
) -> None:
    openai_api.answer(200, _response(REASONING_ITEM, MEMORY_CALL))
    openai_api.answer(200, _response(ANSWER))
    version = make_version(
        application,
        provider="openai",
        model_config={"api": "responses", "baseUrl": openai_api.url, "apiKeyEnv": KEY_ENV},
    )
    session, _ = session_create(agent_version=version)
    run, _ = run_start(session_id=session.id, content="Quote 3 chairs, please.")
    with django_capture_on_commit_callbacks(execute=True):
        assert run_advance(run_id=run.id) == "completed"

    first, second = (r.body for r in openai_api.received)
    assert [r.path for r in openai_api.received] == ["/responses", "/responses"]
    for body in (first, second):
        assert openai_responses_problems(body) == []
        assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
    # The second turn sends the first answer back as the model gave it: its reasoning item,
    # encrypted content and all, right before its call, and the call's result after it.
    items = second["input"]
    at = items.index(
        {
            "type": "reasoning",
            "id": "rs_68a1",
            "summary": REASONING_ITEM["summary"],
            "encrypted_content": "gAAAAABo-opaque",
        }
    )
    assert items[at + 1]["type"] == "function_call" and items[at + 1]["call_id"] == "call_memory"
    assert items[at + 2]["type"] == "function_call_output"
    # The log keeps it on the answer as a reasoning part (contract §3.1).
    call = Message.objects.get(session=session, kind="tool_call")
    assert call.content == [
        {
            "type": "reasoning",
            "id": "rs_68a1",
            "summary": REASONING_ITEM["summary"],
            "encryptedContent": "gAAAAABo-opaque",
        }
    ]
    # A Chat Completions or Anthropic view of the same session carries none of it.
    for provider in ("openai-chat", "anthropic-messages"):
        built = snapshot_to_wire(projection_build(session_id=session.id, provider=provider))
        assert "gAAAAABo-opaque" not in json.dumps(built["request"]), provider
    responses = snapshot_to_wire(
        projection_build(session_id=session.id, provider="openai-responses")
    )
    assert "gAAAAABo-opaque" in json.dumps(responses["request"])
