"""Checks of request bodies against each API's documented shape; each returns the problems.

OpenAI Chat Completions (POST /v1/chat/completions): `model` and `messages` required;
roles system/developer/user/assistant/tool; an assistant message with `tool_calls` is
followed by one `role: tool` message per call id before anything else; tool call
`arguments` is a JSON string; tools are `{"type": "function", "function": {name,
description?, parameters}}`, or custom tools `{"type": "custom", "custom": {name,
description?, format?}}` whose calls are `{"type": "custom", "custom": {name, input}}` with
text input; function names match ^[a-zA-Z0-9_-]{1,64}$.

Anthropic Messages (POST /v1/messages): `model`, `max_tokens` (>= 1) and `messages`
required; `system` is a top-level field, never a message role; roles are user/assistant
and alternate; the first message is a user message; the conversation ends with a user
message (prefill is refused with tools and on current models); the user message after a
`tool_use` begins with one `tool_result` block per `tool_use` id of the assistant
message right before it; tools are `{name, description?, input_schema}`; `tool_choice`
(`{"type": "auto"|"any"|"tool"|"none", "disable_parallel_tool_use"?: bool}`) only with
tools. Thinking blocks (`{type: thinking, thinking, signature}`, `{type: redacted_thinking,
data}`) come first in their assistant turn and never carry `cache_control`.
"""

from __future__ import annotations

import json
import re
from typing import Any

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
TOOL_USE_ID = re.compile(r"^[a-zA-Z0-9_-]+$")

OPENAI_ROLES = {"system", "developer", "user", "assistant", "tool"}
OPENAI_USER_PARTS = {"text", "image_url", "input_audio", "file"}
ANTHROPIC_USER_BLOCKS = {"text", "image", "document", "tool_result"}
ANTHROPIC_ASSISTANT_BLOCKS = {"text", "tool_use", "thinking", "redacted_thinking"}
THINKING_BLOCKS = {"thinking", "redacted_thinking"}
ANTHROPIC_TOOL_CHOICES = {"auto", "any", "tool", "none"}


def _text_parts_ok(content: Any) -> bool:
    return isinstance(content, str) or (
        isinstance(content, list)
        and all(
            isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
            for p in content
        )
    )


def _schema_ok(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "object"


# --------------------------------------------------------------------------- OpenAI


def openai_chat_problems(body: Any) -> list[str]:
    problems: list[str] = []
    if not isinstance(body, dict):
        return ["body is not a JSON object"]
    if not isinstance(body.get("model"), str) or not body["model"]:
        problems.append("model is required")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*problems, "messages must be a non-empty list"]
    pending: set[str] = set()
    for i, m in enumerate(messages):
        at = f"messages[{i}]"
        role = m.get("role") if isinstance(m, dict) else None
        if role not in OPENAI_ROLES:
            problems.append(f"{at}: unknown role {role!r}")
            continue
        if pending and role != "tool":
            problems.append(f"{at}: {role} message before the tool results of {sorted(pending)}")
            pending = set()
        if role in ("system", "developer") and not _text_parts_ok(m.get("content")):
            problems.append(f"{at}: {role} content must be text")
        elif role == "user":
            content = m.get("content")
            if not isinstance(content, str) and not (
                isinstance(content, list)
                and all(isinstance(p, dict) and p.get("type") in OPENAI_USER_PARTS for p in content)
            ):
                problems.append(f"{at}: user content must be a string or content parts")
        elif role == "assistant":
            calls = m.get("tool_calls")
            if m.get("content") is None and not calls:
                problems.append(f"{at}: assistant needs content or tool_calls")
            if m.get("content") is not None and not _text_parts_ok(m["content"]):
                problems.append(f"{at}: assistant content must be text")
            for j, call in enumerate(calls or ()):
                where = f"{at}.tool_calls[{j}]"
                if not isinstance(call.get("id"), str) or not call["id"]:
                    problems.append(f"{where}: id is required")
                if call.get("type") == "custom":
                    custom = call.get("custom") or {}
                    if not TOOL_NAME.match(str(custom.get("name", ""))):
                        problems.append(f"{where}: bad custom tool name {custom.get('name')!r}")
                    if not isinstance(custom.get("input"), str):
                        problems.append(f"{where}: a custom call's input must be text")
                    pending.add(call.get("id"))
                    continue
                if call.get("type") != "function":
                    problems.append(f"{where}: type must be 'function' or 'custom'")
                function = call.get("function") or {}
                if not TOOL_NAME.match(str(function.get("name", ""))):
                    problems.append(f"{where}: bad function name {function.get('name')!r}")
                arguments = function.get("arguments")
                if not isinstance(arguments, str):
                    problems.append(f"{where}: arguments must be a JSON string")
                else:
                    try:
                        if not isinstance(json.loads(arguments), dict):
                            problems.append(f"{where}: arguments must encode an object")
                    except ValueError:
                        problems.append(f"{where}: arguments are not valid JSON")
                pending.add(call.get("id"))
        elif role == "tool":
            call_id = m.get("tool_call_id")
            if call_id not in pending:
                problems.append(
                    f"{at}: tool message for {call_id!r} does not follow an assistant message "
                    "with that tool call id"
                )
            pending.discard(call_id)
            if not _text_parts_ok(m.get("content")):
                problems.append(f"{at}: tool content must be text")
    if pending:
        problems.append(f"the tool calls {sorted(pending)} have no tool message")
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not tools:
            problems.append("tools must be a non-empty list when present")
        else:
            names = []
            for j, tool in enumerate(tools):
                if tool.get("type") == "custom":
                    custom = tool.get("custom") or {}
                    if not TOOL_NAME.match(str(custom.get("name", ""))):
                        problems.append(f"tools[{j}]: bad custom tool name {custom.get('name')!r}")
                    names.append(custom.get("name"))
                    continue
                function = tool.get("function") or {}
                if tool.get("type") != "function":
                    problems.append(f"tools[{j}]: type must be 'function' or 'custom'")
                if not TOOL_NAME.match(str(function.get("name", ""))):
                    problems.append(f"tools[{j}]: bad function name {function.get('name')!r}")
                if not _schema_ok(function.get("parameters")):
                    problems.append(f"tools[{j}]: parameters must be an object schema")
                names.append(function.get("name"))
            if len(names) != len(set(names)):
                problems.append("tools: duplicate function names")
    if "parallel_tool_calls" in body:
        if not isinstance(body["parallel_tool_calls"], bool):
            problems.append("parallel_tool_calls must be a boolean")
        if not tools:
            problems.append("parallel_tool_calls is only allowed when tools are specified")
    for key in ("max_tokens", "max_completion_tokens"):
        if key in body and (not isinstance(body[key], int) or body[key] < 1):
            problems.append(f"{key} must be a positive integer")
    return problems


# --------------------------------------------------------------------------- Anthropic


def anthropic_messages_problems(body: Any, *, turn_rules: bool = True) -> list[str]:
    """`turn_rules=False` skips the first-message-is-user and ends-with-user rules."""
    problems: list[str] = []
    if not isinstance(body, dict):
        return ["body is not a JSON object"]
    if not isinstance(body.get("model"), str) or not body["model"]:
        problems.append("model is required")
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        problems.append("max_tokens is required (a positive integer)")
    if "system" in body and not _text_parts_ok(body["system"]):
        problems.append("system must be a string or text blocks")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*problems, "messages must be a non-empty list"]
    previous_uses: list[str] = []
    for i, m in enumerate(messages):
        at = f"messages[{i}]"
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ("user", "assistant"):
            problems.append(f"{at}: role must be user or assistant, got {role!r}")
            continue
        if i and messages[i - 1].get("role") == role:
            problems.append(f"{at}: two {role} messages in a row (roles must alternate)")
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list) or not blocks:
            problems.append(f"{at}: content must be a string or a non-empty list of blocks")
            blocks = []
        allowed = ANTHROPIC_USER_BLOCKS if role == "user" else ANTHROPIC_ASSISTANT_BLOCKS
        for j, block in enumerate(blocks):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind not in allowed:
                problems.append(f"{at}.content[{j}]: {kind!r} block not allowed in a {role} turn")
            elif kind == "text" and not block.get("text"):
                problems.append(f"{at}.content[{j}]: empty text block")
            elif kind in THINKING_BLOCKS:
                fields = ("thinking", "signature") if kind == "thinking" else ("data",)
                if not all(isinstance(block.get(f), str) for f in fields):
                    problems.append(f"{at}.content[{j}]: {kind} needs string {', '.join(fields)}")
                if "cache_control" in block:
                    problems.append(f"{at}.content[{j}]: cache_control on a {kind} block")
                if any(
                    isinstance(b, dict) and b.get("type") not in THINKING_BLOCKS for b in blocks[:j]
                ):
                    problems.append(f"{at}.content[{j}]: {kind} block after other blocks")
            elif kind == "tool_use":
                if not TOOL_USE_ID.match(str(block.get("id", ""))):
                    problems.append(f"{at}.content[{j}]: bad tool_use id {block.get('id')!r}")
                if not TOOL_NAME.match(str(block.get("name", ""))):
                    problems.append(f"{at}.content[{j}]: bad tool name {block.get('name')!r}")
                if not isinstance(block.get("input"), dict):
                    problems.append(f"{at}.content[{j}]: tool_use input must be an object")
            elif kind == "tool_result":
                if block.get("tool_use_id") not in previous_uses:
                    problems.append(
                        f"{at}.content[{j}]: tool_result for {block.get('tool_use_id')!r} does "
                        "not answer a tool_use of the assistant message right before it"
                    )
                if "content" in block and not isinstance(block["content"], str | list):
                    problems.append(f"{at}.content[{j}]: tool_result content must be str/list")
                if "is_error" in block and not isinstance(block["is_error"], bool):
                    problems.append(f"{at}.content[{j}]: is_error must be a boolean")
        if previous_uses:
            kinds = [b.get("type") for b in blocks if isinstance(b, dict)]
            leading = kinds[: len(previous_uses)]
            answered = [
                b.get("tool_use_id") for b in blocks[: len(previous_uses)] if isinstance(b, dict)
            ]
            if (
                role != "user"
                or leading != ["tool_result"] * len(previous_uses)
                or sorted(map(str, answered)) != sorted(previous_uses)
            ):
                problems.append(
                    f"{at}: must begin with tool_result blocks for {previous_uses} "
                    "(the tool_use blocks right before it)"
                )
        previous_uses = (
            [
                str(b.get("id"))
                for b in blocks
                if isinstance(b, dict) and b.get("type") == "tool_use"
            ]
            if role == "assistant"
            else []
        )
    if previous_uses:
        problems.append(f"the tool_use blocks {previous_uses} have no tool_result")
    if turn_rules:
        if messages[0].get("role") != "user":
            problems.append("messages[0]: the first message must use the user role")
        if messages[-1].get("role") != "user":
            problems.append(
                "the last message is an assistant message (a prefill), refused when tools "
                "are used and on current models"
            )
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not tools:
            problems.append("tools must be a non-empty list when present")
        else:
            for j, tool in enumerate(tools):
                if tool.get("type", "custom") != "custom" or "function" in tool:
                    problems.append(f"tools[{j}]: custom tools have no type/function wrapper")
                if not TOOL_NAME.match(str(tool.get("name", ""))):
                    problems.append(f"tools[{j}]: bad tool name {tool.get('name')!r}")
                if not _schema_ok(tool.get("input_schema")):
                    problems.append(f"tools[{j}]: input_schema must be an object schema")
    if "tool_choice" in body:
        choice = body["tool_choice"]
        if not tools:
            problems.append("tool_choice is only allowed when tools are specified")
        if not isinstance(choice, dict) or choice.get("type") not in ANTHROPIC_TOOL_CHOICES:
            problems.append(f"tool_choice: unknown choice {choice!r}")
        elif not isinstance(choice.get("disable_parallel_tool_use", False), bool):
            problems.append("tool_choice.disable_parallel_tool_use must be a boolean")
    return problems
