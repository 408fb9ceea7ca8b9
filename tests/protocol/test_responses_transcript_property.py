"""One conversation, three client APIs, one transcript (contract §14, §21; issue 39's "same log",
engine half): a conversation sent as Responses items, as Chat Completions messages or as
Anthropic messages reads onto the same transcript items, key for key, so reconciliation finds
the same new messages and the gateway writes the same log whichever API the client speaks.

The gateway's replies are what each client got back and resends: the reply rendered by that
API's own wire (Responses `output` items, reasoning included; a Chat `message`; an Anthropic
`content`), which must read back as the reply the transcript holds, kind of call aside.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextproto.protocol.gateway import anthropic_wire, openai_wire, responses_wire
from contextproto.protocol.gateway.responses_render import render_reply
from contextproto.protocol.gateway.transcript import Call, Item
from contextproto.protocol.gateway.wire import Reply

SAMPLES = ("plain", "Zürich €", 'say "hi" {x}', "back\\slash\nnew line", "🙂 ok", "")
TEXT = st.sampled_from(SAMPLES)
IMAGE = "iVBORw0KGgo="
SYSTEM = "You are helpful."


@dataclass(frozen=True)
class User:
    text: str
    image: bool


@dataclass(frozen=True)
class Answer:
    text: str
    call: Call | None
    reasoning: int  # how many reasoning items the Responses client holds before it


@dataclass(frozen=True)
class Result:
    call_id: str
    text: str


Turn = User | Answer | Result


@st.composite
def conversations(draw: st.DrawFn) -> list[Turn]:
    """A user message first; replies with text, a function or a custom call; a call's result
    right after it; a user message only when no call waits."""
    turns: list[Turn] = [User(draw(TEXT) or "start", draw(st.booleans()))]
    for n in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["text", "function", "custom"]))
        call: Call | None = None
        if kind == "function":
            arguments = {"q": draw(TEXT), "n": draw(st.integers(-5, 5)), "deep": {"a": [1.0]}}
            call = Call(f"call_{n}", "lookup", arguments)
        elif kind == "custom":
            call = Call(f"call_{n}", "apply_patch", {"input": draw(TEXT)}, kind="custom")
        text = draw(TEXT) if call else draw(TEXT) or "an answer"
        turns.append(Answer(text, call, draw(st.integers(0, 2))))
        if call is not None:
            turns.append(Result(call.id, draw(TEXT)))
        if draw(st.booleans()) or call is None:
            turns.append(User(draw(TEXT) or "next", draw(st.booleans())))
    if isinstance(turns[-1], Answer):
        turns.append(User("and?", False))
    return turns


def _reply(answer: Answer, n: int) -> Reply:
    reasoning = tuple(
        {"type": "reasoning", "id": f"rs_{n}_{r}", "summary": [], "encryptedContent": f"E{r}"}
        for r in range(answer.reasoning)
    )
    finish = "tool_calls" if answer.call else "stop"
    return Reply(f"resp_{n:032x}", 1, "m", answer.text, answer.call, finish, reasoning=reasoning)


def as_responses(turns: list[Turn], start: int = 0) -> dict[str, Any]:
    """The conversation from turn `start` on (what a client sends with previous_response_id)."""
    items: list[dict[str, Any]] = [{"role": "developer", "content": SYSTEM}]
    for n, turn in enumerate(turns):
        if n < start:
            continue
        if isinstance(turn, User):
            content: list[dict[str, Any]] = [{"type": "input_text", "text": turn.text}]
            if turn.image:
                url = f"data:image/png;base64,{IMAGE}"
                content.append({"type": "input_image", "image_url": url, "detail": "auto"})
            items.append({"type": "message", "role": "user", "content": content})
        elif isinstance(turn, Answer):
            request = responses_wire.parse_request(
                {"input": "x", "include": ["reasoning.encrypted_content"]}
            )
            items.extend(render_reply(_reply(turn, n), request)["output"])
        else:
            kind = "custom_tool_call_output" if _custom(turns, turn) else "function_call_output"
            items.append({"type": kind, "call_id": turn.call_id, "output": turn.text})
    return {"model": "m", "input": items}


def as_chat(turns: list[Turn]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for n, turn in enumerate(turns):
        if isinstance(turn, User):
            parts: list[dict[str, Any]] = [{"type": "text", "text": turn.text}]
            if turn.image:
                url = f"data:image/png;base64,{IMAGE}"
                parts.append({"type": "image_url", "image_url": {"url": url}})
            messages.append({"role": "user", "content": parts if turn.image else turn.text})
        elif isinstance(turn, Answer):
            message = openai_wire.render_reply(_reply(turn, n))["choices"][0]["message"]
            messages.append({k: v for k, v in message.items() if k != "refusal"})
        else:
            messages.append({"role": "tool", "tool_call_id": turn.call_id, "content": turn.text})
    return {"model": "m", "messages": messages}


def as_anthropic(turns: list[Turn]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for n, turn in enumerate(turns):
        if isinstance(turn, User):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": turn.text}]
            if turn.image:
                source = {"type": "base64", "media_type": "image/png", "data": IMAGE}
                blocks.append({"type": "image", "source": source})
            messages.append({"role": "user", "content": blocks})
        elif isinstance(turn, Answer):
            content = anthropic_wire.render_reply(_reply(turn, n))["content"]
            messages.append({"role": "assistant", "content": content})
        else:
            result = {"type": "tool_result", "tool_use_id": turn.call_id, "content": turn.text}
            messages.append({"role": "user", "content": [result]})
    return {"model": "m", "system": SYSTEM, "messages": messages}


def _custom(turns: list[Turn], result: Result) -> bool:
    return any(
        isinstance(t, Answer) and t.call is not None and t.call.id == result.call_id
        and t.call.kind == "custom"
        for t in turns
    )  # fmt: skip


def keys(items: tuple[Item, ...]) -> list[Any]:
    return [item.key for item in items]


@settings(max_examples=200, deadline=None)
@given(conversations())
def test_every_client_api_reads_the_conversation_onto_the_same_transcript(turns) -> None:
    responses = responses_wire.parse_request(as_responses(turns))
    chat = openai_wire.parse_request(as_chat(turns))
    anthropic = anthropic_wire.parse_request(as_anthropic(turns))
    assert keys(responses.items) == keys(chat.items) == keys(anthropic.items)
    assert responses.system == chat.system == anthropic.system == SYSTEM
    # One item per turn: a reply's reasoning, text and call are one item on every API.
    assert len(responses.items) == len(turns)
    # A reply keeps the reasoning the Responses client sent back with it, by id, and its
    # call's kind; the other APIs know function calls only.
    for n, (turn, item) in enumerate(zip(turns, responses.items, strict=True)):
        if isinstance(turn, Answer):
            ids = [f"rs_{n:032x}{r:04x}" for r in range(turn.reasoning)]
            assert [r["id"] for r in item.reasoning] == ids
            assert [c.kind for c in item.calls] == ([turn.call.kind] if turn.call else [])


@settings(max_examples=100, deadline=None)
@given(conversations(), st.data())
def test_a_client_that_sends_only_the_new_items_reads_the_tail_of_the_whole(turns, data) -> None:
    # `previous_response_id` + new items: they read as the tail of the whole conversation.
    start = data.draw(st.integers(0, len(turns) - 1))
    whole = responses_wire.parse_request(as_responses(turns))
    body = as_responses(turns, start)
    tail = responses_wire.parse_request(body)
    assert keys(tail.items) == keys(whole.items)[start:]
    # Positions name the item in the request's own input (where a refusal points).
    kinds = [body["input"][item.position].get("type", "message") for item in tail.items]
    assert all(kind != "developer" for kind in kinds)
    assert json.dumps(kinds)
