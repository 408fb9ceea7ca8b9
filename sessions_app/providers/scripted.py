"""The scripted model (contract §7): a JSON list of steps, played in order, for tests and demos.

The script keeps no cursor of its own: turns of one session run in different Celery
worker processes, so the caller passes `step`, the 0-based number of model calls this
model has already answered in the session (a durable counter it stores), and a retried
turn asks for the same step again. See docs/scripted-model.md.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from contextproto.errors import (
    PROVIDER_UNAVAILABLE,
    SCRIPT_EXHAUSTED,
    SCRIPT_EXPECTATION_FAILED,
    SCRIPT_INVALID,
    SCRIPT_STEP_REQUIRED,
)
from contextproto.protocol.adapters import WireFormat
from contextproto.protocol.content_parts import PART_REASONING
from contextproto.protocol.scripted_script import (
    CACHE_USAGE_KEYS,
    ScriptInvalid,
    check_script,
    is_count,
)
from contextproto.protocol.tokens import json_tokens
from sessions_app.providers.base import (
    ModelReply,
    ProviderError,
    ReasoningChunk,
    StreamPiece,
    TextChunk,
    ToolCallRequest,
    canonical_json,
    estimate_tokens,
    tool_calls_json,
)

STOP_TOOL_CALLS = "tool_calls"
STOP_END_TURN = "end_turn"
PREVIEW_CHARS = 300


def _strings(value: Any) -> list[str]:
    """Every string inside a JSON value (keys excluded), depth first."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _describe(message: Any) -> str:
    """A short view of one message for error texts: `role/kind: content…`."""
    if not isinstance(message, dict):
        return "none"
    label = "/".join(str(message[k]) for k in ("role", "kind") if message.get(k) is not None)
    content = message.get("content")
    text = content if isinstance(content, str) else canonical_json(content)
    if len(text) > PREVIEW_CHARS:
        text = text[:PREVIEW_CHARS] + "…"
    return f"{label}: {text}"


def validate_script(script: Any) -> None:
    """Check a script's shape; raise ProviderError `script_invalid` naming the bad part (the
    engine's `check_script`, which publish runs too)."""
    try:
        check_script(script)
    except ScriptInvalid as exc:
        raise ProviderError(SCRIPT_INVALID, exc.message, details={"where": exc.where}) from None


class ScriptedProvider:
    """Plays `script["steps"][step]` for each call; see the module docstring for `step`."""

    def __init__(self, script: Mapping[str, Any], *, timeout: float | None = None) -> None:
        script = dict(script)
        # A caller's wait limit: a step slower than it fails as a real call would time out.
        self.timeout = timeout
        validate_script(script)
        self.script = script
        self.steps: list[dict[str, Any]] = script["steps"]
        self.wire_format = WireFormat(script.get("wireFormat", WireFormat.NEUTRAL))
        self.tokens: dict[str, Any] = script.get("tokens", {"mode": "estimate"})

    def complete(
        self,
        request: dict,
        *,
        model: str,
        max_output_tokens: int | None = None,
        step: int | None = None,
    ) -> ModelReply:
        """Answer with step `step` (0-based) after checking its expectations.

        Raises `script_step_required` without a step, `script_exhausted` past the last
        step and `script_expectation_failed` when the request does not match. Never
        answers silently. `max_output_tokens` is ignored: the script says what to answer.
        """
        spec, number, delay = self._step(request, step)
        if delay:
            # A slow model, for tests that kill a worker while it waits for an answer.
            time.sleep(min(delay, self.timeout) if self.timeout is not None else delay)
            self._timed_out(number, delay)
        return self._reply(spec, number, request, model)

    async def acomplete(self, request: dict, *, model: str, step: int | None = None) -> ModelReply:
        spec, number, delay = self._step(request, step)
        if delay:
            await asyncio.sleep(min(delay, self.timeout) if self.timeout is not None else delay)
            self._timed_out(number, delay)
        return self._reply(spec, number, request, model)

    async def astream(
        self, request: dict, *, model: str, step: int | None = None
    ) -> AsyncGenerator[StreamPiece, None]:
        """The step's reasoning items, its text in one chunk, then its reply (a script has no
        stream of its own)."""
        reply = await self.acomplete(request, model=model, step=step)
        for part in reply.thinking:
            yield ReasoningChunk(part)
        if reply.text:
            yield TextChunk(reply.text)
        yield reply

    def _step(self, request: dict, step: int | None) -> tuple[dict[str, Any], int, float]:
        """The step to play (checked against the request), its 1-based number and delay."""
        if step is None or not is_count(step):
            raise ProviderError(
                SCRIPT_STEP_REQUIRED,
                "scripted model: pass step=<0-based count of this model's earlier calls in "
                f"the session>; got {step!r}. The script keeps no cursor because turns run "
                "in different worker processes.",
                details={"step": step},
            )
        number = step + 1
        total = len(self.steps)
        if step >= total:
            raise ProviderError(
                SCRIPT_EXHAUSTED,
                f"the script has {total} steps; step {number} was requested",
                details={"steps": total, "requestedStep": number},
            )
        spec = self.steps[step]
        self._check(number, spec.get("expect") or {}, request)
        return spec, number, float(spec.get("delaySeconds") or 0)

    def _timed_out(self, number: int, delay: float) -> None:
        """Fail as a real call would when the step is slower than the caller waits."""
        if self.timeout is not None and delay > self.timeout:
            raise ProviderError(
                PROVIDER_UNAVAILABLE,
                f"scripted model: timed out after {self.timeout:g} s (step {number} takes "
                f"{delay:g} s)",
                retryable=True,
                details={"reason": "timeout"},
            )

    def _reply(self, spec: dict[str, Any], number: int, request: dict, model: str) -> ModelReply:
        text = spec.get("text") or None
        calls = tuple(
            ToolCallRequest(
                id=call.get("id") or f"script_{number}_{i}",
                name=call["name"],
                arguments=dict(call.get("arguments") or {}),
            )
            for i, call in enumerate(spec.get("toolCalls") or (), start=1)
        )
        reasoning = tuple(
            {
                "type": PART_REASONING,
                "id": item.get("id") or f"rs_script_{number}_{i}",
                "summary": [{"type": "summary_text", "text": item["summary"]}]
                if "summary" in item
                else [],
                **(
                    {"encryptedContent": item["encryptedContent"]}
                    if "encryptedContent" in item
                    else {}
                ),
            }
            for i, item in enumerate(spec.get("reasoning") or (), start=1)
        )
        return ModelReply(
            text=text,
            tool_calls=calls,
            usage=self._usage(spec.get("usage") or {}, request, text, calls),
            stop_reason=STOP_TOOL_CALLS if calls else STOP_END_TURN,
            thinking=reasoning,
            raw={
                "scripted": True,
                "model": model,
                "step": number,
                "steps": len(self.steps),
                "text": text,
                "toolCalls": [
                    {"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls
                ],
            },
        )

    # ------------------------------------------------------------------ internals

    def _usage(
        self,
        given: dict[str, int],
        request: dict,
        text: str | None,
        calls: tuple[ToolCallRequest, ...],
    ) -> dict[str, Any]:
        fixed = self.tokens.get("mode") == "fixed"
        estimated = False
        if "inputTokens" in given:
            input_tokens = given["inputTokens"]
        elif fixed:
            input_tokens = self.tokens["inputPerTurn"]
        else:
            input_tokens = json_tokens(request)
            estimated = True
        if "outputTokens" in given:
            output_tokens = given["outputTokens"]
        elif fixed and "outputPerTurn" in self.tokens:
            output_tokens = self.tokens["outputPerTurn"]
        else:
            output_tokens = estimate_tokens((text or "") + tool_calls_json(calls))
            estimated = True
        usage: dict[str, Any] = {"inputTokens": input_tokens, "outputTokens": output_tokens}
        usage.update({key: given[key] for key in CACHE_USAGE_KEYS if key in given})
        if estimated:
            usage["estimated"] = True
        return usage

    def _check(self, number: int, expect: dict[str, Any], request: dict) -> None:
        # The messages of the request: a Responses body's are its input items.
        messages = (
            request.get("messages", request.get("input")) if isinstance(request, dict) else None
        )
        messages = messages if isinstance(messages, list) else []
        last = messages[-1] if messages else None
        # A needle matches the request's JSON or any string inside it, so text that
        # itself holds JSON can be matched without JSON escaping.
        haystacks = [canonical_json(request), *_strings(request)]
        last_preview = _describe(last)

        def fail(what: str, expected: Any, seen: Any, text: str) -> ProviderError:
            return ProviderError(
                SCRIPT_EXPECTATION_FAILED,
                f"script step {number} of {len(self.steps)}: {text}",
                details={"step": number, "expectation": what, "expected": expected, "seen": seen},
            )

        for needle in expect.get("contains", ()):
            if not any(needle in h for h in haystacks):
                raise fail(
                    "contains",
                    needle,
                    last_preview,
                    f"expected the request to contain {needle!r}, but it does not "
                    f"({len(messages)} messages; last message: {last_preview})",
                )
        for needle in expect.get("notContains", ()):
            found = next((h for h in haystacks if needle in h), None)
            if found is not None:
                at = found.index(needle)
                seen = found[max(0, at - 80) : at + len(needle) + 80]
                raise fail(
                    "notContains",
                    needle,
                    seen,
                    f"expected the request not to contain {needle!r}, but it does: ...{seen}...",
                )
        for key, field in (("lastRole", "role"), ("lastMessageKind", "kind")):
            if key not in expect:
                continue
            last_value = last.get(field) if isinstance(last, dict) else None
            if last_value != expect[key]:
                hint = (
                    f" (the {self.wire_format} wire format has no message kinds; use lastRole)"
                    if field == "kind" and last_value is None and last is not None
                    else ""
                )
                raise fail(
                    key,
                    expect[key],
                    last_value,
                    f"expected the last message's {field} to be {expect[key]!r}, saw "
                    f"{last_value!r}{hint}; last message: {last_preview}",
                )
        if "messageCount" in expect:
            bounds = expect["messageCount"]
            low, high = bounds.get("min"), bounds.get("max")
            count = len(messages)
            if (low is not None and count < low) or (high is not None and count > high):
                raise fail(
                    "messageCount",
                    bounds,
                    count,
                    f"expected between {low if low is not None else 0} and "
                    f"{high if high is not None else 'any number of'} messages, saw {count}",
                )
