"""The API's JSON parser: DRF's, plus the checks every stored JSON value must pass.

PostgreSQL `text`/`jsonb` refuse NUL characters and non-finite numbers, UTF-8 cannot encode a
lone surrogate, and Python's JSON decoder recurses once per nesting level (and reads `NaN`,
`Infinity` and an overflowing `1e999` as floats no JSON column can hold). Left alone, each of
these fails deep inside a write as a 500, on one database and not the other. They are refused
here, once, for every endpoint, with 400 and the field that holds the bad value (see
docs/decisions.md). The MCP server runs the same `check_storable` on a tool call.
"""

from __future__ import annotations

import math
from typing import Any

from rest_framework.parsers import JSONParser

from contextproto.errors import (
    BODY_TOO_DEEP,
    NON_FINITE_NUMBER,
    UNSUPPORTED_CHARACTER,
    ApplicationError,
)

# Deeper than any message, argument or option document needs; far below the recursion
# limit of the decoder and of every serializer a value passes through afterwards.
MAX_JSON_DEPTH = 64


class StoredJSONParser(JSONParser):
    """Parse a JSON body and refuse values no database can store faithfully."""

    # DRF's strict mode refuses `NaN`/`Infinity` as a bare parse error; parsed, they reach
    # check_storable, which names their field like every other refusal here.
    strict = False

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise _too_deep("body") from exc
        check_storable(data)
        return data


def check_storable(value: Any, root: str = "") -> None:
    """Raise ApplicationError (400) for NUL, lone surrogates, non-finite numbers or nesting
    beyond the limit.

    Iterative, so a hostile document cannot exhaust the stack. Keys are checked as well as
    values; the error names the JSON path of the first offender.
    """
    stack: list[tuple[Any, str, int]] = [(value, root, 1)]
    while stack:
        node, path, depth = stack.pop()
        if isinstance(node, str):
            _check_text(node, path or "body")
            continue
        if isinstance(node, float):
            if not math.isfinite(node):
                raise _non_finite(path or "body", node)
            continue
        if not isinstance(node, dict | list):
            continue
        if depth > MAX_JSON_DEPTH:
            raise _too_deep(path or "body")
        if isinstance(node, dict):
            for key, child in node.items():
                child_path = f"{path}.{key}" if path else str(key)
                _check_text(str(key), child_path, what="key")
                stack.append((child, child_path, depth + 1))
        else:
            for position, child in enumerate(node):
                stack.append((child, f"{path}[{position}]", depth + 1))


def _check_text(text: str, field: str, what: str = "value") -> None:
    if "\x00" in text:
        problem = "a NUL character (\\u0000)"
    else:
        try:
            text.encode("utf-8")
            return
        except UnicodeEncodeError:
            problem = "a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff escape)"
    shown = _printable(field)
    raise ApplicationError(
        UNSUPPORTED_CHARACTER,
        f"{shown}: the {what} contains {problem}, which cannot be stored; remove it or "
        "replace it (e.g. with U+FFFD).",
        {"field": shown},
    )


def _printable(field: str) -> str:
    # The path itself may hold the bad character (a key); never echo it back raw.
    return field.replace("\x00", "\\u0000").encode("utf-8", "backslashreplace").decode("utf-8")


def _non_finite(field: str, number: float) -> ApplicationError:
    shown = "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")
    return ApplicationError(
        NON_FINITE_NUMBER,
        f"{_printable(field)}: {shown} is not a finite number (NaN, Infinity, or a literal "
        "beyond a 64-bit float such as 1e999), which cannot be stored; send a finite number, "
        "or the value as a string.",
        {"field": _printable(field)},
    )


def _too_deep(field: str) -> ApplicationError:
    return ApplicationError(
        BODY_TOO_DEEP,
        f"{_printable(field)}: JSON nested deeper than {MAX_JSON_DEPTH} levels; flatten it.",
        {"field": _printable(field), "maxDepth": MAX_JSON_DEPTH},
    )
