"""A fold's raw text and its UTF-16 slicing, as `context_fold_read` serves them (contract §5).

Lengths and cursors count UTF-16 code units, not Python characters: that is what
the clients holding the cursor (JavaScript hosts, MCP clients, most model
tooling) measure, and a Python `len()` disagrees on every character outside the
Basic Multilingual Plane (emoji, rare CJK). The text is encoded once per read and
sliced as bytes, so a read costs one encode whatever the fold's size.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from contextproto.protocol import json_texts
from contextproto.protocol.messages import RawMessage

FOLD_READ_SLICE_UNITS = 12000

_ENCODING = "utf-16-le"
# A Python str may hold a lone surrogate; "surrogatepass" keeps it as one code unit
# instead of failing, so even a damaged message still reads back byte for byte.
_ERRORS = "surrogatepass"
_HIGH = range(0xD800, 0xDC00)
_LOW = range(0xDC00, 0xE000)


class CursorError(ValueError):
    """A cursor outside the text or pointing at the second half of a surrogate pair."""


@dataclass(frozen=True)
class Utf16Slice:
    """One slice of a text: `cursor` and `next_cursor` (None at the end) in UTF-16 units."""

    text: str
    cursor: int
    next_cursor: int | None
    total_length: int


def _canonical(value: object) -> str:
    return json_texts.canonical_compact(value)


def render_fold_text(messages: Iterable[RawMessage]) -> str:
    """Return the fold's raw messages as one canonical JSON text, in index order.

    Sorted keys and compact separators make the text, and so every cursor into it,
    the same on every read of the same fold.
    """
    ordered = sorted(messages, key=lambda m: m.index)
    return _canonical([m.to_wire() for m in ordered])


def render_message_text(message: RawMessage) -> str:
    """Return one raw message as `context_history_read` serves it: the JSON object
    `render_fold_text` holds for that message, alone."""
    return _canonical(message.to_wire())


def utf16_len(text: str) -> int:
    """Return the length of `text` in UTF-16 code units."""
    return len(text.encode(_ENCODING, _ERRORS)) // 2


def _unit(data: bytes, position: int) -> int:
    return data[2 * position] | (data[2 * position + 1] << 8)


def read_slice(text: str, cursor: int, max_units: int = FOLD_READ_SLICE_UNITS) -> Utf16Slice:
    """Return at most `max_units` UTF-16 units of `text` starting at `cursor`.

    A slice never splits a surrogate pair: when the limit falls between the two
    halves it ends one unit earlier. Raises CursorError for a cursor below 0,
    above the length, or on the low half of a pair (no slice ever ends there, so
    such a cursor was not handed out). A cursor equal to the length gives an
    empty slice and no next cursor.
    """
    if max_units < 2:
        # With one unit a slice could never get past a pair: it would stay empty forever.
        raise ValueError("max_units must be at least 2")
    data = text.encode(_ENCODING, _ERRORS)
    total = len(data) // 2
    if cursor < 0 or cursor > total:
        raise CursorError(f"cursor {cursor} is outside the text (0 to {total})")
    if 0 < cursor < total and _unit(data, cursor) in _LOW and _unit(data, cursor - 1) in _HIGH:
        raise CursorError(f"cursor {cursor} points inside a surrogate pair")
    end = min(cursor + max_units, total)
    if end < total and _unit(data, end - 1) in _HIGH and _unit(data, end) in _LOW:
        end -= 1
    piece = data[2 * cursor : 2 * end].decode(_ENCODING, _ERRORS)
    return Utf16Slice(
        text=piece, cursor=cursor, next_cursor=end if end < total else None, total_length=total
    )


def utf16_slice(
    text: str, cursor: int, max_units: int = FOLD_READ_SLICE_UNITS
) -> tuple[str, int | None]:
    """Return the slice of `text` at `cursor` and the next cursor (None at the end).

    See `read_slice` for the rules and what it raises.
    """
    piece = read_slice(text, cursor, max_units)
    return piece.text, piece.next_cursor
