"""The content-part predicates: one spelling of "is this a text / image / thinking part"."""

from __future__ import annotations

import pytest

from contextproto.protocol import content_parts, messages
from contextproto.protocol.content_parts import (
    has_image,
    is_image_part,
    is_text_part,
    is_thinking_part,
    part_text,
    part_type,
)

TEXT = {"type": "text", "text": "hello"}
ODD_TEXT = {"type": "text", "text": {"not": "a string"}}
IMAGE = {"type": "image", "mediaType": "image/png", "data": "AAAA"}
THINKING = {"type": "thinking", "thinking": "so", "signature": "c2ln"}
REDACTED = {"type": "redacted_thinking", "data": "ZW5j"}


@pytest.mark.parametrize(
    ("part", "kind", "text", "image", "thinking", "its_text"),
    [
        (TEXT, "text", True, False, False, "hello"),
        (ODD_TEXT, "text", True, False, False, None),
        (IMAGE, "image", False, True, False, None),
        (THINKING, "thinking", False, False, True, None),
        (REDACTED, "redacted_thinking", False, False, True, None),
        ({"type": "audio"}, "audio", False, False, False, None),
        ("text", None, False, False, False, None),
        (None, None, False, False, False, None),
    ],
)
def test_each_part_is_classified_once(part, kind, text, image, thinking, its_text):
    assert part_type(part) == kind
    assert is_text_part(part) is text
    assert is_image_part(part) is image
    assert is_thinking_part(part) is thinking
    assert part_text(part) == its_text


def test_has_image_only_for_a_list_with_an_image_part():
    assert has_image([TEXT, IMAGE])
    assert not has_image([TEXT, THINKING])
    assert not has_image("image")
    assert not has_image(IMAGE)


def test_the_old_names_in_messages_are_the_content_parts_ones():
    for name in (
        "PART_TEXT",
        "PART_IMAGE",
        "PART_THINKING",
        "PART_REDACTED_THINKING",
        "THINKING_PART_TYPES",
        "content_text",
        "is_thinking_part",
    ):
        assert getattr(messages, name) is getattr(content_parts, name)
