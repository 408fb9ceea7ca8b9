"""Responses API streams and endpoints read by the official SDK (contract §21): the stream
helper ends with the same response as the reply without streaming, in the order it requires;
`retrieve`, `compact`, `input_items.list` and `input_tokens.count` parse what the wire gives."""

from __future__ import annotations

import pytest
from openai.types.responses import CompactedResponse, Response, ResponseFailedEvent

from contextproto.protocol.catalog import PROTOCOL_TOOL_NAMES
from contextproto.protocol.gateway.responses_render import (
    compacted_response,
    input_items_page,
    render_reply,
)
from contextproto.protocol.gateway.responses_wire import ResponsesWire, parse_request
from contextproto.protocol.gateway.transcript import Call, Item, reply_of
from contextproto.protocol.gateway.wire import Reply, Usage, WireError
from contextproto.protocol.messages import RawMessage
from tests.protocol.responses_client import (
    accumulate,
    client,
    events,
    json_answer,
    parsed,
    sse_answer,
)

REPLY_ID = "resp_" + "fedcba9876543210" * 2
FIRST = {
    "type": "reasoning",
    "id": "rs_a",
    "summary": [{"type": "summary_text", "text": "Plan."}, {"type": "summary_text", "text": "Go."}],
    "encryptedContent": "E1",
}
LATER = {"type": "reasoning", "id": "rs_b", "summary": [], "encryptedContent": "E2"}
CREATE = {
    "model": "helper@1",
    "input": "What does it cost?",
    "include": ["reasoning.encrypted_content"],
    "tools": [
        {"type": "function", "name": "lookup", "parameters": {"type": "object"}},
        {"type": "custom", "name": "apply_patch"},
    ],
}
REQUEST = {**CREATE, "stream": True}


def _reply(**overrides) -> Reply:
    fields = {
        "id": REPLY_ID,
        "created": 1_767_225_600,
        "model": "gpt-test",
        "text": "Let me check.\n\nIt costs 9000.",
        "call": None,
        "finish": "stop",
        "usage": Usage(900, 30, 512, 0, 7),
        "reasoning": (FIRST, LATER),
        "completed": 1_767_225_603,
    }
    return Reply(**{**fields, **overrides})


# How the turn loop feeds an encoder: (reasoning before the text, text deltas, reasoning
# arriving after the text began), then the reply.
SCENARIOS = {
    "reasoning first": (
        [FIRST, LATER],
        ["Let me ", "check.\n\nIt costs 9000."],
        [],
        _reply(),
    ),
    "a later answer's reasoning after the text": (
        [FIRST],
        ["Let me check.", "\n\n", "It costs 9000."],
        [LATER],
        _reply(),
    ),
    "a function call": (
        [FIRST],
        ["Let me check."],
        [LATER],
        _reply(
            text="Let me check.",
            call=Call("call_1", "lookup", {"q": "€ price"}),
            finish="tool_calls",
        ),
    ),
    "a custom call, no text": (
        [],
        [],
        [],
        _reply(
            text="",
            reasoning=(),
            call=Call("call_2", "apply_patch", {"input": "*** Begin Patch"}, kind="custom"),
            finish="tool_calls",
        ),
    ),
    "text the stream was not shown": ([], [], [], _reply(reasoning=())),
    "nothing shown, the log's order": ([], [], [], _reply(message_at=1)),
    "reasoning the stream was not shown": ([], ["Let me check.\n\nIt costs 9000."], [], _reply()),
    "a compaction answer": ([], [], [], _reply(text="", reasoning=(), compaction="cpx1.a.b")),
}


def _stream(scenario: str) -> tuple[str, Reply]:
    before, deltas, after, reply = SCENARIOS[scenario]
    request = parse_request(REQUEST)
    encoder = ResponsesWire.encoder(
        request, reply_id=REPLY_ID, created=reply.created, model="gpt-test"
    )
    text = encoder.start(Usage(900))
    for part in before:
        text += encoder.reasoning(part)
    for n, delta in enumerate(deltas):
        text += encoder.text(delta)
        if n == 0:
            for part in after:
                text += encoder.reasoning(part)
    final = encoder.final(reply)
    text += encoder.keepalive() + encoder.finish(final)
    return text, final


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_sdks_stream_helper_ends_with_the_response_the_reply_renders(scenario: str) -> None:
    text, final = _stream(scenario)
    request = parse_request(REQUEST)
    with client(sse_answer(text)).responses.stream(**CREATE) as stream:
        streamed = list(stream)
        response = stream.get_final_response()
    assert response.to_dict() == parsed(render_reply(final, request))
    # What a client that keeps each item as it is done (Codex) holds is that same output, each
    # item at its place, and the text deltas add up to the message's text.
    expected = Response.model_validate(render_reply(final, request)).output
    done = [e for e in streamed if e.type == "response.output_item.done"]
    assert [e.output_index for e in done] == list(range(len(expected)))
    assert [e.item.to_dict() for e in done] == [item.to_dict() for item in expected]
    deltas = "".join(e.delta for e in streamed if e.type == "response.output_text.delta")
    assert deltas == final.text
    # Every event carries its type and a sequence number that only grows.
    numbers = [data["sequence_number"] for _, data in events(text)]
    assert numbers == list(range(len(numbers)))
    assert all(name == data["type"] for name, data in events(text))
    assert [e.type for e in streamed][:2] == ["response.created", "response.in_progress"]
    assert streamed[-1].type == "response.completed"
    # The created event already names the response the completed one carries.
    assert streamed[0].response.id == response.id == REPLY_ID
    # And it is what a client that asked without streaming gets.
    whole = client(json_answer(render_reply(final, request))).responses.create(**CREATE)
    assert parsed(whole.to_dict()) == response.to_dict()


def test_text_streams_before_the_reply_is_complete_and_items_go_out_one_at_a_time() -> None:
    text, _final = _stream("a later answer's reasoning after the text")
    names = [name for name, _ in events(text)]
    first_delta = names.index("response.output_text.delta")
    assert names[:first_delta] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",  # the first reasoning item, whole
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.output_item.added",  # the message
        "response.content_part.added",
    ]
    # Between an item's added and done no other item opens.
    open_item = None
    for name, data in events(text):
        if name == "response.output_item.added":
            assert open_item is None
            open_item = data["output_index"]
        elif name == "response.output_item.done":
            assert data["output_index"] == open_item
            open_item = None


def test_the_reasoning_that_followed_the_text_stays_after_the_message_when_stored() -> None:
    _text, final = _stream("a later answer's reasoning after the text")
    assert final.message_at == 1
    output = render_reply(final, parse_request(REQUEST))["output"]
    assert [(o["type"], o.get("encrypted_content")) for o in output] == [
        ("reasoning", "E1"),
        ("message", None),
        ("reasoning", "E2"),
    ]
    # Replayed as one stream, a stored reply gives the same events.
    request = parse_request(REQUEST)
    replay = ResponsesWire.encoder(
        request, reply_id=REPLY_ID, created=final.created, model="gpt-test"
    )
    state, _fired = accumulate(replay.whole(Reply.from_json(final.to_json())))
    assert state._completed_response.to_dict() == parsed(render_reply(final, request))


def test_a_reply_cut_at_its_limit_ends_with_response_incomplete() -> None:
    request = parse_request(REQUEST)
    reply = _reply(finish="length")
    encoder = ResponsesWire.encoder(request, reply_id=REPLY_ID, created=reply.created, model="m")
    _state, fired = accumulate(encoder.whole(reply))
    assert fired[-1].type == "response.incomplete"
    assert (
        fired[-1].response.to_dict()
        == Response.model_validate(render_reply(reply, request)).to_dict()
    )


def test_a_failure_after_the_start_is_response_failed_with_the_error() -> None:
    request = parse_request(REQUEST)
    encoder = ResponsesWire.encoder(request, reply_id=REPLY_ID, created=1, model="m")
    text = (
        encoder.start(Usage())
        + encoder.text("Part")
        + encoder.error(
            502, "gateway_upstream_failed", "openai (gpt-test) failed to answer (HTTP 500).", {}
        )
    )
    with client(sse_answer(text)).responses.stream(**CREATE) as stream:
        streamed = list(stream)
        with pytest.raises(RuntimeError, match=r"response\.completed"):
            stream.get_final_response()
    failed = streamed[-1]
    assert isinstance(failed, ResponseFailedEvent)
    assert failed.response.status == "failed" and failed.response.id == REPLY_ID
    assert failed.response.error.code == "gateway_upstream_failed"
    assert failed.response.error.message.startswith("openai (gpt-test)")


# --------------------------------------------------------------------------- the endpoints


def test_retrieve_parses_a_stored_response() -> None:
    body = render_reply(_reply(), parse_request(REQUEST))
    retrieved = client(json_answer(body)).responses.retrieve(REPLY_ID)
    assert retrieved.to_dict() == Response.model_validate(body).to_dict()
    assert retrieved.output_text == "Let me check.\n\nIt costs 9000."


def test_compact_answers_the_users_messages_and_one_compaction_item() -> None:
    request = parse_request(
        {
            "input": [
                {"role": "user", "content": "Build it."},
                {"role": "assistant", "content": "Built."},
                {"role": "user", "content": [{"type": "input_text", "text": "Test it."}]},
            ]
        }
    )
    body = compacted_response(
        reply_id=REPLY_ID, created=5, request=request, token="cpx1.a.b", input_tokens=44
    )
    compacted = client(json_answer(body)).responses.compact(model="helper@1", input="x")
    assert isinstance(compacted, CompactedResponse) and compacted.object == "response.compaction"
    assert [o.type for o in compacted.output] == ["message", "message", "compaction"]
    assert [o.content[0].text for o in compacted.output[:2]] == ["Build it.", "Test it."]
    assert compacted.output[2].encrypted_content == "cpx1.a.b"
    assert (compacted.usage.output_tokens, compacted.usage.input_tokens) == (0, 44)


TRANSCRIPT = [
    Item(role="user", content="Patch a.txt", position=1),
    Item(
        role="assistant",
        content="On it.",
        calls=(Call("call_1", "apply_patch", {"input": "*** Begin Patch"}, kind="custom"),),
        position=2,
        reasoning=(FIRST,),
    ),
    Item(role="tool", content="Done!", call_id="call_1", position=3),
    Item(role="assistant", content="Patched.", position=4),
    Item(role="user", content=[{"type": "text", "text": "Now run it."}], position=5),
]


def test_input_items_list_pages_through_the_transcript_in_either_order() -> None:
    whole = input_items_page(TRANSCRIPT, scope="session-1", order="asc", limit=100)
    assert [(d["type"], d.get("role")) for d in whole["data"]] == [
        ("message", "user"),
        ("reasoning", None),
        ("message", "assistant"),
        ("custom_tool_call", None),
        ("custom_tool_call_output", None),
        ("message", "assistant"),
        ("message", "user"),
    ]
    assert "encrypted_content" not in whole["data"][1]
    ids = [d["id"] for d in whole["data"]]
    assert len(set(ids)) == len(ids)
    # The SDK pages with `after` until has_more is false; default order is newest first.
    pages: list[dict] = []

    def answer(request):
        after = request.url.params.get("after")
        page = input_items_page(TRANSCRIPT, scope="session-1", limit=3, after=after)
        pages.append(page)
        return json_answer(page)(request)

    listed = list(client(answer).responses.input_items.list(REPLY_ID, limit=3))
    assert [item.id for item in listed] == ids[::-1]
    assert [len(p["data"]) for p in pages] == [3, 3, 1]
    # Ids depend on the session and the log, not on the list: a later list shows the same.
    longer = input_items_page(
        [*TRANSCRIPT, Item(role="assistant", content="Ran.", position=6)],
        scope="session-1",
        order="asc",
    )
    assert [d["id"] for d in longer["data"]][:7] == ids
    with pytest.raises(WireError):
        input_items_page(TRANSCRIPT, scope="session-1", after="msg_unknown")
    with pytest.raises(WireError):
        input_items_page(TRANSCRIPT, scope="session-1", limit=0)


def test_input_tokens_count_parses_the_token_count() -> None:
    counted = client(json_answer(ResponsesWire.token_count(812))).responses.input_tokens.count(
        model="helper@1", input="hi"
    )
    assert counted.input_tokens == 812 and counted.object == "response.input_tokens"


def test_a_reply_read_off_the_log_is_the_object_its_stream_ended_with() -> None:
    # A request whose first answer reasoned, wrote text and called a protocol tool, and whose
    # second answer reasoned and wrote text: the turn loop streams each answer's reasoning,
    # then its text; the reply the pipeline stores is read off the log.
    log = [
        RawMessage(id="m1", index=1, window_id="main", role="user", kind="input", content="q"),
        RawMessage(
            id="m2",
            index=2,
            window_id="main",
            role="assistant",
            kind="tool_call",
            content=[FIRST, {"type": "text", "text": "Let me check."}],
            tool_call_id="p1",
            tool_name="context_task_memory_set",
            arguments={},
            snapshot_id="s",
        ),
        RawMessage(
            id="m3",
            index=3,
            window_id="main",
            role="tool",
            kind="tool_result",
            content="{}",
            tool_call_id="p1",
            tool_name="context_task_memory_set",
            snapshot_id="s",
        ),
        RawMessage(
            id="m4",
            index=4,
            window_id="main",
            role="assistant",
            kind="text",
            content=[LATER, {"type": "text", "text": "It costs 9000."}],
            snapshot_id="s",
        ),
    ]
    item = reply_of(log[1:], PROTOCOL_TOOL_NAMES, {"p1"})
    assert item is not None and item.message_at == 1
    stored = _reply(reasoning=item.reasoning, message_at=item.message_at)
    request = parse_request(REQUEST)
    encoder = ResponsesWire.encoder(request, reply_id=REPLY_ID, created=1, model="gpt-test")
    text = encoder.start(Usage()) + encoder.reasoning(FIRST) + encoder.text("Let me check.")
    text += encoder.text("\n\n") + encoder.reasoning(LATER) + encoder.text("It costs 9000.")
    assert encoder.final(stored) == stored
    state, _fired = accumulate(text + encoder.finish(stored))
    assert state._completed_response.to_dict() == parsed(render_reply(stored, request))
    assert [o.type for o in state._completed_response.output] == [
        "reasoning",
        "message",
        "reasoning",
    ]
