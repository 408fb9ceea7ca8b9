"""Check a protocol tool call's arguments against its catalog schema (contract §5.2, step 1)."""

from __future__ import annotations

from typing import Any

from .catalog import EXPECTED_WINDOW_ARG, ProtocolVersion, check_value, json_type_name
from .errors import INVALID_ARGUMENTS, TOOL_UNKNOWN, ProtocolError
from .host_wire import arguments_text_problem


def validate_tool_arguments(
    version: ProtocolVersion, tool_name: str, arguments: object
) -> dict[str, Any]:
    """Return the arguments with defaults applied, in schema order.

    Raises ProtocolError `tool_unknown` when `version` has no such tool, and
    `invalid_arguments` for the first problem found: not an object, an unknown
    key (sorted by name), then each property in schema order (missing, wrong
    type, enum, range, length, pattern). A missing `expectedWindowId` is let
    through: the dispatcher answers it next with its own code.
    """
    tool = version.tools.get(tool_name)
    if tool is None:
        available = list(version.tools)
        listed = ", ".join(available) if available else "none"
        raise ProtocolError(
            TOOL_UNKNOWN,
            f"{version.key} has no tool {tool_name!r}; its tools: {listed}.",
            {"tool": tool_name, "available": available},
        )

    if isinstance(arguments, str):
        # The provider's text, recorded as written because it is no JSON object (contract §5.2):
        # the model gets to try again.
        raise _invalid(
            tool_name,
            None,
            f"{tool_name}: the arguments are not a JSON object: "
            f"{arguments_text_problem(arguments)}. Call the tool again with the arguments as "
            "one JSON object.",
        )
    if not isinstance(arguments, dict):
        raise _invalid(
            tool_name,
            None,
            f"{tool_name}: arguments must be a JSON object, not {json_type_name(arguments)}.",
        )

    schema = tool["inputSchema"]
    properties: dict[str, Any] = schema["properties"]
    unknown = sorted((key for key in arguments if key not in properties), key=str)
    if unknown:
        key = unknown[0]
        raise _invalid(
            tool_name,
            str(key),
            f"{tool_name}: unknown argument {str(key)!r}; allowed: {', '.join(properties)}.",
        )

    required = set(schema.get("required", ()))
    normalized: dict[str, Any] = {}
    for name, prop in properties.items():
        if name not in arguments:
            if name in required and name != EXPECTED_WINDOW_ARG:
                raise _invalid(tool_name, name, f"{tool_name}: argument {name!r} is required.")
            if "default" in prop:
                normalized[name] = prop["default"]
            continue
        value = arguments[name]
        problem = check_value(prop, value)
        if problem is not None:
            raise _invalid(tool_name, name, f"{tool_name}: argument {name!r} {problem.message}.")
        normalized[name] = value
    return normalized


def _invalid(tool_name: str, argument: str | None, message: str) -> ProtocolError:
    return ProtocolError(INVALID_ARGUMENTS, message, {"argument": argument, "tool": tool_name})
