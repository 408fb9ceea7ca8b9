"""The gateway's two wire formats (contract §14), without a server: requests in, replies and
stream events out, read back by the official SDKs' own parsers."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import Message, RawMessageStreamEvent
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from pydantic import TypeAdapter

from contextproto.protocol.gateway import anthropic_wire, openai_wire
from contextproto.protocol.gateway.transcript import Call
from contextproto.protocol.gateway.wire import Reply, Usage, WireError
from contextproto.protocol.parameters import Parameters, ToolChoice, with_parameters

REPLIES = [
    Reply("r1", 1, "m", "Hello there.", None, "stop", Usage(120, 8, 100, 0)),
    Reply(
        "r2",
        1,
        "m",
        "Checking.\n\nOne moment.",
        Call("c1", "lookup", {"city": "Oslo"}),
        "tool_calls",
        Usage(300, 20, 0, 50),
    ),
    Reply("r3", 1, "m", "", Call("c2", "lookup", {"a": [1, {"b": None}]}), "tool_calls"),
    Reply("r4", 1, "m", "Cut", None, "length", Usage(10, 1)),
]


def test_openai_request_system_text_is_joined_and_not_a_message():
    request = openai_wire.parse_request(
        {
            "model": "helper@1",
            "messages": [
                {"role": "system", "content": "One."},
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {"role": "developer", "content": [{"type": "text", "text": "Two."}]},
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}}
                    ],
                },
            ],
            "user": "u",
            "logprobs": False,
        }
    )
    assert request.system == "One.\n\nTwo."
    assert [i.position for i in request.items] == [1, 3]
    assert request.items[1].content == [{"type": "image", "mediaType": "image/png", "data": "AAA"}]
    assert request.ignored == ("logprobs", "user")


def test_anthropic_request_splits_results_from_the_rest_of_a_user_message():
    request = anthropic_wire.parse_request(
        {
            "model": "m",
            "max_tokens": 10,
            "system": [
                {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
            ],
            "messages": [
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hm", "signature": "s"},
                        {"type": "tool_use", "id": "t1", "name": "f", "input": {"x": 1}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": "42"},
                        {"type": "text", "text": "and?"},
                    ],
                },
            ],
            "metadata": {"user_id": "x"},
        }
    )
    assert request.system == "Be brief."
    assert [(i.role, i.position) for i in request.items] == [
        ("user", 0),
        ("assistant", 1),
        ("tool", 2),
        ("user", 2),
    ]
    assert request.items[1].calls == (Call("t1", "f", {"x": 1}),)
    assert request.ignored == ("metadata",)
    assert request.parameters.max_tokens == 10


def test_anthropic_system_messages_are_system_text_wherever_they_stand():
    # Claude Code 2.1 sends its environment as a system message after the user's message.
    body = {
        "model": "m",
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1"},
            {
                "type": "text",
                "text": "You are Claude Code.",
                "cache_control": {"type": "ephemeral"},
            },
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "system", "content": [{"type": "text", "text": "# Environment\ncwd: /p"}]},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "and?"},
            {"role": "system", "content": "Later note."},
        ],
    }
    request = anthropic_wire.parse_request(body)
    assert request.system == (
        "x-anthropic-billing-header: cc_version=2.1\n\nYou are Claude Code.\n\n"
        "# Environment\ncwd: /p\n\nLater note."
    )
    # They are not transcript messages; the others keep their positions in the request.
    assert [(i.role, i.position) for i in request.items] == [
        ("user", 0),
        ("assistant", 2),
        ("user", 3),
    ]
    # Without a top-level system field, the system messages alone are the system text.
    del body["system"]
    assert anthropic_wire.parse_request(body).system == "# Environment\ncwd: /p\n\nLater note."
    body["messages"][1]["content"] = [{"type": "image", "source": {}}]
    with pytest.raises(WireError) as refused:
        anthropic_wire.parse_request(body)
    assert refused.value.details["field"] == "messages[1].content[0]"


@pytest.mark.parametrize(
    ("parse", "body", "code", "field"),
    [
        (openai_wire.parse_request, {"messages": []}, "invalid_request", "messages"),
        (
            openai_wire.parse_request,
            {"messages": [{"role": "user", "content": "x"}], "n": 3},
            "gateway_parameter_unsupported",
            "n",
        ),
        (
            openai_wire.parse_request,
            {"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]},
            "invalid_request",
            "messages[0].content[0]",
        ),
        (
            anthropic_wire.parse_request,
            {"messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "any"}},
            "gateway_parameter_unsupported",
            "tool_choice",
        ),
        (
            anthropic_wire.parse_request,
            {
                "messages": [{"role": "user", "content": "x"}],
                "tools": [{"type": "web_search_20250305", "name": "web_search"}],
            },
            "gateway_parameter_unsupported",
            "tools[0]",
        ),
    ],
)
def test_requests_the_gateway_cannot_take_are_refused_naming_the_field(parse, body, code, field):
    with pytest.raises(WireError) as refused:
        parse(body)
    assert refused.value.code == code
    assert refused.value.details["field"] == field


@pytest.mark.parametrize("reply", REPLIES, ids=lambda r: r.id)
@pytest.mark.parametrize("include_usage", [True, False])
def test_openai_chunks_add_up_to_the_reply(reply, include_usage):
    whole = ChatCompletion.model_validate(openai_wire.render_reply(reply))
    stream = openai_wire.Stream(
        reply_id=reply.id, created=reply.created, model=reply.model, include_usage=include_usage
    )
    text = stream.start() + stream.text(reply.text[:3]) + stream.text(reply.text[3:])
    text += stream.finish(reply)
    state = ChatCompletionStreamState()
    events = [e.removeprefix("data: ") for e in text.split("\n\n") if e.startswith("data: ")]
    assert events[-1] == "[DONE]"
    for data in events[:-1]:
        state.handle_chunk(ChatCompletionChunk.model_validate(json.loads(data)))
    # The accumulated chunks (get_final_completion refuses a `length` finish by design).
    streamed = state.current_completion_snapshot
    assert streamed.choices[0].message.content == whole.choices[0].message.content
    assert streamed.choices[0].finish_reason == whole.choices[0].finish_reason
    calls = streamed.choices[0].message.tool_calls or []
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        (c.id, c.function.name, json.loads(c.function.arguments))
        for c in whole.choices[0].message.tool_calls or []
    ]
    if include_usage:
        assert streamed.usage == whole.usage


@pytest.mark.parametrize("reply", REPLIES, ids=lambda r: r.id)
def test_anthropic_events_add_up_to_the_reply(reply):
    whole = Message.model_validate(anthropic_wire.render_reply(reply))
    stream = anthropic_wire.Stream(reply_id=reply.id, model=reply.model)
    first_turn = Reply(reply.id, 1, "m", "", None, "stop", Usage(10, 1))
    text = (
        stream.start(first_turn.usage) + stream.text(reply.text[:3]) + stream.text(reply.text[3:])
    )
    text += stream.keepalive() + stream.finish(reply)
    adapter = TypeAdapter(RawMessageStreamEvent)
    snapshot = None
    buffers: dict[int, bytes] = {}
    for frame in filter(None, text.split("\n\n")):
        name, data = (line.partition(": ")[2] for line in frame.split("\n"))
        if name == "ping":
            continue
        snapshot = accumulate_event(
            event=adapter.validate_python(json.loads(data)),
            current_snapshot=snapshot,
            json_bufs=buffers,
        )
    assert snapshot is not None
    assert snapshot.model_dump() == whole.model_dump()


def test_error_shapes_carry_the_code_where_each_sdk_reads_it():
    openai_body = openai_wire.error_reply(409, "session_busy", "busy", {"retryAfterSeconds": 1})
    assert openai_body["error"]["code"] == "session_busy"
    assert openai_body["error"]["type"] == "invalid_request_error"
    anthropic_body = anthropic_wire.error_reply(503, "dependency_unavailable", "down", {})
    assert anthropic_body["type"] == "error"
    assert anthropic_body["error"]["type"] == "overloaded_error"
    assert anthropic_wire.error_reply(504, "x", "m", {})["error"]["type"] == "api_error"
    assert openai.APIStatusError and anthropic.APIStatusError  # the SDKs read these shapes


def test_forwarded_fields_in_each_upstreams_words():
    parameters = Parameters(
        max_tokens=50,
        temperature=0.3,
        top_p=0.5,
        stop=("X",),
        seed=3,
        tool_choice=ToolChoice(mode="tool", name="lookup"),
    )
    tools = {"messages": [], "tools": [{"name": "lookup"}]}
    assert with_parameters(tools, "openai-chat", parameters) == {
        **tools,
        "max_completion_tokens": 50,
        "temperature": 0.3,
        "top_p": 0.5,
        "stop": ["X"],
        "seed": 3,
        "tool_choice": {"type": "function", "function": {"name": "lookup"}},
    }
    assert with_parameters(tools, "anthropic-messages", parameters) == {
        **tools,
        "max_tokens": 50,
        "stop_sequences": ["X"],
        "tool_choice": {"type": "tool", "name": "lookup", "disable_parallel_tool_use": True},
    }
    assert with_parameters(tools, "neutral", parameters) == tools
    assert (
        with_parameters(tools, "openai-chat", parameters, max_tokens_key="max_tokens")["max_tokens"]
        == 50
    )
