"""One content-to-text helper for the maintainer's pages, the admin and experiment checks."""

from __future__ import annotations

import pytest

from contextproto.protocol.messages import content_text

TEXT = {"type": "text", "text": "hello"}
IMAGE = {"type": "image", "mediaType": "image/png", "data": "AAAA"}
ODD = {"type": "audio", "b": 1, "a": "é"}
THINKING = {"type": "thinking", "thinking": "first, the total", "signature": "c2lnbmVk"}
REDACTED = {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}


@pytest.mark.parametrize(
    ("content", "full", "text_only"),
    [
        ("plain", "plain", "plain"),
        ([TEXT, TEXT], "hello\nhello", "hello\nhello"),
        ([TEXT, IMAGE], "hello\n[image image/png]", "hello"),
        ([{"type": "image", "url": "u"}], "[image]", ""),
        ([ODD], '{"a": "é", "b": 1, "type": "audio"}', ""),
        ([{"type": "text", "text": {"b": 1, "a": 2}}], '{"a":2,"b":1}', ""),
        ([{"type": "text"}, TEXT], "null\nhello", "\nhello"),
        ({"b": 1, "a": 2}, '{"a": 2, "b": 1}', ""),
        (None, "null", ""),
        ([], "", ""),
        # Thinking shows its text, never a signature or encrypted data; text_only skips it.
        (
            [THINKING, REDACTED, TEXT],
            "[thinking] first, the total\n[redacted thinking]\nhello",
            "hello",
        ),
        ([REDACTED], "[redacted thinking]", ""),
    ],
)
def test_content_text(content, full, text_only):
    assert content_text(content) == full
    assert content_text(content, text_only=True) == text_only
