"""Host tools (SPEC §18): their name rule, reserved names, input schemas and argument checks.

A host tool's `inputSchema` is a JSON Schema object in the subset below, which
`arguments_problem` checks completely: the built-in runtime refuses a model's call whose
arguments fail it, so the host only ever receives arguments its schema allows. A keyword
outside the subset is refused when the tool is registered rather than silently unchecked.

`arguments_problem` follows JSON Schema 2020-12 for this subset (3.0 is an integer, a bool is
neither an integer nor a number, `pattern` searches); on a schema stored before these checks
existed it applies what it recognises and ignores the rest.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, TypeGuard

from .catalog import all_versions
from .jsonschema_check import json_type_name
from .vocabulary import JSON_INTEGER_MAX

# What providers accept as a function name (OpenAI and Anthropic alike).
NAME_RE = re.compile(r"[a-zA-Z0-9_-]{1,64}")
NAME_RULE = "1-64 characters: letters a-z and A-Z, digits, '_' and '-'"

TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")

ANNOTATIONS = frozenset({"title", "description", "default"})
ANY_TYPE_KEYWORDS = frozenset({"type", "enum", "const"})
OBJECT_KEYWORDS = frozenset({"properties", "required", "additionalProperties"})
ARRAY_KEYWORDS = frozenset({"items", "minItems", "maxItems"})
STRING_KEYWORDS = frozenset({"minLength", "maxLength", "pattern"})
NUMBER_KEYWORDS = frozenset({"minimum", "maximum"})
SUPPORTED_KEYWORDS = (
    ANNOTATIONS
    | ANY_TYPE_KEYWORDS
    | OBJECT_KEYWORDS
    | ARRAY_KEYWORDS
    | STRING_KEYWORDS
    | NUMBER_KEYWORDS
)
_SUPPORTED_TEXT = ", ".join(sorted(SUPPORTED_KEYWORDS))


def reserved_names() -> frozenset[str]:
    """Every tool name of every catalog version: host tools may not take them.

    Computed from the catalog, so a tool a new catalog version adds is reserved with it.
    """
    return frozenset(name for version in all_versions() for name in version.tools)


def name_problem(name: object) -> str | None:
    """Why `name` breaks the naming rule of host tools, or None (reservations: reserved_names)."""
    if not isinstance(name, str) or NAME_RE.fullmatch(name) is None:
        return f"name must be {NAME_RULE} (got {_short(name)})."
    return None


@dataclass(frozen=True)
class SchemaProblem:
    """Where (a JSON path from `$`, the schema's or the arguments' root) and what is wrong."""

    path: str
    message: str


def child_path(path: str, key: str | int) -> str:
    """`$.a` + "b" -> `$.a.b`; other keys in brackets (`$["a b"]`, `$.a[0]`)."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def _short(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False) if _is_json(value) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_json(value: object) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


# TypeGuard, not TypeIs: a False answer does not mean "not an int" (a bool, a negative).
def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= JSON_INTEGER_MAX


def _is_number(value: object) -> TypeGuard[int | float]:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value)


# ---------------------------------------------------------------- the schema itself


def input_schema_problem(schema: object) -> SchemaProblem | None:
    """The first reason `schema` is not a host tool input schema of the subset, or None.

    The root must be an object schema (`"type": "object"`); every nested schema is checked
    with the same keyword rules. Keywords are checked in sorted order, so the answer is
    the same whatever order the JSON had.
    """
    if not isinstance(schema, dict):
        return SchemaProblem("$", f"must be a JSON object (got {json_type_name(schema)}).")
    if schema.get("type") != "object":
        return SchemaProblem(
            "$.type",
            'the root schema must say "type": "object" (tool arguments are a JSON object); '
            f"got {_short(schema['type']) if 'type' in schema else 'no type'}.",
        )
    return _schema_problem(schema, "$")


def _schema_problem(schema: object, path: str) -> SchemaProblem | None:
    if not isinstance(schema, dict):
        return SchemaProblem(path, f"must be a schema object (got {json_type_name(schema)}).")
    for keyword in sorted(schema, key=str):
        if keyword not in SUPPORTED_KEYWORDS:
            return SchemaProblem(
                child_path(path, str(keyword)),
                f"{keyword!r} is not supported (the runtime could not check it); "
                f"supported keywords: {_SUPPORTED_TEXT}.",
            )
        problem = _keyword_problem(keyword, schema[keyword], child_path(path, keyword))
        if problem is not None:
            return problem
    return _consistency_problem(schema, path)


def _keyword_problem(keyword: str, value: object, path: str) -> SchemaProblem | None:
    if keyword in ("title", "description"):
        if not isinstance(value, str):
            return SchemaProblem(path, f"must be a string (got {json_type_name(value)}).")
    elif keyword == "type":
        return _type_problem(value, path)
    elif keyword == "enum":
        if not isinstance(value, list) or not value:
            return SchemaProblem(path, "must be a non-empty array of the allowed values.")
    elif keyword == "properties":
        if not isinstance(value, dict):
            return SchemaProblem(
                path, f"must be an object of property schemas (got {json_type_name(value)})."
            )
        for name, child in value.items():
            problem = _schema_problem(child, child_path(path, name))
            if problem is not None:
                return problem
    elif keyword == "required":
        return _required_problem(value, path)
    elif keyword == "additionalProperties":
        if not isinstance(value, bool):
            return SchemaProblem(
                path,
                f"must be true or false (got {json_type_name(value)}); schemas for "
                "additional properties are not supported.",
            )
    elif keyword == "items":
        if not isinstance(value, dict):
            return SchemaProblem(
                path, f"must be one schema object for every item (got {json_type_name(value)})."
            )
        return _schema_problem(value, path)
    elif keyword in ("minItems", "maxItems", "minLength", "maxLength"):
        if not _is_count(value):
            return SchemaProblem(path, f"must be a non-negative integer (got {_short(value)}).")
    elif keyword in NUMBER_KEYWORDS:
        if not _is_number(value):
            return SchemaProblem(path, f"must be a number (got {_short(value)}).")
    elif keyword == "pattern":
        if not isinstance(value, str):
            return SchemaProblem(path, f"must be a string (got {json_type_name(value)}).")
        try:
            re.compile(value)
        except re.error as exc:
            return SchemaProblem(path, f"is not a valid regular expression: {exc}.")
    return None  # default and const: any JSON value


def _type_problem(value: object, path: str) -> SchemaProblem | None:
    allowed = ", ".join(TYPES)
    if isinstance(value, str):
        if value not in TYPES:
            return SchemaProblem(path, f"must be one of {allowed} (got {_short(value)}).")
        return None
    if isinstance(value, list) and value:
        for n, item in enumerate(value):
            if not isinstance(item, str) or item not in TYPES:
                return SchemaProblem(
                    child_path(path, n), f"must be one of {allowed} (got {_short(item)})."
                )
        if len(set(value)) != len(value):
            return SchemaProblem(path, "lists a type twice.")
        return None
    return SchemaProblem(
        path, f"must be a type name or a non-empty array of them ({allowed}); got {_short(value)}."
    )


def _required_problem(value: object, path: str) -> SchemaProblem | None:
    if not isinstance(value, list):
        return SchemaProblem(
            path, f"must be an array of property names (got {json_type_name(value)})."
        )
    seen: set[str] = set()
    for n, item in enumerate(value):
        if not isinstance(item, str):
            return SchemaProblem(
                child_path(path, n), f"must be a property name (got {json_type_name(item)})."
            )
        if item in seen:
            return SchemaProblem(child_path(path, n), f"{item!r} is listed twice.")
        seen.add(item)
    return None


def _consistency_problem(schema: dict[str, Any], path: str) -> SchemaProblem | None:
    """Keywords that are well-formed alone but contradict each other or name nothing."""
    properties = schema.get("properties", {})
    for n, name in enumerate(schema.get("required", [])):
        if name not in properties:
            return SchemaProblem(
                child_path(child_path(path, "required"), n),
                f"{name!r} is required but not defined in properties.",
            )
    for low, high in (("minItems", "maxItems"), ("minLength", "maxLength"), ("minimum", "maximum")):
        if low in schema and high in schema and schema[low] > schema[high]:
            return SchemaProblem(
                child_path(path, low),
                f"{low} ({schema[low]}) is above {high} ({schema[high]}): no value could pass.",
            )
    return None


# ---------------------------------------------------------------- a call's arguments


def arguments_problem(schema: dict[str, Any], arguments: object) -> SchemaProblem | None:
    """The first reason `arguments` fail the host tool's `schema`, or None.

    Paths start at `$`, the arguments object. Order: type, enum/const, the type's own
    keywords; for objects unknown properties (sorted), then required ones and property values
    in the schema's order; for arrays each item in order.
    """
    return _value_problem(schema, arguments, "$")


def _type_matches(name: str, value: object) -> bool:
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    if name == "integer":
        if isinstance(value, float):
            return math.isfinite(value) and value.is_integer()
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return _is_number(value)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    return True  # a type this subset does not know (an older schema): not checked


def json_equal(a: object, b: object) -> bool:
    """JSON equality: 1 == 1.0, but true is not 1 and object key order does not matter."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _value_problem(schema: object, value: object, path: str) -> SchemaProblem | None:
    if not isinstance(schema, dict):
        return None
    expected = schema.get("type")
    names = [expected] if isinstance(expected, str) else expected
    if isinstance(names, list) and names:
        if not any(_type_matches(str(n), value) for n in names):
            wanted = " or ".join(str(n) for n in names)
            return SchemaProblem(path, f"must be {wanted} (got {json_type_name(value)}).")
    enum = schema.get("enum")
    if isinstance(enum, list) and not any(json_equal(value, item) for item in enum):
        allowed = ", ".join(_short(item) for item in enum)
        return SchemaProblem(path, f"must be one of {allowed} (got {_short(value)}).")
    if "const" in schema and not json_equal(value, schema["const"]):
        return SchemaProblem(path, f"must be {_short(schema['const'])} (got {_short(value)}).")
    if isinstance(value, str):
        return _string_problem(schema, value, path)
    if _is_number(value):
        return _number_problem(schema, value, path)
    if isinstance(value, list):
        return _array_problem(schema, value, path)
    if isinstance(value, dict):
        return _object_problem(schema, value, path)
    return None


def _string_problem(schema: dict[str, Any], value: str, path: str) -> SchemaProblem | None:
    low, high = schema.get("minLength"), schema.get("maxLength")
    if _is_count(low) and len(value) < low:
        return SchemaProblem(path, f"must be at least {low} characters (got {len(value)}).")
    if _is_count(high) and len(value) > high:
        return SchemaProblem(path, f"must be at most {high} characters (got {len(value)}).")
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            found = re.search(pattern, value)
        except re.error:
            return None  # an older schema's pattern this runtime cannot read: not checked
        if found is None:
            return SchemaProblem(path, f"must match {pattern} (got {_short(value)}).")
    return None


def _number_problem(schema: dict[str, Any], value: float, path: str) -> SchemaProblem | None:
    low, high = schema.get("minimum"), schema.get("maximum")
    if _is_number(low) and value < low:
        return SchemaProblem(path, f"must be at least {low} (got {_short(value)}).")
    if _is_number(high) and value > high:
        return SchemaProblem(path, f"must be at most {high} (got {_short(value)}).")
    return None


def _array_problem(schema: dict[str, Any], value: list[Any], path: str) -> SchemaProblem | None:
    low, high = schema.get("minItems"), schema.get("maxItems")
    if _is_count(low) and len(value) < low:
        return SchemaProblem(path, f"must have at least {low} items (got {len(value)}).")
    if _is_count(high) and len(value) > high:
        return SchemaProblem(path, f"must have at most {high} items (got {len(value)}).")
    items = schema.get("items")
    if isinstance(items, dict):
        for n, item in enumerate(value):
            problem = _value_problem(items, item, child_path(path, n))
            if problem is not None:
                return problem
    return None


def _object_problem(
    schema: dict[str, Any], value: dict[str, Any], path: str
) -> SchemaProblem | None:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    if schema.get("additionalProperties") is False:
        unknown = sorted(key for key in value if key not in properties)
        if unknown:
            allowed = ", ".join(properties) or "none"
            return SchemaProblem(
                child_path(path, unknown[0]), f"is not an allowed property (allowed: {allowed})."
            )
    required = schema.get("required")
    if isinstance(required, list):
        for name in required:
            if isinstance(name, str) and name not in value:
                return SchemaProblem(child_path(path, name), "is required.")
    for name, child in properties.items():
        if name in value:
            problem = _value_problem(child, value[name], child_path(path, name))
            if problem is not None:
                return problem
    return None
