"""The snapshot body codec decodes exactly what it encoded, byte for byte (issue 33).

Property tests over random sequences of views shaped like a session's (a system prompt,
a header, a history that grows, folds that replace stretches of it, a state message that
changes every turn, cache markers that move, requests in the three wire formats, text that
is not ASCII), encoded the way the writer does it: a keyframe, then deltas each against the
body before it (or against any earlier one: concurrent turns pick the same base), a keyframe
every K bodies. No database.
"""

from __future__ import annotations

import hashlib
import json
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessions_app.store import body_codec as codec

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6), st.dictionaries(st.text(max_size=8), inner, max_size=6)
    ),
    max_leaves=40,
)
TEXT = st.text(max_size=600)


def _message(index: int, text: str) -> dict:
    return {
        "role": "tool" if index % 3 == 2 else "assistant" if index % 3 == 1 else "user",
        "kind": "tool_result" if index % 3 == 2 else "text",
        "content": text,
        "toolCallId": f"call-{index}" if index % 3 == 2 else None,
    }


def _source(index: int) -> dict:
    return {
        "derivedType": "raw",
        "foldId": None,
        "sessionId": "s",
        "windowId": "main",
        "firstIndex": index,
        "lastIndex": index,
        "messageIds": [f"m{index}"],
    }


def _body(history: list[dict], state: str, marker: int, fmt: str, extra: object) -> dict:
    messages = [{"role": "system", "kind": "system", "content": "You are ünïcode ✓."}]
    messages += history
    messages.append({"role": "assistant", "kind": "context_state", "content": state})
    sources = [_source(i) for i in range(len(messages))]
    if fmt == "anthropic-messages":
        blocks = [
            {"role": m["role"], "content": [{"type": "text", "text": m["content"]}]}
            for m in messages[1:]
        ]
        if blocks and 0 <= marker < len(blocks):
            blocks[marker]["content"][0]["cache_control"] = {"type": "ephemeral"}
        request = {"system": [{"type": "text", "text": "sys"}], "messages": blocks}
    elif fmt == "openai-chat":
        request = {
            "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
            "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {}}}],
            "parallel_tool_calls": False,
            "prompt_cache_key": "s",
        }
    else:
        request = {"messages": messages}
    request["extra"] = extra
    return {"messages": messages, "sources": sources, "request": request}


STEP = st.tuples(
    st.sampled_from(["append", "append", "append", "fold", "edit", "drop", "state"]),
    TEXT,
    st.integers(min_value=0, max_value=50),
)


@st.composite
def sessions(draw: st.DrawFn) -> list[dict]:
    fmt = draw(st.sampled_from(["neutral", "openai-chat", "anthropic-messages"]))
    history: list[dict] = []
    bodies = []
    for number, (op, text, at) in enumerate(draw(st.lists(STEP, min_size=1, max_size=25))):
        if op == "append" or not history:
            history.append(_message(len(history), text))
        elif op == "fold":
            start = at % len(history)
            history[start : start + 3] = [
                {"role": "assistant", "kind": "context_fold", "content": f"fold: {text}"}
            ]
        elif op == "edit":
            history[at % len(history)] = _message(at, text)
        elif op == "drop":
            del history[at % len(history)]
        body = _body(
            list(history),
            json.dumps({"turn": number, "note": text[:20]}, ensure_ascii=False),
            len(history) - 1 - at % 3,
            fmt,
            draw(JSON),
        )
        bodies.append(body)
    return bodies


def _exact(body: dict, tokens: list[str]) -> None:
    text = codec.join(tokens)
    assert text == json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    assert json.loads(text) == body


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=JSON)
def test_tokens_join_to_the_one_serialization_of_any_json(body):
    tokens = codec.tokenize(body)
    assert codec.join(tokens) == codec.body_text(body)
    assert codec.decode_key(codec.encode_key(tokens)) == tokens
    assert codec.key_text(codec.encode_key(tokens)) == codec.body_text(body)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=JSON, request=JSON)
def test_a_body_and_its_request_are_serialized_once_as_each_would_be_alone(body, request):
    for whole in ({"messages": body, "sources": [], "request": request}, {"request": request}):
        assert codec.body_texts(whole) == (codec.body_text(whole), codec.body_text(request))
    assert codec.body_texts(body)[0] == codec.body_text(body)


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet='ab{}[],"', max_size=60))
def test_any_text_is_cut_into_non_empty_tokens_that_join_to_it(text):
    tokens = codec.cut(text)
    assert codec.join(tokens) == text
    assert all(tokens)
    assert all(t.endswith(("},", "],")) for t in tokens[:-1])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies=sessions(), interval=st.integers(min_value=1, max_value=6), data=st.data())
def test_every_body_of_a_delta_chain_decodes_exactly(bodies, interval, data):
    stored: list[tuple[str, bytes, int | None]] = []  # (encoding, data, base position)
    depth: list[int] = []
    for position, body in enumerate(bodies):
        tokens = codec.tokenize(body)
        key = codec.encode_key(tokens)
        # The newest earlier body, or (a concurrent turn) any earlier one.
        base = None
        if position:
            base = data.draw(st.sampled_from([position - 1, *range(position)]))
        if base is not None and depth[base] + 1 < interval:
            delta = codec.encode_delta(codec.tokenize(bodies[base]), tokens)
            if len(delta) < len(key):
                stored.append((codec.DELTA, delta, base))
                depth.append(depth[base] + 1)
                continue
        stored.append((codec.KEY, key, None))
        depth.append(0)
    decoded: dict[int, list[str]] = {}

    def tokens_of(position: int) -> list[str]:
        if position not in decoded:
            encoding, payload, base = stored[position]
            if encoding == codec.KEY:
                decoded[position] = codec.decode_key(payload)
            else:
                assert base is not None
                decoded[position] = codec.decode_delta(tokens_of(base), payload)
        return decoded[position]

    for position, body in enumerate(bodies):
        _exact(body, tokens_of(position))
        assert depth[position] < interval


def test_a_delta_of_a_growing_view_is_much_smaller_than_its_keyframe():
    # Text that does not compress away (a keyframe holds all of it, a delta one message).
    history = [
        _message(i, " ".join(hashlib.sha256(f"{i}-{k}".encode()).hexdigest() for k in range(8)))
        for i in range(60)
    ]
    before = _body(history, "state 1", 58, "anthropic-messages", None)
    after = _body([*history, _message(60, "new")], "state 2", 59, "anthropic-messages", None)
    key = codec.encode_key(codec.tokenize(after))
    delta = codec.encode_delta(codec.tokenize(before), codec.tokenize(after))
    assert len(delta) * 10 < len(key)
    _exact(after, codec.decode_delta(codec.tokenize(before), delta))


def test_a_body_equal_to_its_base_is_a_delta_of_copies_only():
    body = {"messages": [{"content": "x" * 400}, {"content": "y" * 400}], "request": {}}
    tokens = codec.tokenize(body)
    assert codec.decode_delta(tokens, codec.encode_delta(tokens, tokens)) == tokens
    empty = codec.tokenize({})
    assert codec.decode_delta(tokens, codec.encode_delta(tokens, empty)) == empty
    assert codec.decode_delta(empty, codec.encode_delta(empty, tokens)) == tokens


def test_an_old_body_is_zlib_of_its_text_and_reads_as_such():
    body = {"messages": [{"content": "ü"}], "sources": [], "request": {"a": 1.5}}
    stored = zlib.compress(codec.body_text(body).encode(), 1)  # as written before issue 33
    assert json.loads(codec.legacy_text(stored)) == body
    assert codec.legacy_encode(codec.body_text(body).encode()) == stored


def test_a_delta_given_the_wrong_base_or_corrupt_bytes_is_refused_not_misread():
    base = codec.tokenize({"messages": [{"content": "x" * 500}, {"content": "y" * 500}]})
    other = codec.tokenize({"messages": [{"content": "z" * 5}]})
    delta = codec.encode_delta(base, codec.tokenize({"messages": [{"content": "x" * 500}]}))
    with pytest.raises(codec.CodecError):
        codec.decode_delta(other, delta)
    with pytest.raises(codec.CodecError):
        codec.decode_key(b"\x05\x00\x00\x00abc")
