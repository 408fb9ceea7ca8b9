"""Fold raw text and its UTF-16 slicing (contract §5, context_fold_read)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextproto.protocol.foldtext import (
    FOLD_READ_SLICE_UNITS,
    CursorError,
    read_slice,
    render_fold_text,
    utf16_len,
    utf16_slice,
)
from tests.protocol.logbuilder import LogBuilder


def _slices(text: str, max_units: int = FOLD_READ_SLICE_UNITS) -> list[tuple[int, str]]:
    """Read `text` from cursor 0 to the end; return (cursor, slice) pairs."""
    out: list[tuple[int, str]] = []
    cursor: int | None = 0
    while cursor is not None:
        piece, next_cursor = utf16_slice(text, cursor, max_units)
        out.append((cursor, piece))
        assert next_cursor is None or next_cursor > cursor, "a read must make progress"
        cursor = next_cursor
    return out


def _assert_whole(text: str, max_units: int = FOLD_READ_SLICE_UNITS) -> None:
    slices = _slices(text, max_units)
    for _, piece in slices:
        assert utf16_len(piece) <= max_units
        if piece:
            # A split pair would leave a lone surrogate at an edge of the slice.
            assert not 0xDC00 <= ord(piece[0]) <= 0xDFFF
            assert not 0xD800 <= ord(piece[-1]) <= 0xDBFF
        piece.encode("utf-8")  # strict: fails on any lone surrogate
    assert "".join(piece for _, piece in slices) == text
    last_cursor, last_piece = slices[-1]
    assert last_cursor + utf16_len(last_piece) == utf16_len(text)


def test_utf16_length_counts_astral_characters_twice() -> None:
    assert utf16_len("") == 0
    assert utf16_len("abc") == 3
    assert utf16_len("漢字") == 2
    assert utf16_len("😀") == 2
    assert utf16_len("a😀漢") == 4


def test_render_is_compact_sorted_json_in_index_order_with_non_ascii_kept() -> None:
    log = LogBuilder()
    log.text("😀 漢字")
    call = log.call("search", {"q": "ünïcode"})
    log.result(call, "done")
    messages = list(reversed(log.messages))
    text = render_fold_text(messages)
    assert "😀 漢字" in text and "ünïcode" in text
    assert ", " not in text and ": " not in text
    decoded = json.loads(text)
    assert [m["index"] for m in decoded] == [1, 2, 3]
    assert list(decoded[0]) == sorted(decoded[0])
    assert decoded[1] == log.at(2).to_wire()


def test_a_limit_falling_inside_a_pair_ends_the_slice_one_unit_earlier() -> None:
    text = "a" * (FOLD_READ_SLICE_UNITS - 1) + "😀" + "b"
    first = read_slice(text, 0)
    assert first.text == "a" * (FOLD_READ_SLICE_UNITS - 1)
    assert first.next_cursor == FOLD_READ_SLICE_UNITS - 1
    second = read_slice(text, first.next_cursor)
    assert second.text == "😀b"
    assert second.next_cursor is None
    assert second.total_length == FOLD_READ_SLICE_UNITS + 2


def test_a_slice_ending_exactly_after_a_pair_keeps_it() -> None:
    text = "a" * (FOLD_READ_SLICE_UNITS - 2) + "😀" + "tail"
    assert read_slice(text, 0).text.endswith("😀")
    assert read_slice(text, 0).next_cursor == FOLD_READ_SLICE_UNITS


def test_long_emoji_and_cjk_text_reads_back_whole_in_bounded_slices() -> None:
    # Offsets of the pairs shift by one per block, so the 12000-unit limit lands both
    # between and inside pairs across the reads.
    block = "漢字かな" + "😀" * 7 + "x" + "𠜎" * 3 + "末"
    text = block * 2500
    assert utf16_len(text) > 5 * FOLD_READ_SLICE_UNITS
    _assert_whole(text)
    piece = read_slice(text, 0)
    assert piece.total_length == utf16_len(text)


def test_cursor_on_the_low_half_of_a_pair_is_refused() -> None:
    with pytest.raises(CursorError):
        read_slice("a😀b", 2)


def test_cursor_outside_the_text_is_refused() -> None:
    with pytest.raises(CursorError):
        read_slice("abc", 4)
    with pytest.raises(CursorError):
        read_slice("abc", -1)


def test_cursor_at_the_end_gives_an_empty_last_slice() -> None:
    assert utf16_slice("a😀", 3) == ("", None)
    assert utf16_slice("", 0) == ("", None)


def test_a_limit_below_two_units_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        read_slice("😀", 0, 1)


def test_lone_surrogates_read_back_unchanged() -> None:
    # PostgreSQL would refuse them, but a Python str can hold them; they must not crash.
    text = "a\ud800b\udc00c"
    assert utf16_len(text) == 5
    slices = _slices(text, 2)
    assert "".join(piece for _, piece in slices) == text


_ALPHABET = st.sampled_from(["a", "b", " ", "é", "漢", "字", "😀", "𠜎", "🎉", '"', "\\", "\n"])


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=_ALPHABET, max_size=200), max_units=st.integers(2, 40))
def test_slicing_property_over_random_astral_text(text: str, max_units: int) -> None:
    _assert_whole(text, max_units)


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=120), max_units=st.integers(2, 30))
def test_slicing_property_over_any_unicode(text: str, max_units: int) -> None:
    slices = _slices(text, max_units)
    assert "".join(piece for _, piece in slices) == text
    assert all(utf16_len(piece) <= max_units for _, piece in slices)
