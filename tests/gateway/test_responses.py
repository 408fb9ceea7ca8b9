"""The Responses API through the gateway (contract §21), driven with the official `openai` SDK.

In process (the WSGI app over httpx), on a scripted model: `responses.create` and
`responses.stream` (the helper's final response equals the stored one), a client-tool round
trip by `previous_response_id`, a fork from an earlier response with the original unchanged,
another Application's ids, `retrieve`, `input_items`, `delete`, `store: false`,
`input_tokens`, and compaction without a model call (`responses.compact()` and Codex's
trigger) continued by the item, an altered item refused.
"""

from __future__ import annotations

import copy
from typing import Any

import httpx
import openai
import pytest
from django.core.signals import request_finished, request_started
from django.db import close_old_connections

from agents.services import application_create
from contextproto import wsgi
from sessions_app.models import GatewayExchange, Message, Session

PROMPT = "You help.\n{{context_protocol}}\n{{client_system}}"
WEATHER = {
    "type": "function",
    "name": "weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
NOTE = {"name": "context_task_memory_set", "arguments": {"purpose": "p", "memory": "Oslo"}}


def sdk(key: str) -> openai.OpenAI:
    """The official client on the gateway's base URL, served in process."""
    transport = httpx.WSGITransport(app=wsgi.application)
    return openai.OpenAI(
        base_url="http://localhost/gateway/openai/v1",
        api_key=key,
        max_retries=0,
        http_client=httpx.Client(transport=transport),
    )


@pytest.fixture(autouse=True)
def test_connection_kept():
    """As Django's test client does: the in-process requests share the test's transaction, which
    `close_old_connections` (on request start and end) would close on PostgreSQL."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def world(make_version):
    """An Application whose `helper` plays `steps` (a Responses-speaking scripted model)."""

    def build(steps: list[dict[str, Any]]) -> tuple[Any, str]:
        application, key = application_create(name="Responses Co")
        make_version(
            application,
            name="helper",
            provider="scripted",
            model_config={"steps": steps, "wireFormat": "openai-responses"},
            system_prompt=PROMPT,
        )
        return application, key

    return build


def plain(value: Any) -> Any:
    """A dumped SDK object without the `parsed` fields the stream helper adds."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if k != "parsed"}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def kinds(session_id: str) -> list[str]:
    return list(
        Message.objects.filter(session_id=session_id)
        .order_by("index")
        .values_list("kind", flat=True)
    )


def test_a_tool_round_trip_by_previous_response_id_with_a_protocol_call_and_a_stream(world):
    _app, key = world(
        [
            {"text": "Noting the city.", "toolCalls": [NOTE]},
            {"toolCalls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
            {"text": "It is sunny in Oslo."},
        ]
    )
    client = sdk(key)
    raw = client.responses.with_raw_response.create(
        model="helper", input="Weather in Oslo?", tools=[WEATHER], instructions="Be brief."
    )
    first = raw.parse()
    session = raw.headers["x-contextproto-session"]
    assert raw.headers["x-contextproto-turns"] == "2"  # the protocol call ran in the gateway
    assert first.status == "completed" and first.id.startswith("resp_")
    assert first.output_text == "Noting the city."
    call = next(o for o in first.output if o.type == "function_call")
    assert (call.name, call.arguments, call.status) == ("weather", '{"city":"Oslo"}', "completed")
    assert call.call_id.startswith("call_")  # minted: unique across the service
    assert first.instructions == "Be brief." and first.tools[0].name == "weather"
    assert first.usage.input_tokens > 0

    with client.responses.stream(
        model="helper",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
        tools=[WEATHER],
        instructions="Be brief.",
    ) as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == final.output_text == "It is sunny in Oslo."
    assert final.previous_response_id == first.id
    # The stream's last event carries the object the gateway stored: retrieve gives it again
    # (the stream helper's own `parsed` fields aside).
    assert plain(client.responses.retrieve(final.id).model_dump()) == plain(final.model_dump())
    assert kinds(session) == [
        "input",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "text",
    ]
    assert Session.objects.count() == 1


def test_an_earlier_response_is_forked_exactly_and_the_original_stays(world):
    # A scripted model's cursor counts the model calls of the session's runs: the fork's copy
    # of the first run counts one, so the branch gets the script's second step.
    _app, key = world([{"text": "One."}, {"text": "Two."}, {"text": "Three."}])
    client = sdk(key)
    one = client.responses.with_raw_response.create(model="helper", input="first")
    original = one.headers["x-contextproto-session"]
    two = client.responses.create(
        model="helper", previous_response_id=one.parse().id, input="second"
    )
    before = kinds(original)

    branch = client.responses.with_raw_response.create(
        model="helper", previous_response_id=one.parse().id, input="another second"
    )
    fork = branch.headers["x-contextproto-session"]
    assert fork != original and branch.headers["x-contextproto-session-key"]
    assert branch.parse().output_text == "Two."
    assert kinds(original) == before == ["input", "text", "input", "text"]
    assert kinds(fork) == ["input", "text", "input", "text"]
    assert Session.objects.get(pk=fork).forked_from_id == Session.objects.get(pk=original).pk
    # Continuing the latest reply of either goes on in its own session.
    assert two.previous_response_id == one.parse().id


def test_the_same_request_after_a_response_is_its_reply_again(world):
    _app, key = world([{"text": "One."}, {"text": "Two."}])
    client = sdk(key)
    first = client.responses.create(model="helper", input="first")
    body = {"model": "helper", "previous_response_id": first.id, "input": "second"}
    again = [client.responses.with_raw_response.create(**body) for _ in range(2)]
    assert again[0].http_response.content == again[1].http_response.content
    assert again[1].headers["x-contextproto-replayed"] == "true"
    assert Session.objects.count() == 1


def test_another_applications_response_is_404_and_store_false_is_not_kept(world):
    _app, key = world([{"text": "Mine."}, {"text": "Unkept."}])
    client = sdk(key)
    mine = client.responses.create(model="helper", input="hi")
    _other, other_key = application_create(name="Someone else")
    stranger = sdk(other_key)
    with pytest.raises(openai.NotFoundError) as refused:
        stranger.responses.create(model="helper", previous_response_id=mine.id, input="x")
    assert refused.value.body["code"] == "previous_response_not_found"
    with pytest.raises(openai.NotFoundError) as unknown:
        stranger.responses.retrieve(mine.id)
    assert unknown.value.body["code"] == "response_not_found"

    unkept = client.responses.create(model="helper", input="again", store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unkept.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="helper", previous_response_id=unkept.id, input="x")


def test_input_items_list_the_transcript_before_a_response_and_delete_forgets_its_id(world):
    _app, key = world([{"text": "One."}, {"text": "Two."}])
    client = sdk(key)
    first = client.responses.create(model="helper", input="first question")
    second = client.responses.create(
        model="helper", previous_response_id=first.id, input="second question"
    )
    listed = client.responses.input_items.list(second.id, order="asc")
    texts = [(item.type, getattr(item, "role", None)) for item in listed.data]
    assert texts == [("message", "user"), ("message", "assistant"), ("message", "user")]
    assert listed.data[-1].content[0].text == "second question"
    deleted = client.responses.delete(second.id)
    assert deleted is None or getattr(deleted, "deleted", True)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(second.id)
    # The log keeps the turn: it is immutable.
    assert Message.objects.count() == 4


def test_input_tokens_count_the_view_and_write_nothing(world):
    _app, key = world([{"text": "One."}])
    client = sdk(key)
    raw = client.responses.input_tokens.with_raw_response.count(model="helper", input="hello")
    counted = raw.parse()
    assert counted.input_tokens > 0
    assert raw.headers["x-contextproto-estimated"] == "true"
    assert (
        Session.objects.count() == 0
        and GatewayExchange.objects.filter(status="running").count() == 0
    )


def test_compaction_answers_an_item_without_a_model_call_and_the_item_continues(world):
    _app, key = world([{"text": "One."}, {"text": "After the compaction."}])
    client = sdk(key)
    first = client.responses.with_raw_response.create(model="helper", input="first")
    session = first.headers["x-contextproto-session"]
    compacted = client.responses.compact(model="helper", previous_response_id=first.parse().id)
    item = compacted.output[-1]
    assert item.type == "compaction" and item.encrypted_content
    assert compacted.usage.output_tokens == 0
    assert kinds(session) == ["input", "text"]  # no model call, nothing written

    later = client.responses.with_raw_response.create(
        model="helper",
        input=[
            {"type": "compaction", "encrypted_content": item.encrypted_content},
            {"role": "user", "content": "and now?"},
        ],
    )
    assert later.headers["x-contextproto-session"] == session
    assert later.parse().output_text == "After the compaction."
    assert kinds(session) == ["input", "text", "input", "text"]

    altered = copy.copy(item.encrypted_content)
    altered = altered[:-4] + ("AAAA" if not altered.endswith("AAAA") else "BBBB")
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(
            model="helper",
            input=[
                {"type": "compaction", "encrypted_content": altered},
                {"role": "user", "content": "x"},
            ],
        )
    assert refused.value.body["code"] == "invalid_compaction_item"


def test_codex_compaction_trigger_is_answered_with_one_compaction_item(world):
    _app, key = world([{"text": "One."}, {"text": "Resumed."}])
    client = sdk(key)
    first = client.responses.with_raw_response.create(model="helper", input="first")
    session = first.headers["x-contextproto-session"]
    history: list[Any] = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "One."},
        {"type": "compaction_trigger"},
    ]
    # Codex names its conversation (its session-id header, issue 40); here the session.
    named = {"X-Contextproto-Session": session}
    triggered = client.responses.create(model="helper", input=history, extra_headers=named)
    items = [o for o in triggered.output if o.type == "compaction"]
    assert len(items) == 1 and len(triggered.output) == 1
    assert kinds(session) == ["input", "text"]
    # Streamed (as Codex asks), the same answer: one compaction item, not called a replay.
    with client.responses.with_streaming_response.create(
        model="helper", input=history, extra_headers=named, stream=True
    ) as streamed:
        events = [line for line in streamed.iter_lines() if line.startswith("event: ")]
        assert "x-contextproto-replayed" not in streamed.headers
    assert events[0] == "event: response.created" and events[-1] == "event: response.completed"
    resumed = client.responses.create(
        model="helper",
        input=[
            {"type": "compaction", "encrypted_content": items[0].encrypted_content},
            {"role": "user", "content": "go on"},
        ],
    )  # the item alone names the session
    assert resumed.output_text == "Resumed."
    assert Session.objects.count() == 1


def test_item_references_stand_for_the_output_items_the_gateway_gave(world):
    """The Vercel AI SDK's `openai()` sends an earlier output item back by its id: the stored
    response's item takes its place, and the conversation goes on in its session."""
    _app, key = world(
        [
            {"toolCalls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
            {"text": "It is sunny in Oslo."},
            {"text": "You are welcome."},
        ]
    )
    client = sdk(key)
    first = client.responses.with_raw_response.create(
        model="helper", input="Weather in Oslo?", tools=[WEATHER]
    )
    call = next(o for o in first.parse().output if o.type == "function_call")
    second = client.responses.create(
        model="helper",
        tools=[WEATHER],
        input=[
            {"role": "user", "content": "Weather in Oslo?"},
            {"type": "item_reference", "id": call.id},
            {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"},
        ],
    )
    message = next(o for o in second.output if o.type == "message")
    third = client.responses.with_raw_response.create(
        model="helper",
        tools=[WEATHER],
        input=[
            {"role": "user", "content": "Weather in Oslo?"},
            {"type": "item_reference", "id": call.id},
            {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"},
            {"type": "item_reference", "id": message.id},
            {"role": "user", "content": "Thanks!"},
        ],
    )
    assert third.parse().output_text == "You are welcome."
    assert third.headers["x-contextproto-session"] == first.headers["x-contextproto-session"]
    assert third.headers["x-contextproto-turns"] == "1"
    assert Session.objects.count() == 1

    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(
            model="helper",
            input=[{"type": "item_reference", "id": "msg_" + "0" * 36}],
        )
    error = refused.value.body
    assert error["code"] == "invalid_request" and error["details"]["field"] == "input[0].id"


def test_every_answer_is_counted_reads_and_counts_included(world):
    """SPEC §19: every answer under /gateway/ is counted on the dashboard (a row each)."""
    app, key = world([{"text": "One."}])
    client = sdk(key)
    first = client.responses.create(model="helper", input="first")
    client.responses.retrieve(first.id)
    list(client.responses.input_items.list(first.id))
    client.models.list()
    client.responses.delete(first.id)
    paths = list(
        GatewayExchange.objects.filter(application=app)
        .order_by("created_at")
        .values_list("path", "http_status")
    )
    base = "/gateway/openai/v1"
    assert paths == [
        (f"{base}/responses", 200),
        (f"{base}/responses/{first.id}", 200),
        (f"{base}/responses/{first.id}/input_items", 200),
        (f"{base}/models", 200),
        (f"{base}/responses/{first.id}", 200),
    ]
