"""The scripted model's script, checked (contract §7; docs/scripted-model.md): what the
runtime plays and what publish accepts are one rule.

`check_script` raises `ScriptInvalid` naming the first bad part of a script, in the words
the runtime answers with (`script_invalid`, sessions_app/providers/scripted.py) and publish
refuses with (agents/model_schema.py). Pure data in, no Django.
"""

from __future__ import annotations

from typing import Any

from contextproto.protocol.adapters import WireFormat

# `maxOutputTokens`: the model's output limit, as a real model's config states it (the gateway
# lowers a client's max_tokens to it); the script itself ignores it.
SCRIPT_KEYS = frozenset({"steps", "wireFormat", "tokens", "description", "maxOutputTokens"})
STEP_KEYS = frozenset(
    {"expect", "text", "toolCalls", "reasoning", "usage", "comment", "delaySeconds"}
)
EXPECT_KEYS = frozenset({"contains", "notContains", "lastMessageKind", "lastRole", "messageCount"})
TOKENS_KEYS = frozenset({"mode", "inputPerTurn", "outputPerTurn"})
TOOL_CALL_KEYS = frozenset({"id", "name", "arguments"})
REASONING_KEYS = frozenset({"id", "summary", "encryptedContent"})
# The cache counts (contract §8) are reported only when a step gives them: a rehearsal of cost.
CACHE_USAGE_KEYS = ("cacheReadInputTokens", "cacheWriteInputTokens")
USAGE_KEYS = frozenset({"inputTokens", "outputTokens", *CACHE_USAGE_KEYS})
TOKEN_MODES = ("estimate", "fixed")


class ScriptInvalid(ValueError):
    """A script the scripted model refuses: `where` names the bad part (`script.steps`,
    `steps[2].toolCalls[0].name`), `problem` says what is wrong with it."""

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        self.problem = problem
        super().__init__(self.message)

    @property
    def message(self) -> str:
        """The runtime's own words (`script_invalid`'s message), publish's too."""
        return f"scripted model: {self.where}: {self.problem}"


def _invalid(where: str, problem: str) -> ScriptInvalid:
    return ScriptInvalid(where, problem)


def is_count(value: Any) -> bool:
    """A JSON integer >= 0 (a bool is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_keys(where: str, value: Any, allowed: frozenset[str]) -> None:
    if not isinstance(value, dict):
        raise _invalid(where, f"must be an object, got {type(value).__name__}")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise _invalid(
            where, f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}"
        )


def _check_strings(where: str, value: Any) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _invalid(where, "must be a list of non-empty strings")


def _check_expect(where: str, expect: Any) -> None:
    _check_keys(where, expect, EXPECT_KEYS)
    for key in ("contains", "notContains"):
        if key in expect:
            _check_strings(f"{where}.{key}", expect[key])
    for key in ("lastMessageKind", "lastRole"):
        if key in expect and not (isinstance(expect[key], str) and expect[key]):
            raise _invalid(f"{where}.{key}", "must be a non-empty string")
    if "messageCount" in expect:
        bounds = expect["messageCount"]
        _check_keys(f"{where}.messageCount", bounds, frozenset({"min", "max"}))
        if not bounds or not all(is_count(v) for v in bounds.values()):
            raise _invalid(f"{where}.messageCount", "needs min and/or max, non-negative ints")


def _check_step(n: int, step: Any) -> None:
    where = f"steps[{n}]"
    _check_keys(where, step, STEP_KEYS)
    if "text" in step and not isinstance(step["text"], str):
        raise _invalid(f"{where}.text", "must be a string")
    delay = step.get("delaySeconds", 0)
    if isinstance(delay, bool) or not isinstance(delay, int | float) or not 0 <= delay <= 300:
        raise _invalid(f"{where}.delaySeconds", "must be a number of seconds, 0..300")
    calls = step.get("toolCalls")
    if calls is not None:
        if not isinstance(calls, list) or not calls:
            raise _invalid(f"{where}.toolCalls", "must be a non-empty list")
        for i, call in enumerate(calls):
            _check_keys(f"{where}.toolCalls[{i}]", call, TOOL_CALL_KEYS)
            if not isinstance(call.get("name"), str) or not call["name"]:
                raise _invalid(f"{where}.toolCalls[{i}].name", "is required (a tool name)")
            if "id" in call and not (isinstance(call["id"], str) and call["id"]):
                raise _invalid(f"{where}.toolCalls[{i}].id", "must be a non-empty string")
            if not isinstance(call.get("arguments", {}), dict):
                raise _invalid(f"{where}.toolCalls[{i}].arguments", "must be an object")
    reasoning = step.get("reasoning")
    if reasoning is not None:
        if not isinstance(reasoning, list) or not reasoning:
            raise _invalid(f"{where}.reasoning", "must be a non-empty list")
        for i, item in enumerate(reasoning):
            _check_keys(f"{where}.reasoning[{i}]", item, REASONING_KEYS)
            if not all(isinstance(v, str) and v for v in item.values()):
                raise _invalid(f"{where}.reasoning[{i}]", "takes non-empty strings")
    if not step.get("text") and not calls:
        raise _invalid(where, "needs text, toolCalls or both (an empty answer is not a step)")
    if "usage" in step:
        usage = step["usage"]
        _check_keys(f"{where}.usage", usage, USAGE_KEYS)
        if not usage or not all(is_count(v) for v in usage.values()):
            raise _invalid(f"{where}.usage", "needs inputTokens and/or outputTokens, ints >= 0")
    if "expect" in step:
        _check_expect(f"{where}.expect", step["expect"])


def check_script(script: Any) -> None:
    """Check a script's shape; raise ScriptInvalid naming the first bad part."""
    _check_keys("script", script, SCRIPT_KEYS)
    steps = script.get("steps")
    if not isinstance(steps, list) or not steps:
        raise _invalid("script.steps", "must be a non-empty list of steps")
    wire = script.get("wireFormat", WireFormat.NEUTRAL)
    if wire not in tuple(WireFormat):
        raise _invalid("script.wireFormat", f"must be one of {', '.join(tuple(WireFormat))}")
    if "tokens" in script:
        tokens = script["tokens"]
        _check_keys("script.tokens", tokens, TOKENS_KEYS)
        mode = tokens.get("mode", "estimate")
        if mode not in TOKEN_MODES:
            raise _invalid("script.tokens.mode", f"must be one of {', '.join(TOKEN_MODES)}")
        for key in ("inputPerTurn", "outputPerTurn"):
            if key in tokens and not is_count(tokens[key]):
                raise _invalid(f"script.tokens.{key}", "must be an int >= 0")
        if mode == "fixed" and "inputPerTurn" not in tokens:
            raise _invalid("script.tokens", "mode 'fixed' needs inputPerTurn")
    for n, step in enumerate(steps):
        _check_step(n, step)
