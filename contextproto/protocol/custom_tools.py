"""Custom (free-form) tools (contract §21): a tool whose input is text, not JSON arguments.

The Responses API and Chat Completions let a client declare a `custom` tool (Codex's
`apply_patch` is one), optionally with a grammar its input must match. Inside the service such
a tool is a client tool of kind `custom` whose one argument is that text: its schema is
`CUSTOM_INPUT_SCHEMA` and a call's arguments are `{"input": <text>}`, so the log, the
transcript, the argument check and every adapter that only knows JSON arguments treat it like
any tool, and the text goes back to the client as the model wrote it. Only the edges that know
free-form tools unwrap it: the Responses API both ways, Chat Completions' own `custom` tools
upstream; an Anthropic upstream sees the one-string-argument tool, its description saying
what the text must be (docs/decisions.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contextproto.protocol import json_texts

KIND_FUNCTION = "function"
KIND_CUSTOM = "custom"
INPUT = "input"

CUSTOM_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        INPUT: {"type": "string", "description": "The tool's free-form input, as text."}
    },
    "required": [INPUT],
    "additionalProperties": False,
}


def is_custom(tool: Mapping[str, Any]) -> bool:
    """Whether a tool definition (`{name, description, inputSchema, kind?, format?}`) is a
    custom tool."""
    return tool.get("kind") == KIND_CUSTOM


def custom_names(tools: Any) -> frozenset[str]:
    """The names of the custom tools among `tools` (definitions as the view sends them)."""
    return frozenset(str(t["name"]) for t in tools or () if isinstance(t, Mapping) and is_custom(t))


def custom_arguments(text: str) -> dict[str, Any]:
    """A custom call's arguments as the service stores them."""
    return {INPUT: text}


def custom_input(arguments: Any) -> str | None:
    """The text of a custom call's stored arguments, or None when they are not `{input}`."""
    if isinstance(arguments, Mapping) and set(arguments) == {INPUT}:
        text = arguments[INPUT]
        return text if isinstance(text, str) else None
    return None


def call_input_text(arguments: Any) -> str:
    """The text a custom call goes out with: its `input`, else the arguments as JSON text (a
    model that answered a custom tool with something else; the argument check refuses it)."""
    text = custom_input(arguments)
    if text is not None:
        return text
    if isinstance(arguments, str):
        return arguments
    return json_texts.compact(arguments)


def chat_format(custom_format: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A Responses custom tool's `format` in Chat Completions' words
    (`{"type": "grammar", "grammar": {"definition", "syntax"}}`), or None for text."""
    if not custom_format or custom_format.get("type") != "grammar":
        return None
    return {
        "type": "grammar",
        "grammar": {
            "definition": custom_format.get("definition"),
            "syntax": custom_format.get("syntax"),
        },
    }


def described(tool: Mapping[str, Any]) -> str:
    """A custom tool's description for an API without free-form tools: what it does, that its
    one argument `input` is the free-form text, and the grammar that text must match."""
    description = str(tool.get("description") or "")
    note = (
        "Its one argument, `input`, is the tool's free-form input as text (not JSON), passed "
        "on as written."
    )
    custom_format = tool.get("format")
    if isinstance(custom_format, Mapping) and custom_format.get("type") == "grammar":
        syntax = custom_format.get("syntax") or "lark"
        note += (
            f" The text must match this {syntax} grammar:\n{custom_format.get('definition', '')}"
        )
    return f"{description}\n\n{note}" if description else note
