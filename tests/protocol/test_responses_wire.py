"""The Responses API as a gateway client speaks it (contract §21): requests as the clients send
them read onto the transcript, refusals naming the field, and the reply object."""

from __future__ import annotations

import json

import pytest
from openai.types.responses import Response

from contextproto.protocol import host_tools
from contextproto.protocol.custom_tools import CUSTOM_INPUT_SCHEMA
from contextproto.protocol.gateway.responses_render import (
    output_item_id,
    render_reply,
    reply_of_item,
)
from contextproto.protocol.gateway.responses_wire import ResponsesWire, parse_request
from contextproto.protocol.gateway.transcript import Call
from contextproto.protocol.gateway.wire import Reply, Usage, WireError
from contextproto.protocol.gateway.wires import WIRES, wire_for
from contextproto.protocol.parameters import ToolChoice

REPLY_ID = "resp_" + "0123456789abcdef" * 2
REASONING = {
    "type": "reasoning",
    "id": "rs_upstream_1",
    "summary": [{"type": "summary_text", "text": "Look the price up first."}],
    "encryptedContent": "gAAAA-opaque",
}
APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Edit files.",
    "format": {"type": "grammar", "syntax": "lark", "definition": 'start: "*** Begin Patch"'},
}

# What Codex CLI sends after one round trip of its shell tool (checked against its
# ResponseItem serialisation: no ids on resent items, string outputs, a custom tool beside
# function tools, its hosted web search, reasoning sent back with its encrypted content).
CODEX_BODY = {
    "model": "helper@1",
    "instructions": "You are Codex.",
    "input": [
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "Sandbox: workspace-write."}],
        },
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "<environment_context>cwd: /p</environment_context>"}
            ],
        },
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "List the files."}],
        },
        {"type": "reasoning", "summary": [], "encrypted_content": "gAAAA-1"},
        {
            "type": "function_call",
            "name": "exec_command",
            "arguments": '{"cmd":"ls"}',
            "call_id": "call_1",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "README.md"},
        {
            "type": "web_search_call",
            "status": "completed",
            "action": {"type": "search", "query": "x"},
        },
        {
            "type": "custom_tool_call",
            "call_id": "call_2",
            "name": "apply_patch",
            "input": "*** Begin Patch",
        },
        {"type": "custom_tool_call_output", "call_id": "call_2", "output": "Done!"},
    ],
    "tools": [
        {
            "type": "function",
            "name": "exec_command",
            "description": "Run.",
            "strict": False,
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
        },
        APPLY_PATCH,
        {"type": "web_search", "external_web_access": False},
    ],
    "tool_choice": "auto",
    "parallel_tool_calls": False,
    "reasoning": {"effort": "medium", "summary": "auto"},
    "store": False,
    "stream": True,
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "0199-conversation",
    "text": {"verbosity": "medium"},
}


def test_the_responses_wire_is_registered_for_its_format() -> None:
    assert isinstance(wire_for("responses"), ResponsesWire)
    assert set(WIRES) == {"openai", "anthropic", "responses"}


def test_a_codex_request_reads_onto_the_transcript() -> None:
    request = parse_request(CODEX_BODY)
    # Instructions and developer messages are the system text; a user message is not.
    assert request.system == "You are Codex.\n\nSandbox: workspace-write."
    assert [(i.role, i.position) for i in request.items] == [
        ("user", 1),
        ("user", 2),
        ("assistant", 3),
        ("tool", 5),
        ("assistant", 7),
        ("tool", 8),
    ]
    call_reply, patch_reply = request.items[2], request.items[4]
    # The reasoning item belongs to the answer it precedes: one reply with its call.
    assert call_reply.calls == (Call("call_1", "exec_command", {"cmd": "ls"}),)
    assert call_reply.reasoning == (
        {"type": "reasoning", "id": None, "summary": [], "encryptedContent": "gAAAA-1"},
    )
    # A custom tool's call is the call of a custom client tool with its text as `input`.
    assert patch_reply.calls == (
        Call("call_2", "apply_patch", {"input": "*** Begin Patch"}, kind="custom"),
    )
    assert (request.items[5].call_id, request.items[5].content) == ("call_2", "Done!")
    exec_tool, patch = request.tools
    assert (exec_tool.kind, exec_tool.input_schema["properties"]) == (
        "function",
        {"cmd": {"type": "string"}},
    )
    assert (patch.kind, patch.input_schema, patch.custom_format) == (
        "custom",
        CUSTOM_INPUT_SCHEMA,
        APPLY_PATCH["format"],
    )
    assert (
        patch.to_wire()["kind"] == "custom" and patch.to_wire()["format"] == APPLY_PATCH["format"]
    )
    # The schema is one the gateway's schema check takes; a call's text is its one argument.
    assert host_tools.input_schema_problem(patch.input_schema) is None
    assert host_tools.arguments_problem(patch.input_schema, {"input": "*** Begin Patch"}) is None
    assert host_tools.arguments_problem(patch.input_schema, {"input": 3}) is not None
    # The hosted tool is forwarded (to a Responses upstream), its call item in the input not.
    assert request.parameters.hosted_tools == (
        {"type": "web_search", "external_web_access": False},
    )
    assert request.ignored == ("input.web_search_call", "text.verbosity")
    assert request.parameters.reasoning == {"effort": "medium", "summary": "auto"}
    assert request.parameters.tool_choice == ToolChoice(mode="auto")
    assert (request.store, request.include_encrypted_reasoning, request.stream) == (
        False,
        True,
        True,
    )
    assert request.echo["store"] is False and request.echo["tools"] == CODEX_BODY["tools"]


def test_agents_sdk_and_vercel_items_read_the_same_as_the_typed_ones() -> None:
    # The Agents SDK sends easy input messages and resends output items with ids and status;
    # the Vercel AI SDK sends system text as a message and assistant text as output_text.
    request = parse_request(
        {
            "model": "m",
            "input": [
                {"role": "system", "content": "Be brief."},
                {"content": "What is 6 x 7?", "role": "user"},
                {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "42", "annotations": []}],
                },
                {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "And this?"},
                        {
                            "type": "input_image",
                            "image_url": "data:image/png;base64,AAA",
                            "detail": "auto",
                        },
                    ],
                },
            ],
            "max_output_tokens": 300,
            "temperature": 0.5,
            "truncation": "disabled",
            "text": {"format": {"type": "json_schema", "name": "a", "schema": {"type": "object"}}},
        }
    )
    assert request.system == "Be brief."
    assert [(i.role, i.text) for i in request.items] == [
        ("user", "What is 6 x 7?"),
        ("assistant", "42"),
        ("user", "And this?"),
    ]
    assert request.items[2].content[1] == {"type": "image", "mediaType": "image/png", "data": "AAA"}
    parameters = request.parameters
    assert (parameters.max_tokens, parameters.temperature, parameters.truncation) == (
        300,
        0.5,
        "disabled",
    )
    assert parameters.text_format == {
        "type": "json_schema",
        "name": "a",
        "schema": {"type": "object"},
    }
    assert request.ignored == ()


def test_a_string_input_is_one_user_message_and_a_compaction_item_is_kept_apart() -> None:
    assert [(i.role, i.content) for i in parse_request({"input": "hi"}).items] == [("user", "hi")]
    request = parse_request(
        {
            "input": [
                {"role": "user", "content": "Build it."},
                {"type": "compaction", "id": "cmp_1", "encrypted_content": "cpx1.abc.def"},
                {"role": "user", "content": "Now test it."},
            ],
            "previous_response_id": "resp_1",
        }
    )
    assert [i.text for i in request.items] == ["Build it.", "Now test it."]
    assert request.compaction is not None
    assert (request.compaction.token, request.compaction.at) == ("cpx1.abc.def", 1)
    assert request.previous_response_id == "resp_1" and request.echo["previous_response_id"]
    trigger = parse_request(
        {"input": [{"role": "user", "content": "x"}, {"type": "compaction_trigger"}]}
    )
    assert trigger.compaction_trigger and [i.text for i in trigger.items] == ["x"]


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"input": "x", "background": True}, "gateway_parameter_unsupported", "background"),
        ({"input": "x", "tool_choice": "required"}, "gateway_parameter_unsupported", "tool_choice"),
        (
            {"input": "x", "tool_choice": {"type": "allowed_tools", "tools": []}},
            "gateway_parameter_unsupported",
            "tool_choice",
        ),
        (
            {"input": "x", "tool_choice": {"type": "function", "name": "nope"}},
            "invalid_request",
            "tool_choice",
        ),
        (
            {"input": [{"type": "item_reference", "id": "msg_1"}]},
            "gateway_parameter_unsupported",
            "input[0]",
        ),
        (
            {"input": [{"type": "compaction_trigger"}, {"role": "user", "content": "x"}]},
            "invalid_request",
            "input[0]",
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
            "gateway_parameter_unsupported",
            "input[0].content[0]",
        ),
        ({"input": [{"type": "mystery"}]}, "invalid_request", "input[0].type"),
        (
            {"input": [{"type": "compaction", "encrypted_content": ""}]},
            "invalid_request",
            "input[0]",
        ),
        ({"input": "x", "truncation": "sometimes"}, "invalid_request", "truncation"),
        ({"input": []}, "invalid_request", "input"),
        (
            {
                "input": "x",
                "tools": [{"type": "custom", "name": "p", "format": {"type": "regexp"}}],
            },
            "invalid_request",
            "tools[0]",
        ),
    ],
)
def test_requests_the_gateway_cannot_take_are_refused_naming_the_field(body, code, field) -> None:
    with pytest.raises(WireError) as refused:
        parse_request(body)
    assert (refused.value.code, refused.value.details["field"]) == (code, field)


# --------------------------------------------------------------------------- the reply


def _reply(**overrides) -> Reply:
    fields = {
        "id": REPLY_ID,
        "created": 1_767_225_600,
        "model": "gpt-test",
        "text": "Checking the price.",
        "call": Call("call_9", "lookup", {"q": "price"}),
        "finish": "tool_calls",
        "usage": Usage(1200, 40, 1000, 0, 12),
        "reasoning": (REASONING,),
        "completed": 1_767_225_601,
    }
    return Reply(**{**fields, **overrides})


def test_the_reply_is_a_response_object_with_deterministic_item_ids_and_echoes() -> None:
    request = parse_request({**CODEX_BODY, "metadata": {"run": "7"}, "max_output_tokens": 900})
    body = ResponsesWire.render_reply(_reply(), request)
    response = Response.model_validate(body)
    assert (response.id, response.object, response.status, response.error) == (
        REPLY_ID,
        "response",
        "completed",
        None,
    )
    assert [(o.type, o.id) for o in response.output] == [
        ("reasoning", output_item_id(REPLY_ID, "rs_", 0)),
        ("message", output_item_id(REPLY_ID, "msg_", 1)),
        ("function_call", output_item_id(REPLY_ID, "fc_", 2)),
    ]
    assert [o.id[:3] for o in response.output] == ["rs_", "msg", "fc_"]
    reasoning, message, call = body["output"]
    # include asked for it: the encrypted content goes back as the upstream gave it.
    assert reasoning["encrypted_content"] == "gAAAA-opaque"
    assert reasoning["summary"] == REASONING["summary"]
    assert message["content"] == [
        {"type": "output_text", "annotations": [], "text": "Checking the price."}
    ]
    assert (call["call_id"], call["arguments"], call["status"]) == (
        "call_9",
        '{"q":"price"}',
        "completed",
    )
    usage = body["usage"]
    assert usage == {
        "input_tokens": 1200,
        "input_tokens_details": {"cached_tokens": 1000, "cache_write_tokens": 0},
        "output_tokens": 40,
        "output_tokens_details": {"reasoning_tokens": 12},
        "total_tokens": 1240,
    }
    assert (body["created_at"], body["completed_at"]) == (1_767_225_600, 1_767_225_601)
    echoed = {k: body[k] for k in ("instructions", "store", "metadata", "max_output_tokens")}
    assert echoed == {
        "instructions": "You are Codex.",
        "store": False,
        "metadata": {"run": "7"},
        "max_output_tokens": 900,
    }
    assert body["tools"] == CODEX_BODY["tools"] and body["parallel_tool_calls"] is False
    # The same reply renders the same bytes (a stored reply is replayed as it was).
    assert json.dumps(body) == json.dumps(ResponsesWire.render_reply(_reply(), request))


def test_encrypted_reasoning_only_when_include_asks_and_defaults_are_echoed() -> None:
    request = parse_request({"input": "hi"})
    body = render_reply(_reply(), request)
    assert "encrypted_content" not in body["output"][0]
    assert {k: body[k] for k in ("tool_choice", "truncation", "temperature", "store")} == {
        "tool_choice": "auto",
        "truncation": "disabled",
        "temperature": 1.0,
        "store": True,
    }


def test_a_custom_call_is_a_custom_tool_call_item_with_its_text() -> None:
    request = parse_request({"input": "patch it", "tools": [APPLY_PATCH]})
    patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch"
    # Read off the log, a call knows no kind: the request's custom tool says it.
    for call in (
        Call("call_3", "apply_patch", {"input": patch}, kind="custom"),
        Call("call_3", "apply_patch", {"input": patch}),
    ):
        body = render_reply(_reply(text="", call=call, reasoning=()), request)
        (item,) = body["output"]
        assert item == {
            "id": output_item_id(REPLY_ID, "ctc_", 0),
            "type": "custom_tool_call",
            "status": "completed",
            "call_id": "call_3",
            "name": "apply_patch",
            "input": patch,
        }
        Response.model_validate(body)


def test_a_reply_cut_at_the_output_limit_is_incomplete() -> None:
    body = render_reply(_reply(call=None, finish="length"), parse_request({"input": "x"}))
    assert body["status"] == "incomplete"
    assert body["incomplete_details"] == {"reason": "max_output_tokens"}
    assert Response.model_validate(body).incomplete_details.reason == "max_output_tokens"


def test_a_compaction_answer_is_one_compaction_item() -> None:
    body = render_reply(
        _reply(text="", call=None, finish="stop", reasoning=(), compaction="cpx1.a.b"),
        parse_request(
            {"input": [{"role": "user", "content": "x"}, {"type": "compaction_trigger"}]}
        ),
    )
    assert body["output"] == [
        {
            "id": output_item_id(REPLY_ID, "cmp_", 0),
            "type": "compaction",
            "encrypted_content": "cpx1.a.b",
        }
    ]
    assert body["status"] == "completed"
    Response.model_validate(body)


def test_a_reply_round_trips_through_its_stored_json() -> None:
    reply = _reply(
        call=Call("call_3", "apply_patch", {"input": "p"}, kind="custom"),
        message_at=0,
        compaction="cpx1.a.b",
    )
    stored = json.loads(json.dumps(reply.to_json()))
    assert Reply.from_json(stored) == reply
    # A reply of the other wires is stored as it always was: no new keys.
    plain = Reply("r", 1, "m", "t", Call("c", "f", {}), "tool_calls", Usage(1, 2, 0, 0))
    assert set(plain.to_json()) == {"id", "created", "model", "text", "call", "finish", "usage"}
    assert set(plain.to_json()["call"]) == {"id", "name", "arguments"}
    assert set(plain.to_json()["usage"]) == {
        "inputTokens",
        "outputTokens",
        "cacheReadInputTokens",
        "cacheWriteInputTokens",
    }
    assert Reply.from_json(plain.to_json()) == plain


def test_errors_counts_and_models_are_in_openais_words() -> None:
    error = ResponsesWire.error_reply_body(
        404, "previous_response_not_found", "No such response.", {}
    )
    assert error == {
        "error": {
            "message": "No such response.",
            "type": "not_found_error",
            "code": "previous_response_not_found",
            "details": {},
        }
    }
    assert ResponsesWire.token_count(812) == {
        "object": "response.input_tokens",
        "input_tokens": 812,
    }


def test_codex_code_mode_declares_its_tools_in_an_input_item() -> None:
    """Codex's default model sends no `tools`: an `additional_tools` input item holds them, its
    own tools in the default `functions` namespace (client tools), another namespace hosted."""
    request = parse_request(
        {
            "model": "gpt-6.2-sol",
            "input": [
                {
                    "type": "additional_tools",
                    "role": "developer",
                    "tools": [
                        {
                            "type": "namespace",
                            "name": "functions",
                            "tools": [
                                {"type": "custom", "name": "exec", "description": "Run JS."},
                                {"type": "function", "name": "wait", "parameters": {}},
                            ],
                        },
                        {"type": "namespace", "name": "multi_agent_v1", "tools": []},
                    ],
                },
                {"role": "user", "content": "Say hello"},
            ],
        }
    )
    assert [(t.name, t.kind) for t in request.tools] == [("exec", "custom"), ("wait", "function")]
    assert [h["name"] for h in request.parameters.hosted_tools] == ["multi_agent_v1"]
    assert [i.content for i in request.items] == ["Say hello"]
    with pytest.raises(WireError) as refused:
        parse_request({"input": [{"type": "additional_tools", "tools": "exec"}]})
    assert refused.value.details["field"] == "input[0]"


def test_an_output_item_id_names_its_reply() -> None:
    reply_id = "resp_" + "ab" * 16
    for prefix in ("msg_", "fc_", "ctc_", "rs_", "cmp_"):
        assert reply_of_item(output_item_id(reply_id, prefix, 3)) == reply_id
    assert reply_of_item("msg_not-ours") is None
    assert reply_of_item("fco_" + "ab" * 18) is None  # an input item's id, not an output's
