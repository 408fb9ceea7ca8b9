"""Host tools in the engine (contract §11): names, reserved names, input schemas, argument
checks."""

from __future__ import annotations

import dataclasses
import json
import socket
import urllib.request

import jsonschema
import pytest
import referencing.exceptions
from hypothesis import given, settings
from hypothesis import strategies as st

from contextproto.protocol import catalog, host_tools
from contextproto.protocol.host_tools import (
    SchemaProblem,
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
    # Not an object schema at the root: tool arguments are a JSON object.
    ([], "$", "must be a JSON object"),
    ("{}", "$", "must be a JSON object"),
    ({}, "$.type", "root schema must say"),
    ({"type": "array", "items": OBJ}, "$.type", "root schema must say"),
    ({"type": ["object", "null"]}, "$.type", "root schema must say"),
    ({"$ref": "#/$defs/Node", "$defs": {"Node": OBJ}}, "$.type", "must be inlined"),
    # Against the 2020-12 metaschema.
    (props(q={"type": "strin"}), "$.properties.q.type", "must be one of"),
    (props(q={"type": "strng"}), "$.properties.q.type", "must be one of array, boolean"),
    (props(q={"type": []}), "$.properties.q.type", "non-empty array"),
    (props(q={"type": ["string", 3]}), "$.properties.q.type[1]", "must be one of"),
    (props(q={"type": ["string", "string"]}), "$.properties.q.type[1]", "twice"),
    (props(q={"type": "string", "minLength": "3"}), "$.properties.q.minLength", "non-negative"),
    (props(q={"type": "string", "maxLength": -1}), "$.properties.q.maxLength", "non-negative"),
    (props(q={"type": "string", "maxLength": True}), "$.properties.q.maxLength", "non-negative"),
    (props(q={"type": "string", "pattern": "("}), "$.properties.q.pattern", "regular expression"),
    (props(q={"type": "string", "pattern": 5}), "$.properties.q.pattern", "must be a string"),
    (props(q={"type": "integer", "minimum": "1"}), "$.properties.q.minimum", "must be a number"),
    (props(q={"type": "string", "description": 5}), "$.properties.q.description", "string"),
    (props(q={"format": 1}), "$.properties.q.format", "must be a string"),
    (props(q="string"), "$.properties.q", "must be a schema"),
    ({**OBJ, "properties": []}, "$.properties", "object of property schemas"),
    ({**OBJ, "required": "q"}, "$.required", "array of property names"),
    ({**OBJ, "required": "x"}, "$.required", "array of property names"),
    ({**props(q=OBJ), "required": ["q", "q"]}, "$.required[1]", "listed twice"),
    ({**props(q=OBJ), "required": ["q", 1]}, "$.required[1]", "must be string"),
    (props(a={"type": "array", "items": [OBJ]}), "$.properties.a.items", "use prefixItems"),
    (
        props(a={"type": "array", "items": {"type": "string", "minLength": 1.5}}),
        "$.properties.a.items.minLength",
        "non-negative",
    ),
    (props(**{"a b": {"type": "nope"}}), '$.properties["a b"].type', "must be one of"),
    (props(q={"anyOf": []}), "$.properties.q.anyOf", "non-empty array of schemas"),
    ({**OBJ, "$defs": {"A": {"type": "nope"}}}, '$["$defs"].A.type', "must be one of"),
    ({**OBJ, "patternProperties": {"(": OBJ}}, '$.patternProperties["("]', "regular expression"),
    # Another dialect is not read as 2020-12 silently: an unknown one at the root, or one
    # that differs from the root's inside it.
    (
        {**OBJ, "$schema": "http://example.com/my-dialect"},
        '$["$schema"]',
        'remove "$schema" or set it to "https://json-schema.org/draft/2020-12/schema"',
    ),
    (
        props(q={"$schema": "http://json-schema.org/draft-07/schema#", "type": "string"}),
        '$.properties.q["$schema"]',
        "names another dialect",
    ),
    # References: only inside the document, and to a schema there.
    (props(q={"$ref": "https://example.com/q.json"}), '$.properties.q["$ref"]', "never fetched"),
    (props(q={"$ref": "other.json#/x"}), '$.properties.q["$ref"]', "never fetched"),
    (props(q={"$ref": "other.json"}), '$.properties.q["$ref"]', "never fetched"),
    (props(q={"$dynamicRef": "https://x/y#meta"}), '$.properties.q["$dynamicRef"]', "fetched"),
    (
        {**OBJ, "$id": "https://example.com/tool.json", "properties": {"q": {"$ref": "q.json"}}},
        '$.properties.q["$ref"]',
        "never fetched",
    ),
    (props(q={"$ref": "#/$defs/Missing"}), '$.properties.q["$ref"]', "points to nothing"),
    (props(q={"$ref": "#missing-anchor"}), '$.properties.q["$ref"]', "points to nothing"),
    (props(q={"$ref": "#/properties"}), '$.properties.q["$ref"]', "not a schema"),
    (props(q={"$ref": 5}), '$.properties.q["$ref"]', "reference inside this schema"),
    # A loop that never reaches a value would make the library recurse forever.
    (props(q={"$ref": "#/properties/q"}), '$.properties.q["$ref"]', "break the loop"),
    ({**OBJ, "allOf": [{"$ref": "#"}]}, '$.allOf[0]["$ref"]', "never end"),
    (
        {
            **props(q={"$ref": "#/$defs/A"}),
            "$defs": {"A": {"anyOf": [{"$ref": "#/$defs/B"}]}, "B": {"not": {"$ref": "#/$defs/A"}}},
        },
        '$["$defs"].A.anyOf[0]["$ref"]',
        "leads back to this schema",
    ),
]


@pytest.mark.parametrize(("schema", "path", "says"), BAD_SCHEMAS)
def test_a_bad_input_schema_is_refused_at_its_json_path(schema, path, says) -> None:
    problem = input_schema_problem(schema)
    assert problem is not None
    assert (problem.path, says in problem.message) == (path, True), problem


def test_a_remote_reference_is_refused_with_what_to_do_instead() -> None:
    problem = input_schema_problem(props(address={"$ref": "https://example.com/address.json"}))
    assert problem == SchemaProblem(
        '$.properties.address["$ref"]',
        '"https://example.com/address.json" refers outside this schema, which is never '
        'fetched; put the referenced schema under "$defs" and refer to it as '
        '"#/$defs/<Name>".',
    )


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
    # What frameworks generate, which the old subset refused.
    {"type": ["object"], "$schema": "https://json-schema.org/draft/2020-12/schema"},
    props(q={"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}),
    props(when={"type": "string", "format": "date-time"}, site={"format": "uri"}),
    props(q={"type": "string", "format": "city"}),  # an unknown format is an annotation
    {
        **props(home={"$ref": "#/$defs/Address"}, work={"anyOf": [{"$ref": "#/$defs/Address"}]}),
        "$defs": {"Address": {**props(zip={"type": "string"}), "required": ["zip"]}},
    },
    {
        **props(pet={"oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}]}),
        "$defs": {
            "Cat": props(kind={"const": "cat"}),
            "Dog": {"allOf": [props(kind={"const": "dog"}), {"required": ["kind"]}]},
        },
    },
    {
        **props(children={"type": "array", "items": {"$ref": "#/$defs/Node"}}),
        "$defs": {"Node": props(children={"type": "array", "items": {"$ref": "#/$defs/Node"}})},
    },
    props(point={"type": "array", "prefixItems": [{"type": "number"}] * 2, "items": False}),
    {**OBJ, "additionalProperties": {"type": "string"}, "patternProperties": {"^x-": {}}},
    {**OBJ, "required": ["q"]},  # required without properties: valid, and checked
    props(q={"enum": []}, n={"minimum": 5, "maximum": 2}, x={"x-ui": {"widget": "slider"}}),
    props(q={"$ref": "#addr"}, a={"$anchor": "addr", "type": "string"}),
    {
        **OBJ,
        "$id": "https://example.com/tool.json",
        "properties": {"q": {"$ref": "#/$defs/Q"}},
        "$defs": {"Q": {"type": "string"}},
    },
    props(q=True, never=False),
]


@pytest.mark.parametrize("schema", GOOD_SCHEMAS)
def test_json_schema_2020_12_object_schemas_are_accepted(schema) -> None:
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


ORDER = {
    "type": "object",
    "$defs": {
        "Address": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
            "required": ["city", "zip"],
        },
        "Line": {
            "type": "object",
            "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
            "required": ["sku", "qty"],
        },
    },
    "properties": {
        "ship_to": {"$ref": "#/$defs/Address"},
        "bill_to": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}], "default": None},
        "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}, "minItems": 1},
        "note": {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]},
        "mode": {"anyOf": [{"const": "fast"}, {"const": "cheap"}, {"type": "null"}]},
        "extra": {"type": "object", "additionalProperties": {"type": "integer"}},
        "point": {"type": "array", "prefixItems": [{"type": "number"}] * 2, "items": False},
    },
    "required": ["ship_to", "lines"],
}
GOOD_ORDER = {"ship_to": {"city": "Oslo", "zip": "0150"}, "lines": [{"sku": "A", "qty": 1}]}

BAD_ORDERS = [
    ({**GOOD_ORDER, "ship_to": {"city": "Oslo"}}, "$.ship_to.zip", "is required."),
    ({**GOOD_ORDER, "bill_to": {"zip": "1"}}, "$.bill_to.city", "is required."),
    ({**GOOD_ORDER, "bill_to": 5}, "$.bill_to", "must be object or null (got integer)."),
    (
        {**GOOD_ORDER, "lines": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 1}, {"sku": "C"}]},
        "$.lines[2].qty",
        "is required.",
    ),
    (
        {**GOOD_ORDER, "lines": [{"sku": "A", "qty": 0}]},
        "$.lines[0].qty",
        "must be at least 1 (got 0).",
    ),
    ({**GOOD_ORDER, "note": "too long"}, "$.note", "must be at most 5 characters (got 8)."),
    ({**GOOD_ORDER, "note": 3}, "$.note", "must be string or null (got integer)."),
    ({**GOOD_ORDER, "mode": "slow"}, "$.mode", 'must be "fast" or "cheap" or null (got "slow").'),
    ({**GOOD_ORDER, "extra": {"a": 1, "b": "x"}}, "$.extra.b", "must be integer (got string)."),
    ({**GOOD_ORDER, "point": [1, 2, 3]}, "$.point", "must have at most 2 items (got 3)."),
    ({**GOOD_ORDER, "point": [1, "y"]}, "$.point[1]", "must be number (got string)."),
    ({"lines": []}, "$.ship_to", "is required."),
]


@pytest.mark.parametrize(("arguments", "path", "message"), BAD_ORDERS)
def test_arguments_of_a_generated_schema_are_named_through_refs_and_unions(
    arguments, path, message
) -> None:
    assert input_schema_problem(ORDER) is None
    assert arguments_problem(ORDER, arguments) == SchemaProblem(path, message)


def test_the_first_problem_does_not_depend_on_key_order() -> None:
    """Several problems at once: the same one is reported, however the JSON was ordered
    (PostgreSQL's jsonb reorders keys)."""

    def reverse(value):
        if isinstance(value, dict):
            return {k: reverse(v) for k, v in reversed(list(value.items()))}
        if isinstance(value, list):
            return [reverse(v) for v in value]
        return value

    arguments = {"ship_to": {"zip": 5}, "lines": [{"qty": "x"}], "note": 3, "mode": "slow"}
    first = arguments_problem(ORDER, arguments)
    # The shallowest problems are at depth 1 ($.mode, $.note, $.ship_to); then by path.
    assert first == SchemaProblem("$.mode", 'must be "fast" or "cheap" or null (got "slow").')
    assert arguments_problem(ORDER, {**arguments, "mode": None, "note": None}) == SchemaProblem(
        "$.ship_to.city", "is required."
    )
    for _ in range(3):
        host_tools.cache_clear()
        assert arguments_problem(reverse(ORDER), reverse(arguments)) == first
        assert arguments_problem(ORDER, arguments) == first


FORMATS = [
    ("date-time", "2026-05-04T09:30:00Z", True),
    ("date-time", "2026-05-04t09:30:00.123+02:00", True),
    ("date-time", "2026-12-31T23:59:60Z", True),
    ("date-time", "2026-05-04T09:30:00", False),  # RFC 3339 needs a time zone
    ("date-time", "2026-02-30T09:30:00Z", False),
    ("date-time", "2026-05-04T24:00:00Z", False),
    ("date-time", "2026-05-04T09:30:00+25:00", False),
    ("date-time", "tomorrow", False),
    ("date", "2026-05-04", True),
    ("date", "2026-5-4", False),
    ("uri", "https://example.com/a?b=c#d", True),
    ("uri", "urn:isbn:0451450523", True),
    ("uri", "https://example.com/a%20b", True),
    ("uri", "/relative/path", False),
    ("uri", "https://example.com/a b", False),
    ("uri", "not a url", False),
    ("email", "ann@example.com", True),
    ("email", "ann.example.com", False),
    ("uuid", "123e4567-e89b-12d3-a456-426614174000", True),
    ("uuid", "123e4567", False),
    ("ipv4", "192.0.2.1", True),
    ("ipv4", "192.0.2.256", False),
    ("ipv6", "2001:db8::1", True),
    ("ipv6", "2001:db8:::1", False),
    ("regex", "^a+$", True),
    ("regex", "(", False),
    # Not checked: annotations, as 2020-12 has formats by default.
    ("time", "not a time", True),
    ("hostname", "not a hostname!", True),
    ("city", "anything", True),
]


@pytest.mark.parametrize(("name", "value", "valid"), FORMATS)
def test_the_checked_formats_refuse_malformed_values_and_say_how_to_write_them(
    name, value, valid
) -> None:
    schema = props(q={"type": "string", "format": name})
    assert input_schema_problem(schema) is None
    problem = arguments_problem(schema, {"q": value})
    assert (problem is None) == valid, problem
    if not valid:
        assert problem.path == "$.q"
        assert problem.message.startswith("must be ") or "regular expression" in problem.message
        assert json.dumps(value) in problem.message
    assert name in host_tools.CHECKED_FORMATS or valid


def test_a_date_time_message_gives_an_example() -> None:
    problem = arguments_problem(props(at={"format": "date-time"}), {"at": "2026-05-04 09:30"})
    assert problem == SchemaProblem(
        "$.at",
        "must be an RFC 3339 date-time with a time zone, e.g. 2026-05-04T09:30:00Z "
        '(got "2026-05-04 09:30").',
    )


def test_a_stored_schema_the_library_cannot_apply_fails_every_call_and_never_passes_it() -> None:
    """A row written around the registration checks (an experiment plan, a script): the call
    is not passed on unchecked, and the problem names the schema's fault."""
    broken = {
        "type": "object",
        "properties": {"q": {"type": "string", "pattern": "("}},
        "required": ["q"],
    }
    problem = arguments_problem(broken, {"q": "anything"})
    assert problem is not None and problem.path == "$"
    assert "cannot be checked" in problem.message
    assert "$.properties.q.pattern" in problem.message
    remote = props(q={"$ref": "https://example.com/q.json"})
    assert "never fetched" in arguments_problem(remote, {"q": 1}).message
    # A schema that is valid JSON Schema but not registrable is still applied in full.
    assert arguments_problem({}, [1, 2]) is None


def test_arguments_deeper_than_the_checker_can_follow_are_refused_not_crashed() -> None:
    tree = {
        **props(root={"$ref": "#/$defs/Node"}),
        "$defs": {"Node": props(children={"type": "array", "items": {"$ref": "#/$defs/Node"}})},
    }
    assert input_schema_problem(tree) is None
    deep: dict = {}
    for _ in range(2000):
        deep = {"children": [deep]}
    assert arguments_problem(tree, {"root": deep}) == SchemaProblem(
        "$", "is nested too deeply to check; send it with less nesting."
    )
    assert arguments_problem(tree, {"root": {"children": [{"children": []}]}}) is None


def test_compiled_validators_are_cached_by_canonical_json() -> None:
    host_tools.cache_clear()
    reordered = json.loads(json.dumps(ORDER))
    reordered = dict(reversed(list(reordered.items())))
    for schema in (ORDER, reordered, ORDER):
        assert arguments_problem(schema, GOOD_ORDER) is None
    input_schema_problem(ORDER)
    info = host_tools._compiled.cache_info()
    assert (info.misses, info.hits) == (1, 3)


# ---------------------------------------------------------------- never fetching


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a connection or resolve a name fails the test."""
    attempts: list[object] = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    return attempts


REMOTE = [
    props(q={"$ref": "https://json-schema.org/draft/2020-12/schema"}),
    props(q={"$ref": "https://example.com/q.json#/$defs/Q"}),
    props(q={"$ref": "other.json#/x"}),
    props(q={"$dynamicRef": "http://example.com/meta#meta"}),
    {**OBJ, "$id": "https://example.com/t.json", "properties": {"q": {"$ref": "q.json"}}},
]


@pytest.mark.parametrize("schema", REMOTE)
def test_a_remote_reference_is_refused_without_any_fetch(no_network, schema) -> None:
    host_tools.cache_clear()
    problem = input_schema_problem(schema)
    assert problem is not None and "never fetched" in problem.message
    assert "cannot be checked" in arguments_problem(schema, {"q": "x"}).message
    assert no_network == []


def test_the_library_registry_refuses_to_retrieve_anything(no_network) -> None:
    with pytest.raises(referencing.exceptions.NoSuchResource):
        host_tools.NO_FETCH.get_or_retrieve("https://example.com/schema.json")
    # The validator itself, asked for a URI outside the schema, refuses too.
    validator = jsonschema.Draft202012Validator(
        props(q={"$ref": "https://example.com/q.json"}), registry=host_tools.NO_FETCH
    )
    with pytest.raises(referencing.exceptions.Unresolvable):
        validator.is_valid({"q": 1})
    assert no_network == []


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
    """Every generated schema is accepted, and the check passes exactly what JSON Schema
    2020-12 (the library itself, without format checks) passes."""
    assert input_schema_problem(schema) is None, schema
    expected = jsonschema.Draft202012Validator(schema).is_valid(arguments)
    assert (arguments_problem(schema, arguments) is None) == expected, (schema, arguments)


# A schema as zod-to-json-schema (the Vercel AI SDK's converter) writes it: draft-07, with
# `definitions` and a tuple `items`, which 2020-12 would read otherwise.
ZOD_DRAFT_07 = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1},
        "point": {"type": "array", "items": [{"type": "number"}, {"type": "number"}]},
        "unit": {"$ref": "#/definitions/unit"},
    },
    "required": ["city"],
    "additionalProperties": False,
    "definitions": {"unit": {"type": "string", "enum": ["c", "f"]}},
    "$schema": "http://json-schema.org/draft-07/schema#",
}


def test_a_draft_07_schema_declared_at_the_root_is_applied_under_its_own_rules():
    assert input_schema_problem(ZOD_DRAFT_07) is None
    assert arguments_problem(ZOD_DRAFT_07, {"city": "Oslo", "point": [1, 2], "unit": "c"}) is None
    bad_tuple = arguments_problem(ZOD_DRAFT_07, {"city": "Oslo", "point": [1, "x"]})
    assert bad_tuple is not None and bad_tuple.path == "$.point[1]"
    bad_ref = arguments_problem(ZOD_DRAFT_07, {"city": "Oslo", "unit": "k"})
    assert bad_ref is not None and bad_ref.path == "$.unit"
