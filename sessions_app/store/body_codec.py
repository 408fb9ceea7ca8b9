"""The snapshot body codec: a turn's view stored whole (a keyframe) or as a delta against an
earlier body of the same session (issue 33, contract §4.6a). Pure Python, no Django.

A body is the JSON document `{"messages", "sources", "request"}`, serialized one way only
(`body_text`: compact separators, non-ASCII kept, key order as built), and that text is what
"byte for byte" means. The codec cuts the text into tokens after every `},` and `],`
(`tokenize`: one token per message, source or request block, found by `str.split`). Joined,
the tokens are the text exactly, so every encoding below is exact by construction. A stored
body keeps its own cut (a keyframe stores its token lengths, a delta copies its base's tokens
by position), so the cut may change between versions of this code without breaking a body;
a delta taken across two cuts merely finds less to copy.

* Keyframe (`KEY`): the body's distinct long tokens once each (a view repeats itself: the
  request holds the messages' text again, further back than zlib's 32 KiB window reaches),
  deflated, and a word per token: its length, or the position it first occurred at. A body
  stored before issue 33 is zlib of the text alone (`legacy_text`).
* Delta (`DELTA`): the body's tokens as copies of runs of the base's tokens plus literal
  tokens. Consecutive views share almost all of their tokens (the history, the tools, the
  system prompt), so a delta holds what the turn added and the few tokens that changed (the
  state message, a moved cache marker). The literals are compressed with the base's tokens
  that the delta does not copy as zlib's preset dictionary (after the base's newest content),
  so a token that changed a little (a cache marker moved onto a block) costs a few bytes.

Layouts (integers as little-endian uint32 arrays, which zlib packs well and Python reads in
one call):
  KEY:   u32(len(z)) z=zlib(distinct tokens' text) zlib(u32 per token: len<<1 | first<<1|1)
  DELTA: u32(len(a)) a=zlib(ops: [literals, copy_len, copy_start]*)
         zlib_with_dict(u32 count, u32 literal lengths, literal text)
Token lengths are counted in characters of the text (Python `str` indices).
"""

from __future__ import annotations

import json
import sys
import zlib
from array import array
from collections.abc import Iterable, Sequence
from itertools import accumulate
from typing import Any

KEY = "key"
DELTA = "delta"

LEVEL = 1  # small parts, and the whole bodies stored before issue 33
# At most one body in SNAPSHOT_KEYFRAME_INTERVAL is a keyframe: the default level finds the
# long repeats of a large view that level 1's short match chains miss (a 128k view: 48 KB at
# 1, 18 KB at 6).
KEY_LEVEL = 6
# A token this long that occurred before in the same keyframe is stored as a reference.
REPEAT_CHARS = 32
# zlib's preset dictionary is at most its window (32 KiB).
DICT_BYTES = 32 * 1024
# The longest copy candidate list a token keeps: a token repeated more often than this
# (`{`, `}`, a frequent key) is matched against its first occurrences only.
MAX_CANDIDATES = 32

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class CodecError(ValueError):
    """A stored body that does not decode (corrupt, or a delta given the wrong base)."""


def body_text(body: Any) -> str:
    """The one serialization of a body (and of the request inside it)."""
    return _dumps(body)


def body_texts(body: Any, key: str = "request") -> tuple[str, str | None]:
    """`body_text(body)` and `body_text(body[key])` (None without it), serialized once: a
    dict of string keys serializes as its keys' and values' texts joined, so the value's
    text is kept on the way."""
    if not isinstance(body, dict) or key not in body or not all(isinstance(k, str) for k in body):
        return _dumps(body), (_dumps(body[key]) if isinstance(body, dict) and key in body else None)
    found = ""
    parts = []
    for name, value in body.items():
        text = _dumps(value)
        if name == key:
            found = text
        parts.append(_dumps(name) + ":" + text)
    return "{" + ",".join(parts) + "}", found


# --------------------------------------------------------------------------- tokens


def cut(text: str) -> list[str]:
    """`text` cut after every `},` and `],`: a container that ends inside a container.

    In a body's text that is one token per element of the lists of messages, sources and
    request blocks (and per object or list value inside them), found by `str.split` in C.
    The cut is content-defined: an unchanged stretch of two views cuts the same way wherever
    it sits, so a delta copies it whole. A `},` inside a string is cut too, harmlessly.
    """
    tokens: list[str] = []
    pieces = text.split("},")
    last = len(pieces) - 1
    for position, piece in enumerate(pieces):
        if "]," in piece:
            inner = piece.split("],")
            piece = inner.pop()
            tokens += [part + "]," for part in inner]
        if position < last:
            tokens.append(piece + "},")
        elif piece:
            tokens.append(piece)
    return tokens


def tokenize(body: Any) -> list[str]:
    """The body's text cut into tokens; `"".join(tokenize(b)) == body_text(b)`."""
    return cut(body_text(body))


def join(tokens: Sequence[str]) -> str:
    return "".join(tokens)


# --------------------------------------------------------------------------- words


def _words(values: Iterable[int]) -> bytes:
    packed = array("I", values)
    if sys.byteorder != "little":
        packed.byteswap()
    return packed.tobytes()


def _unwords(data: bytes) -> list[int]:
    if len(data) % 4:
        raise CodecError("a word array of odd length")
    packed = array("I")
    packed.frombytes(data)
    if sys.byteorder != "little":
        packed.byteswap()
    return packed.tolist()


def _head(data: bytes) -> tuple[int, int]:
    """The leading word of a stored body and where the rest starts."""
    if len(data) < 4:
        raise CodecError("a stored body shorter than its header")
    return int.from_bytes(data[:4], "little"), 4


def _cut(text: str, lengths: Sequence[int]) -> list[str]:
    ends = list(accumulate(lengths))
    if (ends[-1] if ends else 0) != len(text):
        raise CodecError("token lengths do not cover the text")
    return [text[a:b] for a, b in zip([0, *ends], ends, strict=False)]


def _inflate(data: bytes | memoryview, dictionary: bytes = b"") -> bytes:
    try:
        if not dictionary:
            return zlib.decompress(data)
        decompressor = zlib.decompressobj(zdict=dictionary)
        return decompressor.decompress(data) + decompressor.flush()
    except zlib.error as exc:
        raise CodecError(f"a stored body does not decompress: {exc}") from exc


def _deflate(data: bytes, dictionary: bytes = b"") -> bytes:
    compressor = (
        zlib.compressobj(KEY_LEVEL, zdict=dictionary) if dictionary else zlib.compressobj(KEY_LEVEL)
    )
    return compressor.compress(data) + compressor.flush()


# --------------------------------------------------------------------------- keyframes


def encode_key(tokens: Sequence[str], text: str | None = None) -> bytes:
    """A keyframe: each distinct long token once (a view repeats itself: the request holds
    the messages again), deflated at KEY_LEVEL, then one word per token: its length, or
    where it first occurred. `text` is unused (kept for callers that have it)."""
    first: dict[str, int] = {}
    words: list[int] = []
    unique: list[str] = []
    for position, token in enumerate(tokens):
        if len(token) > REPEAT_CHARS:
            seen = first.get(token)
            if seen is not None:
                words.append(seen << 1 | 1)
                continue
            first[token] = position
        words.append(len(token) << 1)
        unique.append(token)
    compressed = zlib.compress("".join(unique).encode(), KEY_LEVEL)
    return len(compressed).to_bytes(4, "little") + compressed + zlib.compress(_words(words), LEVEL)


def decode_key(data: bytes) -> list[str]:
    """A keyframe's tokens."""
    size, at = _head(data)
    text = _inflate(data[at : at + size]).decode()
    tokens: list[str] = []
    cursor = 0
    for word in _unwords(_inflate(data[at + size :])):
        if word & 1:
            if (word >> 1) >= len(tokens):
                raise CodecError("a keyframe repeat points ahead")
            tokens.append(tokens[word >> 1])
        else:
            tokens.append(text[cursor : cursor + (word >> 1)])
            cursor += word >> 1
    if cursor != len(text):
        raise CodecError("token lengths do not cover the keyframe")
    return tokens


def key_text(data: bytes) -> str:
    """A keyframe's text."""
    return join(decode_key(data))


def legacy_encode(text: bytes) -> bytes:
    """A whole body as stored before issue 33 (the bench's baseline writes it so)."""
    return zlib.compress(text, LEVEL)


def legacy_text(data: bytes) -> str:
    """A body stored before issue 33: zlib of the JSON text."""
    return _inflate(data).decode()


# --------------------------------------------------------------------------- deltas


def _dictionary(base: Sequence[str], copies: Sequence[tuple[int, int]]) -> bytes:
    """zlib's preset dictionary for a delta's literals: the base's tokens the delta does not
    copy (what a changed token most likely changed from), after as much of the base's end as
    fits (the newest content, which new content most resembles)."""
    removed: list[str] = []
    at = 0
    for start, length in sorted(copies):
        if start > at:
            removed += base[at:start]
        at = max(at, start + length)
    removed += base[at:]
    changed = "".join(removed).encode()[-DICT_BYTES:]
    room = DICT_BYTES - len(changed)
    if room <= 0:
        return changed
    start, size = len(base), 0
    while start > 0 and size < room:  # back over the base, 64 tokens at a time
        block = max(0, start - 64)
        size += sum(map(len, base[block:start]))
        start = block
    return "".join(base[start:]).encode()[-room:] + changed


def encode_delta(base: Sequence[str], tokens: Sequence[str]) -> bytes:
    """`tokens` as copies of runs of `base` plus literal tokens (greedy longest match)."""
    where: dict[str, list[int]] = {}
    for position, token in enumerate(base):
        found = where.setdefault(token, [])
        if len(found) < MAX_CANDIDATES:
            found.append(position)
    ops: list[int] = []
    literals: list[str] = []
    pending = 0  # literals since the last copy
    expected = 0  # where a copy continuing the last one would start
    copies: list[tuple[int, int]] = []
    n, m = len(tokens), len(base)
    i = 0
    while i < n:
        candidates = where.get(tokens[i])
        best_len = best_at = 0
        if candidates:
            # The run that continues the previous copy is the usual case: take it when it is
            # longer than one token, else the longest run of any candidate.
            order = candidates
            if expected < m and base[expected] == tokens[i]:
                order = [expected, *candidates]
            for start in order:
                length = 1
                while (
                    i + length < n
                    and start + length < m
                    and base[start + length] == tokens[i + length]
                ):
                    length += 1
                if length > best_len:
                    best_len, best_at = length, start
                    if i + length >= n or (start == expected and length > 1):
                        break
        # A single short token is cheaper as a literal than as a copy op.
        if best_len and (best_len > 1 or len(tokens[i]) > 8):
            ops += (pending, best_len, best_at)
            copies.append((best_at, best_len))
            pending = 0
            expected = best_at + best_len
            i += best_len
        else:
            literals.append(tokens[i])
            pending += 1
            i += 1
    if pending:
        ops += (pending, 0, 0)
    packed_ops = zlib.compress(_words(ops), LEVEL)
    payload = _words([len(literals), *(len(t) for t in literals)]) + "".join(literals).encode()
    packed = _deflate(payload, _dictionary(base, copies))
    return len(packed_ops).to_bytes(4, "little") + packed_ops + packed


def decode_delta(base: Sequence[str], data: bytes) -> list[str]:
    """The tokens a delta encodes against `base` (the tokens it was encoded against)."""
    size, at = _head(data)
    ops = _unwords(_inflate(data[at : at + size]))
    if len(ops) % 3:
        raise CodecError("delta ops are not triples")
    copies = []
    limit = len(base)
    for k in range(0, len(ops), 3):
        length, start = ops[k + 1], ops[k + 2]
        if length:
            if start + length > limit:
                raise CodecError("a copy reaches outside its base")
            copies.append((start, length))
    payload = _inflate(data[at + size :], _dictionary(base, copies))
    (count,) = _unwords(payload[:4])
    lengths = _unwords(payload[4 : 4 + 4 * count])
    literals = _cut(payload[4 + 4 * count :].decode(), lengths)
    tokens: list[str] = []
    next_literal = 0
    for k in range(0, len(ops), 3):
        pending, length, start = ops[k], ops[k + 1], ops[k + 2]
        if pending:
            tokens += literals[next_literal : next_literal + pending]
            next_literal += pending
        if length:
            tokens += base[start : start + length]
    if next_literal != len(literals):
        raise CodecError("delta literals left over")
    return tokens
