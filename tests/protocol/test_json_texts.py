"""The engine's prebuilt JSON encoders spell every value exactly as `json.dumps` with the
same arguments does (views are byte for byte what they were: tests/protocol/test_view.py)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from contextproto.protocol import json_texts

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_each_spelling_is_its_json_dumps_call(value: Any) -> None:
    assert json_texts.plain(value) == json.dumps(value, ensure_ascii=False)
    assert json_texts.compact(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert json_texts.canonical(value) == json.dumps(value, sort_keys=True, ensure_ascii=False)
    assert json_texts.canonical_compact(value) == json.dumps(
        value, sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    assert json_texts.canonical_any(value) == json.dumps(
        value, sort_keys=True, ensure_ascii=False, default=str
    )


def test_the_lenient_spelling_turns_what_json_cannot_say_into_text() -> None:
    value = {"b": frozenset({3}), "a": "Zürich"}
    assert json_texts.canonical_any(value) == '{"a": "Zürich", "b": "frozenset({3})"}'
