"""Model names a gateway client sends on its own (contract §14, SPEC §19.1): an Application's
model aliases and side models, as pure data and rules.

A *pattern* is an exact model name or a glob whose only wildcard is `*` (any run of
characters, none included); `?` and `[` are plain characters, because model names never use
them as wildcards and an operator who writes one means it. Matching is case-sensitive, as
the providers' model ids are. An alias maps a pattern to a version name (`agent@N`, `agent`
or a version id); which alias a model name takes: an exact pattern first, then the first
glob in the list's order that matches (`alias_for`). Side models are globs too (`matches_any`).

`DEFAULT_SIDE_MODELS` are the model names known clients use only for background requests,
each checked against the real client (docs/contract.md §14 says where).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

WILDCARD = "*"
PATTERN_MAX_CHARS = 200
# Any whitespace or control character: a model name on the wire has none.
_UNPRINTABLE = re.compile(r"[\s\x00-\x1f\x7f]")

# Claude Code's small/fast model (its helper requests: the session title, quota probes, key
# checks) is a Haiku: `claude-haiku-4-5[-20251001]` in 2.1.332 when the user names one
# (ANTHROPIC_DEFAULT_HAIKU_MODEL / ANTHROPIC_SMALL_FAST_MODEL) or talks to Anthropic itself,
# `claude-3-5-haiku-20241022` in older releases; against a gateway with neither set it
# sends its helper requests under the conversation's own model name. Codex, the Agents SDK,
# Pydantic AI, LangChain, the Vercel AI SDK and LiteLLM send no background-only model name.
DEFAULT_SIDE_MODELS: tuple[str, ...] = ("claude-*haiku*",)


@dataclass(frozen=True)
class Alias:
    """One model alias: requests whose `model` matches `pattern` start a session of the
    version `agent_version` names."""

    pattern: str
    agent_version: str


def is_glob(pattern: str) -> bool:
    return WILDCARD in pattern


def pattern_problem(pattern: object) -> str | None:
    """Why `pattern` is not a model-name pattern (a sentence), or None when it is one."""
    if not isinstance(pattern, str) or not pattern:
        return "must be a non-empty string: an exact model name or a glob with *"
    if len(pattern) > PATTERN_MAX_CHARS:
        return f"must be at most {PATTERN_MAX_CHARS} characters"
    if _UNPRINTABLE.search(pattern):
        return "must not hold spaces or control characters (model names have none)"
    return None


@lru_cache(maxsize=1024)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in pattern.split(WILDCARD)), re.S)


def matches(pattern: str, model: str) -> bool:
    """Whether `model` matches `pattern` (exact, or a glob whose `*` is any run of characters)."""
    if not is_glob(pattern):
        return pattern == model
    return _compiled(pattern).fullmatch(model) is not None


def matches_any(patterns: Sequence[str], model: str) -> bool:
    return any(matches(pattern, model) for pattern in patterns)


def alias_for(aliases: Sequence[Alias], model: str) -> Alias | None:
    """The alias `model` takes: the one whose exact pattern is `model`, else the first glob
    (in list order) that matches it; None when none does."""
    for alias in aliases:
        if not is_glob(alias.pattern) and alias.pattern == model:
            return alias
    for alias in aliases:
        if is_glob(alias.pattern) and matches(alias.pattern, model):
            return alias
    return None
