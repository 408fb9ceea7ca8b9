"""Model-name patterns of the gateway's settings (contract §14): which alias a model name takes,
which names are side models, and what a pattern may be."""

from __future__ import annotations

import pytest

from contextproto.protocol.gateway.model_names import (
    DEFAULT_SIDE_MODELS,
    PATTERN_MAX_CHARS,
    Alias,
    alias_for,
    matches,
    matches_any,
    pattern_problem,
)


@pytest.mark.parametrize(
    ("pattern", "model", "expected"),
    [
        ("claude-opus-5-5", "claude-opus-5-5", True),
        ("claude-opus-5-5", "claude-opus-5-5-20260101", False),
        ("claude-*", "claude-opus-5-5", True),
        ("claude-*", "claude-", True),  # * matches nothing too
        ("claude-*", "Claude-opus", False),  # model ids are case-sensitive
        ("*haiku*", "claude-3-5-haiku-20241022", True),
        ("gpt-5*", "gpt-5.5", True),
        ("gpt-5*", "gpt-4.1", False),
        ("*", "anything at all", True),
        # ? and [ are plain characters, never wildcards.
        ("gpt-?", "gpt-5", False),
        ("gpt-?", "gpt-?", True),
        ("m[1]", "m1", False),
        ("m[1]", "m[1]", True),
        ("a.b*", "axb", False),  # a dot is a dot
        ("a*b*c", "a-b-c", True),
        ("a*b*c", "a-c", False),
    ],
)
def test_a_pattern_matches_exactly_or_as_a_star_glob(pattern, model, expected):
    assert matches(pattern, model) is expected


ALIASES = [
    Alias("claude-*", "helper@1"),
    Alias("*opus*", "helper@2"),
    Alias("claude-opus-5-5", "opus@1"),
    Alias("gpt-5*", "codex@1"),
]


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        # An exact pattern wins over every glob, wherever it stands in the list.
        ("claude-opus-5-5", "opus@1"),
        # Otherwise the first glob in the list's order that matches.
        ("claude-opus-4-8", "helper@1"),
        ("open-opus", "helper@2"),
        ("gpt-5.5", "codex@1"),
        ("llama-4", None),
    ],
)
def test_an_exact_alias_wins_then_the_first_matching_glob(model, expected):
    found = alias_for(ALIASES, model)
    assert (found.agent_version if found else None) == expected


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("claude-*", None),
        ("*", None),
        ("x" * PATTERN_MAX_CHARS, None),
        ("", "must be a non-empty string"),
        (None, "must be a non-empty string"),
        (3, "must be a non-empty string"),
        ("x" * (PATTERN_MAX_CHARS + 1), f"at most {PATTERN_MAX_CHARS} characters"),
        ("claude *", "spaces or control characters"),
        ("claude\t*", "spaces or control characters"),
    ],
)
def test_a_pattern_is_a_short_name_without_spaces(pattern, problem):
    found = pattern_problem(pattern)
    assert (found is None) if problem is None else (problem in (found or ""))


@pytest.mark.parametrize(
    ("model", "side"),
    [
        # Claude Code's small/fast model, as 2.1.332 names it and as older releases did.
        ("claude-haiku-4-5", True),
        ("claude-haiku-4-5-20251001", True),
        ("claude-3-5-haiku-20241022", True),
        # The conversation's own models are never side models by default.
        ("claude-opus-5-5", False),
        ("claude-sonnet-4-6", False),
        ("gpt-5.5", False),
        ("helper@1", False),
    ],
)
def test_the_default_side_models_are_claude_codes_small_fast_model(model, side):
    assert matches_any(DEFAULT_SIDE_MODELS, model) is side
