"""The one token estimator gives each caller the figures its own estimator gave before."""

from __future__ import annotations

import json
import math

from hypothesis import given
from hypothesis import strategies as st

from contextproto.protocol.messages import RawMessage
from contextproto.protocol.tokens import (
    canonical_json,
    chars_tokens,
    json_tokens,
    message_tokens,
    text_tokens,
)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(st.text())
def test_text_tokens_is_characters_over_four_rounded_up(text):
    # providers/base.py's estimator as it was written (base's name for it is this one).
    assert text_tokens(text) == math.ceil(len(text) / 4)


@given(JSON)
def test_json_tokens_is_the_old_view_estimator(value):
    # protocol/projection.py's `estimated_tokens` and providers/base.py's
    # `estimate_tokens(canonical_json(x))`, as they were written.
    old = math.ceil(len(json.dumps(value, sort_keys=True, ensure_ascii=False)) / 4)
    assert json_tokens(value) == old
    assert canonical_json(value) == json.dumps(value, sort_keys=True, ensure_ascii=False)


def test_the_two_json_spellings_count_differently_and_each_caller_keeps_its_own():
    arguments = {"q": "x", "n": [1, 2]}
    call = RawMessage(
        id="c", index=1, window_id="main", role="assistant", kind="tool_call", content="",
        tool_name="search", arguments=arguments,
    )  # fmt: skip
    # The planner counts the name and the compact arguments: 6 + 20 characters.
    assert message_tokens(call) == chars_tokens(len("search") + len('{"n":[1,2],"q":"x"}'))
    assert message_tokens(call) == 7
    # A view counts its wire JSON, with json.dumps' spaces: 24 characters here.
    assert json_tokens(arguments) == 6


def test_message_tokens_counts_images_apart():
    parts = [
        {"type": "text", "text": "abcde"},
        {"type": "image", "mediaType": "image/png", "data": "A" * 400},
        {"type": "text", "text": {"odd": 1}},
    ]
    message = RawMessage(id="i", index=1, window_id="main", role="user", kind="input",
                         content=parts)  # fmt: skip
    assert message_tokens(message) == chars_tokens(5 + len('{"odd":1}')) + 256
