"""The value checker of the catalog's schemas: one property schema, one value, one problem.

options.py and arguments.py check values with `check_value` instead of a general JSON Schema
library, so the rules (a bool is not an integer, 3.0 is not an integer) and the messages are
ours. The catalog's schemas use only SUPPORTED_KEYWORDS (tests/protocol/test_catalog.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .vocabulary import JSON_INTEGER_MAX

# ---------------------------------------------------------------- value checker

SUPPORTED_KEYWORDS = frozenset(
    {
        "type",
        "title",
        "description",
        "default",
        "minimum",
        "maximum",
        "enum",
        "minLength",
        "maxLength",
        "pattern",
    }
)

_TYPE_ARTICLE = {"string": "a string", "integer": "an integer", "boolean": "a boolean"}


@dataclass(frozen=True)
class Problem:
    """Why a value fails its schema: `kind` is type | range | enum | length | pattern."""

    kind: str
    message: str


def json_type_name(value: object) -> str:
    """Return the JSON type name of a Python value (for error messages)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _range_text(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f"between {minimum} and {maximum}"
    if minimum is not None:
        return f"at least {minimum}"
    return f"at most {maximum}"


def check_value(schema: dict[str, Any], value: object) -> Problem | None:
    """Return the first problem of `value` against one property schema, or None.

    Order: type, then enum, range, length, pattern. A bool is not an integer and
    an integral float is not an integer; strings are measured with `len()`.
    """
    expected = schema["type"]
    if expected == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif expected == "boolean":
        ok = isinstance(value, bool)
    elif expected == "string":
        ok = isinstance(value, str)
    else:  # pragma: no cover - a catalog bug, caught by the catalog tests
        raise ValueError(f"unsupported schema type {expected!r}")
    if not ok:
        return Problem("type", f"must be {_TYPE_ARTICLE[expected]} (got {json_type_name(value)})")

    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(str(item) for item in schema["enum"])
        return Problem("enum", f"must be one of: {allowed} (got {_short(value)})")

    minimum, maximum = schema.get("minimum"), schema.get("maximum")
    if isinstance(value, int) and not isinstance(value, bool):
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            # The JSON cap is a technical bound: name it only to a value beyond it.
            if maximum == JSON_INTEGER_MAX and value <= maximum:
                maximum = None
            wanted = _range_text(minimum, maximum)
            return Problem("range", f"must be {wanted} (got {_short(value)})")

    if isinstance(value, str):
        min_len, max_len = schema.get("minLength"), schema.get("maxLength")
        if min_len is not None and len(value) < min_len:
            if min_len == 1:
                return Problem("length", "must not be empty")
            return Problem("length", f"must be at least {min_len} characters (got {len(value)})")
        if max_len is not None and len(value) > max_len:
            return Problem("length", f"must be at most {max_len} characters (got {len(value)})")
        # Whole-string match: with re.search, "$" would also accept a trailing newline.
        if "pattern" in schema and re.fullmatch(schema["pattern"], value) is None:
            return Problem("pattern", f"must match {schema['pattern']} (got {_short(value)})")
    return None
