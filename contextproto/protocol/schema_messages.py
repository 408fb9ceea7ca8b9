"""What a JSON Schema validation error means for a person: one path and one sentence.

`jsonschema` reports every failure with a Python-flavoured message ("'x' is a required
property", "True is not of type 'integer'") and a path that, for `required` and
`additionalProperties`, stops at the object. Hosts and models need the path of the
offending value (`$.address.zip`) and a sentence in JSON terms that says what to change;
`first_problem` picks one error deterministically and words it so. The same code words the
metaschema's errors about a schema (`in_schema`), where the offending value is a keyword's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from jsonschema.exceptions import ValidationError, best_match

from .jsonschema_check import json_type_name

# How each checked format is written, for the message that refuses a value.
FORMAT_HINTS = {
    "date": "a date as YYYY-MM-DD, e.g. 2026-05-04",
    "date-time": "an RFC 3339 date-time with a time zone, e.g. 2026-05-04T09:30:00Z",
    "email": "an email address",
    "idn-email": "an email address",
    "ipv4": "an IPv4 address, e.g. 192.0.2.1",
    "ipv6": "an IPv6 address, e.g. 2001:db8::1",
    "regex": "a regular expression",
    "uri": "an absolute URI with a scheme, e.g. https://example.com/a (spaces and non-ASCII "
    "characters percent-encoded)",
    "uuid": "a UUID, e.g. 123e4567-e89b-12d3-a456-426614174000",
}

TYPE_NAMES = ("array", "boolean", "integer", "null", "number", "object", "string")
_COUNT = "a non-negative integer"
_SCHEMA = "a schema: an object, or true or false"
_SCHEMAS = "a non-empty array of schemas"
# In a schema, what a keyword's value must be: said whichever of its rules the value broke.
KEYWORD_RULES = {
    "$defs": "an object of named schemas",
    "$ref": "a string: a reference inside this schema, e.g. #/$defs/Name",
    "additionalProperties": _SCHEMA,
    "allOf": _SCHEMAS,
    "anyOf": _SCHEMAS,
    "dependentRequired": "an object of property-name arrays",
    "description": "a string",
    "enum": "an array of the allowed values",
    "exclusiveMaximum": "a number",
    "exclusiveMinimum": "a number",
    "format": "a string naming a format",
    "items": "one schema for every item (an object, or true or false); for a fixed sequence "
    "of item schemas use prefixItems",
    "maxItems": _COUNT,
    "maxLength": _COUNT,
    "maxProperties": _COUNT,
    "maximum": "a number",
    "minItems": _COUNT,
    "minLength": _COUNT,
    "minProperties": _COUNT,
    "minimum": "a number",
    "multipleOf": "a number above 0",
    "not": _SCHEMA,
    "oneOf": _SCHEMAS,
    "pattern": "a string: a regular expression",
    "patternProperties": "an object of schemas keyed by regular expressions",
    "prefixItems": _SCHEMAS,
    "properties": "an object of property schemas",
    "required": "an array of property names",
    "title": "a string",
    "type": f"one of {', '.join(TYPE_NAMES)}, or a non-empty array of them without repeats",
    "uniqueItems": "true or false",
}
# Metaschema keywords whose next schema-path step is their argument, not a keyword.
_NAMED_STEPS = frozenset({"properties", "patternProperties", "$defs", "dependentSchemas"})
_INDEXED_STEPS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
# Applicators that pass when one alternative does: their own error says least.
_WEAK = frozenset({"anyOf", "oneOf"})


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


def short(value: object) -> str:
    """`value` as JSON, cut to 60 characters (a message quotes values, never dumps them)."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def first_problem(errors: Iterable[ValidationError], *, in_schema: bool) -> SchemaProblem | None:
    """The one error to report of `errors`, as a path and a sentence; None when there is none.

    The same errors give the same answer whatever order the library produced them in: the
    shallowest error first (more is wrong there), then by path, a `type` error before other
    keywords and `anyOf`/`oneOf` last, then by the keyword's place in the schema. Inside an
    `anyOf`/`oneOf` the library's `best_match` picks the alternative that came closest.
    `in_schema` words errors of a schema checked against the metaschema.
    """
    found = list(errors)
    if not found:
        return None
    chosen = best_match([min(found, key=_order)])
    return _problem(chosen, in_schema=in_schema)


def _order(error: ValidationError) -> tuple[int, list[tuple[int, str]], int, list[str]]:
    path = [(0, f"{p:020d}") if isinstance(p, int) else (1, p) for p in error.absolute_path]
    keyword = str(error.validator)
    rank = 0 if keyword == "type" else 2 if keyword in _WEAK else 1
    return len(path), path, rank, [str(p) for p in error.absolute_schema_path]


def _path(parts: Sequence[str | int]) -> str:
    path = "$"
    for part in parts:
        path = child_path(path, part)
    return path


def _problem(error: ValidationError, *, in_schema: bool) -> SchemaProblem:
    path = _path(list(error.absolute_path))
    keyword, instance = error.validator, error.instance
    value: Any = error.validator_value  # typed with the library's "unset" marker
    schema = error.schema if isinstance(error.schema, dict) else {}
    if "propertyNames" in error.relative_schema_path and isinstance(instance, str):
        # The library checks a property's name in place of its value, at the object's path.
        return SchemaProblem(
            child_path(path, instance), f"the name {_problem_text(error, in_schema=in_schema)}"
        )
    if keyword == "uniqueItems" and isinstance(instance, list):
        index = _repeat_index(instance)
        return SchemaProblem(
            child_path(path, index),
            f"is listed twice ({short(instance[index])}); list each item once.",
        )
    if keyword == "format" and value == "regex" and in_schema:
        return SchemaProblem(path, _format_text("regex", instance, in_schema=True))
    rule = KEYWORD_RULES.get(_schema_keyword(error) or "") if in_schema else None
    if rule is not None:
        return SchemaProblem(path, f"must be {rule} (got {short(instance)}).")
    if keyword == "required" and isinstance(instance, dict):
        missing = next(name for name in value if name not in instance)
        return SchemaProblem(child_path(path, missing), "is required.")
    if keyword == "dependentRequired" and isinstance(instance, dict):
        for name, needed in value.items():
            absent = [n for n in needed if name in instance and n not in instance]
            if absent:
                return SchemaProblem(
                    child_path(path, absent[0]), f"is required when {name!r} is given."
                )
    if keyword == "additionalProperties" and value is False and isinstance(instance, dict):
        extra = _unexpected(schema, instance)
        if extra:
            allowed = ", ".join(schema.get("properties", {})) or "none"
            return SchemaProblem(
                child_path(path, extra[0]), f"is not an allowed property (allowed: {allowed})."
            )
    return SchemaProblem(path, _problem_text(error, in_schema=in_schema))


def _schema_keyword(error: ValidationError) -> str | None:
    """The keyword of the checked schema whose whole value a metaschema error is about.

    The metaschema checks a keyword's value under `properties/<keyword>`; its schema path
    alternates keywords and their arguments (a property name, an index), so it is read
    pairwise. The innermost such keyword counts when the error's path ends at it (an error
    inside its value, say one property's schema, is about that value instead).
    """
    steps = list(error.absolute_schema_path)
    keyword: str | int | None = None
    n = 0
    while n < len(steps):
        step = steps[n]
        takes_argument = step in _NAMED_STEPS or (
            step in _INDEXED_STEPS and n + 1 < len(steps) and isinstance(steps[n + 1], int)
        )
        if step == "properties" and n + 1 < len(steps):
            keyword = steps[n + 1]
        n += 2 if takes_argument else 1
    path = list(error.absolute_path)
    return keyword if isinstance(keyword, str) and path and path[-1] == keyword else None


def _unexpected(schema: dict[str, Any], instance: dict[str, Any]) -> list[str]:
    """The properties `additionalProperties: false` refuses, sorted (the library's rule)."""
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    return sorted(
        key
        for key in instance
        if key not in properties and not any(re.search(p, key) for p in patterns)
    )


def _repeat_index(items: list[Any]) -> int:
    """Where the first item equal to an earlier one is (JSON equality: 1 == 1.0)."""
    for n, item in enumerate(items):
        if any(_json_equal(item, earlier) for earlier in items[:n]):
            return n
    return 0


def _json_equal(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _problem_text(error: ValidationError, *, in_schema: bool) -> str:
    """The sentence for `error` alone (its path is the caller's)."""
    keyword, instance = error.validator, error.instance
    value: Any = error.validator_value
    got = f"(got {short(instance)})"
    if keyword is None:  # a `false` schema: nothing may be here
        return "is not allowed here (its schema is false)."
    if keyword == "type":
        return _type_text(error, in_schema=in_schema)
    if keyword == "enum":
        allowed = ", ".join(short(item) for item in value)
        return f"must be one of {allowed} {got}."
    if keyword == "const":
        return f"must be {short(value)} {got}."
    if keyword in _WEAK:
        return _alternatives_text(error, in_schema=in_schema)
    if keyword == "format":
        return _format_text(str(value), instance, in_schema=in_schema)
    text = _bound_text(str(keyword), value, instance)
    if text is not None:
        return text
    if keyword == "pattern":
        return f"must match the regular expression {value} {got}."
    if keyword == "not":
        return f"must not match the schema under 'not' {got}."
    if keyword == "items" and value is False and isinstance(instance, list):
        fixed = len(error.schema.get("prefixItems", [])) if isinstance(error.schema, dict) else 0
        return f"must have at most {fixed} items (got {len(instance)})."
    # A keyword generated schemas rarely use: the library's own sentence, named by keyword.
    return f"fails '{keyword}': {error.message}."


def _type_text(error: ValidationError, *, in_schema: bool) -> str:
    wanted: Any = error.validator_value
    names = [wanted] if isinstance(wanted, str) else list(wanted)
    got = json_type_name(error.instance)
    if in_schema and sorted(names) == ["boolean", "object"]:
        return f"must be {_SCHEMA} (got {got})."
    return f"must be {' or '.join(str(n) for n in names)} (got {got})."


def _bound_text(keyword: str, value: Any, instance: Any) -> str | None:
    if keyword in ("minLength", "maxLength") and isinstance(instance, str):
        side = "at least" if keyword == "minLength" else "at most"
        return f"must be {side} {value} characters (got {len(instance)})."
    if keyword in ("minItems", "maxItems") and isinstance(instance, list):
        side = "at least" if keyword == "minItems" else "at most"
        return f"must have {side} {value} items (got {len(instance)})."
    if keyword in ("minProperties", "maxProperties") and isinstance(instance, dict):
        side = "at least" if keyword == "minProperties" else "at most"
        return f"must have {side} {value} properties (got {len(instance)})."
    comparisons = {
        "minimum": "at least",
        "maximum": "at most",
        "exclusiveMinimum": "greater than",
        "exclusiveMaximum": "less than",
        "multipleOf": "a multiple of",
    }
    if keyword in comparisons:
        return f"must be {comparisons[keyword]} {short(value)} (got {short(instance)})."
    return None


def _format_text(name: str, instance: object, *, in_schema: bool) -> str:
    if name == "regex" and isinstance(instance, str):
        try:
            re.compile(instance)
        except re.error as exc:
            where = " (Python's re, which the checks use)" if in_schema else ""
            return f"is not a valid regular expression{where}: {exc} (got {short(instance)})."
    hint = FORMAT_HINTS.get(name, f"a valid {name}")
    return f"must be {hint} (got {short(instance)})."


def _alternatives_text(error: ValidationError, *, in_schema: bool) -> str:
    """Why no alternative of an anyOf/oneOf took the value (best_match found no closest)."""
    got = json_type_name(error.instance)
    if error.validator == "oneOf" and not error.context:
        return f"matches more than one alternative of oneOf; it must match exactly one (got {got})."
    # One error per alternative (its first), the alternatives in the schema's order.
    firsts: dict[int, ValidationError] = {}
    for sub in sorted(error.context, key=_order):
        firsts.setdefault(int(sub.relative_schema_path[0]), sub)
    branches = dict(sorted(firsts.items()))
    wanted = [_expectation(sub) for sub in branches.values()]
    if all(w is not None for w in wanted):
        only_types = all(sub.validator == "type" for sub in branches.values())
        shown = got if only_types else short(error.instance)
        return f"must be {' or '.join(w for w in wanted if w)} (got {shown})."
    problems = [_problem(sub, in_schema=in_schema) for sub in branches.values()]
    parts = [f"{problem.path} {problem.message.rstrip('.')}" for problem in problems]
    return f"matches none of the alternatives of {error.validator}: {'; or '.join(parts)}."


def _expectation(error: ValidationError) -> str | None:
    """What one alternative wanted, when it refused the value itself (not a part of it)."""
    if error.relative_path:
        return None
    wanted: Any = error.validator_value
    if error.validator == "type":
        return " or ".join([wanted] if isinstance(wanted, str) else wanted)
    if error.validator == "const":
        return short(wanted)
    if error.validator == "enum":
        return "one of " + ", ".join(short(item) for item in wanted)
    return None
