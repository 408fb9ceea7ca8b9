"""A Responses API request body against the API's shape (POST /v1/responses); the problems.

The field types are the official SDK's own (`ResponseCreateParamsNonStreaming`, validated as
the TypedDict it is), and the rules its types cannot say: a `function_call_output` /
`custom_tool_call_output` follows the call it answers (one output per call, a function call's
output for a function call); a reasoning item is followed by the item it led to (more
reasoning, an assistant message or a call), never by a user message or an output, nor last;
the call's `arguments` is JSON text; `parallel_tool_calls` and `tool_choice` only with tools.
"""

from __future__ import annotations

import json
from typing import Any

from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming
from pydantic import TypeAdapter, ValidationError

CREATE = TypeAdapter(ResponseCreateParamsNonStreaming)
CALLS = {"function_call": "function_call_output", "custom_tool_call": "custom_tool_call_output"}
AFTER_REASONING = {"reasoning", "function_call", "custom_tool_call"}


def _type_problems(body: dict[str, Any]) -> list[str]:
    try:
        CREATE.validate_python(body)
    except ValidationError as exc:
        errors = exc.errors()
        # A union reports every member it tried; the item and the first complaint say enough.
        first = errors[0]
        where = ".".join(str(p) for p in first["loc"][:3])
        return [f"{len(errors)} type errors, the first at {where}: {first['msg']}"]
    return []


def openai_responses_problems(body: Any) -> list[str]:
    if not isinstance(body, dict):
        return ["body is not a JSON object"]
    problems = _type_problems(body)
    items = body.get("input")
    if not isinstance(items, list):
        return [*problems, "input must be a list of items"]
    waiting: dict[str, str] = {}  # call id -> the output type it wants
    answered: set[str] = set()
    for n, item in enumerate(items):
        kind = item.get("type", "message")
        if kind in CALLS:
            waiting[item["call_id"]] = CALLS[kind]
            if kind == "function_call":
                try:
                    json.loads(item.get("arguments", ""))
                except ValueError:
                    problems.append(f"input[{n}]: arguments is not JSON text")
        elif kind in CALLS.values():
            call_id = item.get("call_id")
            if call_id in answered:
                problems.append(f"input[{n}]: a second output for call {call_id}")
            elif waiting.get(call_id) != kind:
                problems.append(f"input[{n}]: {kind} for {call_id}, which no earlier call awaits")
            waiting.pop(call_id, None)
            answered.add(call_id)
        if kind == "reasoning":
            following = items[n + 1] if n + 1 < len(items) else None
            led_to = following is not None and (
                following.get("type") in AFTER_REASONING
                or (
                    following.get("type", "message") == "message"
                    and following.get("role") == "assistant"
                )
            )
            if not led_to:
                problems.append(f"input[{n}]: a reasoning item not followed by what it led to")
    if waiting:
        problems.append(f"calls without their output: {sorted(waiting)}")
    if not body.get("tools"):
        for key in ("parallel_tool_calls", "tool_choice"):
            if key in body:
                problems.append(f"{key} without tools")
    return problems
