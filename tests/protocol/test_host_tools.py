"""Host tools in the engine (SPEC §18): names, reserved names, input schemas, argument checks."""

from __future__ import annotations

import dataclasses

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextproto.protocol import catalog
from contextproto.protocol.host_tools import (
    SUPPORTED_KEYWORDS,
    arguments_problem,
    input_schema_problem,
    name_problem,
    reserved_names,
)

# ---------------------------------------------------------------- names


def test_every_tool_of_every_catalog_version_is_reserved() -> None:
    every = {name for version in catalog.all_versions() for name in version.tools}
    assert every and reserved_names() == every
    assert catalog.PROTOCOL_TOOL_NAMES <= reserved_names()


def test_a_tool_a_new_catalog_version_adds_is_reserved_with_it(monkeypatch) -> None:
    latest = catalog.all_versions()[-1]
    future_tool = {"name": "context_future_tool", "description": "d", "inputSchema": {}}
    future = dataclasses.replace(
        latest, version=99, tools={**latest.tools, "context_future_tool": future_tool}
    )
    assert "context_future_tool" not in reserved_names()
    monkeypatch.setattr(catalog, "_VERSIONS", (*catalog.all_versions(), future))
    assert "context_future_tool" in reserved_names()


@pytest.mark.parametrize("name", ["lookup", "get_weather", "A-1", "x", "a" * 64, "0_9-Z"])
def test_provider_function_names_are_accepted(name: str) -> None:
    assert name_problem(name) is None


@pytest.mark.parametrize(
    "name", ["", "a" * 65, "has space", "dot.name", "naïve", "new\nline", "lookup\n", None, 5]
)
def test_other_names_are_refused_with_the_rule(name: object) -> None:
    problem = name_problem(name)
    assert problem is not None and "1-64 characters" in problem


# ---------------------------------------------------------------- input schemas

OBJ = {"type": "object"}


def props(**schemas: dict) -> dict:
    return {"type": "object", "properties": schemas}


BAD_SCHEMAS = [
    ([], "$", "must be a JSON object"),
    ("{}", "$", "must be a JSON object"),
    ({}, "$.type", "root schema must say"),
    ({"type": "array", "items": OBJ}, "$.type", "root schema must say"),
    ({"type": ["object", "null"]}, "$.type", "root schema must say"),
    ({**OBJ, "$schema": "https://json-schema.org/draft/2020-12/schema"}, '$["$schema"]', "not"),
    (props(q={"type": "string", "format": "email"}), "$.properties.q.format", "not supported"),
    (props(q={"anyOf": [{"type": "string"}]}), "$.properties.q.anyOf", "not supported"),
    (props(q={"type": "strin"}), "$.properties.q.type", "must be one of"),
    (props(q={"type": []}), "$.properties.q.type", "non-empty array"),
    (props(q={"type": ["string", 3]}), "$.properties.q.type[1]", "must be one of"),
    (props(q={"type": ["string", "string"]}), "$.properties.q.type", "twice"),
    (props(q={"type": "string", "minLength": "3"}), "$.properties.q.minLength", "non-negative"),
    (props(q={"type": "string", "maxLength": -1}), "$.properties.q.maxLength", "non-negative"),
    (props(q={"type": "string", "maxLength": True}), "$.properties.q.maxLength", "non-negative"),
    (props(q={"type": "string", "pattern": "("}), "$.properties.q.pattern", "regular expression"),
    (props(q={"type": "string", "pattern": 5}), "$.properties.q.pattern", "must be a string"),
    (props(q={"type": "integer", "minimum": "1"}), "$.properties.q.minimum", "must be a number"),
    (props(q={"type": "string", "enum": []}), "$.properties.q.enum", "non-empty array"),
    (props(q={"type": "string", "description": 5}), "$.properties.q.description", "string"),
    (props(q="string"), "$.properties.q", "must be a schema object"),
    ({**OBJ, "properties": []}, "$.properties", "object of property schemas"),
    ({**OBJ, "required": "q"}, "$.required", "array of property names"),
    ({**props(q=OBJ), "required": ["q", "q"]}, "$.required[1]", "listed twice"),
    ({**props(q=OBJ), "required": ["q", 1]}, "$.required[1]", "property name"),
    ({**props(q=OBJ), "required": ["x"]}, "$.required[0]", "not defined in properties"),
    ({**OBJ, "additionalProperties": {"type": "string"}}, "$.additionalProperties", "true or"),
    (props(a={"type": "array", "items": [OBJ]}), "$.properties.a.items", "one schema object"),
    (
        props(a={"type": "array", "items": {"type": "string", "minLength": 1.5}}),
        "$.properties.a.items.minLength",
        "non-negative",
    ),
    (
        props(q={"type": "string", "minLength": 5, "maxLength": 2}),
        "$.properties.q.minLength",
        "above",
    ),
    (props(q={"type": "number", "minimum": 5, "maximum": 2}), "$.properties.q.minimum", "above"),
    (props(**{"a b": {"type": "nope"}}), '$.properties["a b"].type', "must be one of"),
    (
        props(o={"type": "object", "properties": {"deep": {"type": "string", "x-ui": 1}}}),
        '$.properties.o.properties.deep["x-ui"]',
        "not supported",
    ),
]


@pytest.mark.parametrize(("schema", "path", "says"), BAD_SCHEMAS)
def test_a_bad_input_schema_is_refused_at_its_json_path(schema, path, says) -> None:
    problem = input_schema_problem(schema)
    assert problem is not None
    assert (problem.path, says in problem.message) == (path, True), problem


def test_an_unsupported_keyword_names_the_supported_ones() -> None:
    problem = input_schema_problem({**OBJ, "oneOf": []})
    assert problem is not None
    assert all(keyword in problem.message for keyword in SUPPORTED_KEYWORDS)


GOOD_SCHEMAS = [
    OBJ,
    {**OBJ, "properties": {}, "required": [], "additionalProperties": False},
    {
        "type": "object",
        "title": "Create an event",
        "description": "All the fields of an event.",
        "properties": {
            "title": {"type": "string", "minLength": 1, "maxLength": 200},
            "day": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
            "attendees": {
                "type": "array",
                "minItems": 1,
                "maxItems": 50,
                "items": {
                    "type": "object",
                    "properties": {"email": {"type": "string"}, "optional": {"type": "boolean"}},
                    "required": ["email"],
                    "additionalProperties": False,
                },
            },
            "priority": {"type": "integer", "minimum": 1, "maximum": 5, "default": 3},
            "budget": {"type": ["number", "null"], "minimum": 0},
            "kind": {"enum": ["meeting", "call"]},
            "version": {"const": 2},
        },
        "required": ["title", "day"],
        "additionalProperties": False,
    },
]


@pytest.mark.parametrize("schema", GOOD_SCHEMAS)
def test_schemas_of_the_subset_are_accepted_and_are_valid_json_schema(schema) -> None:
    assert input_schema_problem(schema) is None
    jsonschema.Draft202012Validator.check_schema(schema)


# ---------------------------------------------------------------- arguments

EVENT = GOOD_SCHEMAS[2]
GOOD_EVENT = {"title": "Sync", "day": "2026-05-04", "attendees": [{"email": "a@x"}]}

BAD_ARGUMENTS = [
    ("not an object", "$", "must be object"),
    ({"day": "2026-05-04"}, "$.title", "is required"),
    ({**GOOD_EVENT, "room": "B"}, "$.room", "not an allowed property"),
    ({**GOOD_EVENT, "title": ""}, "$.title", "at least 1 characters"),
    ({**GOOD_EVENT, "title": 5}, "$.title", "must be string"),
    ({**GOOD_EVENT, "day": "May 4"}, "$.day", "must match"),
    ({**GOOD_EVENT, "attendees": []}, "$.attendees", "at least 1 items"),
    ({**GOOD_EVENT, "attendees": [{"email": "a"}, {}]}, "$.attendees[1].email", "is required"),
    ({**GOOD_EVENT, "attendees": [{"email": "a", "x": 1}]}, "$.attendees[0].x", "not an allowed"),
    ({**GOOD_EVENT, "priority": 9}, "$.priority", "at most 5"),
    ({**GOOD_EVENT, "priority": 2.5}, "$.priority", "must be integer"),
    ({**GOOD_EVENT, "priority": True}, "$.priority", "must be integer"),
    ({**GOOD_EVENT, "budget": "10"}, "$.budget", "must be number or null"),
    ({**GOOD_EVENT, "budget": -1}, "$.budget", "at least 0"),
    ({**GOOD_EVENT, "kind": "party"}, "$.kind", "must be one of"),
    ({**GOOD_EVENT, "version": True}, "$.version", "must be 2"),
]


@pytest.mark.parametrize(("arguments", "path", "says"), BAD_ARGUMENTS)
def test_arguments_that_fail_the_schema_are_named_by_path(arguments, path, says) -> None:
    problem = arguments_problem(EVENT, arguments)
    assert problem is not None
    assert (problem.path, says in problem.message) == (path, True), problem


@pytest.mark.parametrize(
    "arguments",
    [
        GOOD_EVENT,
        {**GOOD_EVENT, "priority": 3.0, "budget": None, "kind": "call", "version": 2.0},
        {**GOOD_EVENT, "budget": 12.5, "attendees": [{"email": "a", "optional": True}]},
    ],
)
def test_arguments_the_schema_allows_pass(arguments) -> None:
    assert arguments_problem(EVENT, arguments) is None


def test_a_schema_stored_before_the_checks_is_applied_as_far_as_it_is_understood() -> None:
    legacy = {
        "type": "object",
        "properties": {"q": {"type": "string", "format": "email", "pattern": "("}},
        "required": ["q"],
    }
    assert arguments_problem(legacy, {"q": "anything"}) is None
    assert arguments_problem(legacy, {}).path == "$.q"
    assert arguments_problem({}, [1, 2]) is None


# ---------------------------------------------------------------- agreement with JSON Schema

_NAMES = st.sampled_from(["a", "b", "c d"])


def _bounds(draw, low_name: str, high_name: str, values) -> dict:
    low, high = draw(st.one_of(st.none(), values)), draw(st.one_of(st.none(), values))
    if low is not None and high is not None and low > high:
        low, high = high, low
    return {k: v for k, v in ((low_name, low), (high_name, high)) if v is not None}


@st.composite
def _leaf(draw) -> dict:
    kind = draw(st.sampled_from(["string", "integer", "number", "boolean", "null", "multi"]))
    if kind == "string":
        schema = {"type": "string", **_bounds(draw, "minLength", "maxLength", st.integers(0, 4))}
        if draw(st.booleans()):
            schema["pattern"] = draw(st.sampled_from(["^a", "b$", "[0-9]", "^$"]))
        return schema
    if kind in ("integer", "number"):
        values = st.one_of(st.integers(-3, 3), st.floats(-3, 3, allow_nan=False))
        return {"type": kind, **_bounds(draw, "minimum", "maximum", values)}
    if kind == "multi":
        return {"type": draw(st.sampled_from([["string", "null"], ["integer", "boolean"]]))}
    schema: dict = {"type": kind}
    if draw(st.booleans()):
        schema["enum"] = draw(st.lists(_JSON, min_size=1, max_size=3))
    return schema


def _objects(children):
    @st.composite
    def build(draw) -> dict:
        properties = draw(st.dictionaries(_NAMES, children, max_size=3))
        schema: dict = {"type": "object", "properties": properties}
        schema["required"] = (
            draw(st.lists(st.sampled_from(sorted(properties)), unique=True)) if (properties) else []
        )
        if draw(st.booleans()):
            schema["additionalProperties"] = draw(st.booleans())
        return schema

    return build()


def _arrays(children):
    return st.builds(
        lambda items, bounds: {"type": "array", "items": items, **bounds},
        children,
        st.sampled_from([{}, {"minItems": 1}, {"maxItems": 1}, {"minItems": 1, "maxItems": 2}]),
    )


_JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-4, 4),
        st.floats(-4, 4, allow_nan=False),
        st.sampled_from(["", "a", "ab", "b", "a1", "xyzzy"]),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(_NAMES, children, max_size=3)
    ),
    max_leaves=8,
)
_SCHEMAS = _objects(
    st.recursive(
        _leaf(), lambda children: st.one_of(_objects(children), _arrays(children)), max_leaves=6
    )
)


@settings(max_examples=300, deadline=None)
@given(schema=_SCHEMAS, arguments=_JSON)
def test_the_argument_check_agrees_with_json_schema(schema, arguments) -> None:
    """Every schema of the subset is accepted, and the check passes exactly what JSON Schema
    2020-12 passes."""
    assert input_schema_problem(schema) is None, schema
    expected = jsonschema.Draft202012Validator(schema).is_valid(arguments)
    assert (arguments_problem(schema, arguments) is None) == expected, (schema, arguments)
