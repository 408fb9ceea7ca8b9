"""What hosts send, normalised by the engine (contract §8.2): ids, argument text, usage objects."""

from __future__ import annotations

import pytest

from contextproto.protocol.errors import USAGE_INVALID, ProtocolError
from contextproto.protocol.host_wire import (
    arguments_from_text,
    arguments_text_problem,
    tool_call_id_problem,
    usage_from_provider,
)


@pytest.mark.parametrize(
    "value, ok",
    [
        ("call_AbC123", True),
        ("toolu_01A09q90qw90lq917835lq9", True),
        ("functions/lookup:0", True),
        ("a" * 256, True),
        ("🙂" * 256, True),  # code points, not UTF-16 units or bytes
        ("\u200bzero-width", True),  # Cf, not Cc
        ("", False),
        ("a" * 257, False),
        ("line\nbreak", False),
        ("\x85next-line", False),  # C1 controls are Cc too
        (7, False),
        (None, False),
    ],
)
def test_tool_call_id_rule(value, ok):
    assert (tool_call_id_problem(value) is None) is ok


@pytest.mark.parametrize(
    "text, parsed",
    [
        ('{"a": 1}', {"a": 1}),
        ("  {}  ", {}),
        ('{"a": 1', None),
        ("[1]", None),
        ("1", None),
        ('"{}"', None),
        ('{"a": NaN}', None),
        ('{"a": Infinity}', None),
        ("", None),
    ],
)
def test_arguments_from_text(text, parsed):
    assert arguments_from_text(text) == parsed


def test_why_text_is_no_argument_object_is_said_in_words():
    assert "not valid JSON" in arguments_text_problem('{"a": 1')
    assert "an array" in arguments_text_problem("[1]")
    assert "NaN is not JSON" in arguments_text_problem('{"a": NaN}')


@pytest.mark.parametrize(
    "usage, counts",
    [
        (
            {"prompt_tokens": 10, "completion_tokens": 2},
            (10, 2, 0, 0),
        ),
        (
            {
                "prompt_tokens": 1500,
                "completion_tokens": 20,
                "total_tokens": 1520,
                "prompt_tokens_details": {"cached_tokens": 1280, "audio_tokens": None},
            },
            (1500, 20, 1280, 0),
        ),
        ({"prompt_tokens": 3, "completion_tokens": 1, "prompt_tokens_details": None}, (3, 1, 0, 0)),
        ({"input_tokens": 7, "output_tokens": 3}, (7, 3, 0, 0)),
        (
            {
                "input_tokens": 7,
                "output_tokens": 3,
                "cache_read_input_tokens": 900,
                "cache_creation_input_tokens": 100,
                "cache_creation": {"ephemeral_5m_input_tokens": 100},
            },
            (1007, 3, 900, 100),
        ),
        (
            {
                "input_tokens": 7,
                "output_tokens": 3,
                "cache_read_input_tokens": None,
                "cache_creation_input_tokens": None,
            },
            (7, 3, 0, 0),
        ),
    ],
)
def test_provider_usage_becomes_the_services_counts(usage, counts):
    got = usage_from_provider(usage)
    assert (
        got["inputTokens"],
        got["outputTokens"],
        got["cacheReadInputTokens"],
        got["cacheWriteInputTokens"],
    ) == counts


@pytest.mark.parametrize(
    "usage, field",
    [
        ("12", "usage"),
        ({}, "usage"),
        ({"prompt_tokens": 1, "output_tokens": 1}, "usage"),
        ({"prompt_tokens": 1}, "usage.completion_tokens"),
        ({"prompt_tokens": 1.5, "completion_tokens": 1}, "usage.prompt_tokens"),
        ({"prompt_tokens": True, "completion_tokens": 1}, "usage.prompt_tokens"),
        (
            {"prompt_tokens": 1, "completion_tokens": 1, "prompt_tokens_details": 3},
            "usage.prompt_tokens_details",
        ),
        ({"input_tokens": 1, "output_tokens": -2}, "usage.output_tokens"),
        (
            {"input_tokens": 1, "output_tokens": 2, "cache_read_input_tokens": "9"},
            "usage.cache_read_input_tokens",
        ),
    ],
)
def test_a_usage_object_of_no_known_shape_names_its_field(usage, field):
    with pytest.raises(ProtocolError) as refused:
        usage_from_provider(usage)
    assert refused.value.code == USAGE_INVALID
    assert refused.value.details == {"field": field}
