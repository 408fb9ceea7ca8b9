"""Tool argument validation, step 1 of dispatch (contract §5, §5.2)."""

from __future__ import annotations

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextproto.protocol.arguments import validate_tool_arguments
from contextproto.protocol.catalog import EXPECTED_WINDOW_ARG, get_version
from contextproto.protocol.errors import ProtocolError

V1 = get_version("unified", 1)
V2 = get_version("unified", 2)
V3 = get_version("unified", 3)
PREFIX = get_version("prefix", 2)

P = {"purpose": "test"}


def _refusal(version, tool: str, arguments: object) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        validate_tool_arguments(version, tool, arguments)
    return caught.value


@pytest.mark.parametrize(
    ("version", "tool", "arguments", "expected"),
    [
        (V2, "context_history_list", P, {**P, "afterIndex": -1, "limit": 20}),
        (V2, "context_history_list", {**P, "afterIndex": 7}, {**P, "afterIndex": 7, "limit": 20}),
        (V2, "context_fold_list", P, {**P, "offset": 0, "limit": 20}),
        (V2, "context_fold_read", {**P, "foldId": "f_1"}, {**P, "foldId": "f_1", "cursor": 0}),
        (V2, "context_window_list", P, {**P, "offset": 0, "limit": 20}),
        (
            V2,
            "context_window_search",
            {**P, "query": "quote"},
            {**P, "query": "quote", "limit": 20},
        ),
        (
            V1,
            "context_window_open",
            {**P, "windowId": "beta", "goal": "plan"},
            {**P, "windowId": "beta", "goal": "plan", "resume": False},
        ),
        (
            V2,
            "context_window_open",
            {**P, "expectedWindowId": "main", "windowId": "beta", "input": "go", "resume": True},
            {**P, "expectedWindowId": "main", "windowId": "beta", "input": "go", "resume": True},
        ),
        (V2, "context_task_memory_get", P, P),
        (
            V2,
            "context_window_memory_set",
            {**P, "expectedWindowId": "main", "memory": ""},
            {**P, "expectedWindowId": "main", "memory": ""},
        ),
        (V1, "context_maintainer_run", P, P),
    ],
)
def test_valid_arguments_come_back_with_defaults_applied(version, tool, arguments, expected):
    assert validate_tool_arguments(version, tool, arguments) == expected


def test_normalized_arguments_follow_schema_order_and_leave_the_input_alone() -> None:
    arguments = {"limit": 5, "purpose": "p"}
    result = validate_tool_arguments(V2, "context_history_list", arguments)
    assert list(result) == ["purpose", "afterIndex", "limit"]
    assert arguments == {"limit": 5, "purpose": "p"}


def test_optional_arguments_without_default_stay_absent() -> None:
    result = validate_tool_arguments(V2, "context_fold_list", P)
    assert "windowId" not in result
    result = validate_tool_arguments(
        V2, "context_window_complete", {**P, "expectedWindowId": "a", "outcome": "done"}
    )
    assert "returnToWindowId" not in result


WIN = {**P, "expectedWindowId": "main"}


@pytest.mark.parametrize(
    ("version", "tool", "arguments", "argument", "says"),
    [
        (V2, "context_history_list", {}, "purpose", "required"),
        (V2, "context_history_list", {"purpose": ""}, "purpose", "empty"),
        (V2, "context_history_list", {"purpose": "x" * 201}, "purpose", "at most 200"),
        (V2, "context_history_list", {"purpose": 5}, "purpose", "string"),
        (V2, "context_history_list", {**P, "afterIndex": -2}, "afterIndex", "at least -1"),
        (V2, "context_history_list", {**P, "limit": 51}, "limit", "between 1 and 50"),
        (V2, "context_history_list", {**P, "limit": 0}, "limit", "between 1 and 50"),
        (V2, "context_history_list", {**P, "limit": True}, "limit", "integer"),
        (V2, "context_history_list", {**P, "limit": 5.0}, "limit", "integer"),
        (V2, "context_history_list", {**P, "limit": "5"}, "limit", "integer"),
        (
            V2,
            "context_fold_create",
            {**WIN, "throughIndex": 3, "summary": "s"},
            "fromIndex",
            "required",
        ),
        (
            V2,
            "context_fold_create",
            {**WIN, "fromIndex": 0, "throughIndex": 3, "summary": "s"},
            "fromIndex",
            "at least 1",
        ),
        (
            V2,
            "context_fold_create",
            {**WIN, "fromIndex": 1, "throughIndex": 3, "summary": ""},
            "summary",
            "empty",
        ),
        (
            V2,
            "context_fold_create",
            {**WIN, "fromIndex": 1, "throughIndex": 3, "summary": "s" * 2001},
            "summary",
            "at most 2000",
        ),
        (V2, "context_fold_list", {**P, "windowId": "Main"}, "windowId", "must match"),
        (V2, "context_fold_list", {**P, "windowId": "main\n"}, "windowId", "must match"),
        (V2, "context_fold_list", {**P, "windowId": "a" * 65}, "windowId", "must match"),
        (V2, "context_fold_list", {**P, "offset": -1}, "offset", "at least 0"),
        (V2, "context_fold_read", P, "foldId", "required"),
        (V2, "context_fold_read", {**P, "foldId": "f", "cursor": -1}, "cursor", "at least 0"),
        (V2, "context_window_open", WIN, "windowId", "required"),
        (V2, "context_window_open", {**WIN, "windowId": "beta"}, "input", "required"),
        (V2, "context_window_open", {**WIN, "windowId": "beta", "input": ""}, "input", "empty"),
        (
            V1,
            "context_window_open",
            {**P, "windowId": "beta", "input": "i" * 4001},
            "input",
            "at most 4000",
        ),
        (
            V1,
            "context_window_open",
            {**P, "windowId": "beta", "goal": "g" * 2001},
            "goal",
            "at most 2000",
        ),
        (
            V1,
            "context_window_open",
            {**P, "windowId": "beta", "resume": "true"},
            "resume",
            "boolean",
        ),
        (V1, "context_window_open", {**P, "windowId": "beta", "resume": 1}, "resume", "boolean"),
        (V2, "context_window_memory_set", WIN, "memory", "required"),
        (
            V2,
            "context_window_memory_set",
            {**WIN, "memory": "m" * 16001},
            "memory",
            "at most 16000",
        ),
        (V2, "context_window_complete", {**WIN, "outcome": ""}, "outcome", "empty"),
        (
            V2,
            "context_window_complete",
            {**WIN, "outcome": "o", "returnToWindowId": "-x"},
            "returnToWindowId",
            "must match",
        ),
        (
            V2,
            "context_window_list",
            {**P, "status": "closed"},
            "status",
            "active, suspended, completed",
        ),
        (V2, "context_window_search", P, "query", "required"),
        (V2, "context_window_search", {**P, "query": "q" * 201}, "query", "at most 200"),
        (V2, "context_window_read", P, "windowId", "required"),
        (V2, "context_task_memory_set", {**P, "memory": None}, "memory", "got null"),
        (
            V2,
            "context_window_memory_set",
            {**P, "expectedWindowId": 3, "memory": "m"},
            "expectedWindowId",
            "string",
        ),
        (
            V2,
            "context_maintainer_run",
            {**P, "expectedWindowId": None},
            "expectedWindowId",
            "string",
        ),
        (
            V1,
            "context_maintainer_run",
            {**P, "expectedWindowId": ["main"]},
            "expectedWindowId",
            "string",
        ),
    ],
)
def test_each_violation_is_invalid_arguments_naming_the_argument(
    version, tool, arguments, argument, says
) -> None:
    error = _refusal(version, tool, arguments)
    assert error.code == "invalid_arguments"
    assert error.details == {"argument": argument, "tool": tool}
    assert f"'{argument}'" in error.message
    assert tool in error.message
    assert says in error.message


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("context_window_open", {**P, "windowId": "beta", "input": "go"}),
        ("context_window_memory_set", {**P, "memory": "m"}),
        ("context_window_complete", {**P, "outcome": "done"}),
        ("context_fold_create", {**P, "fromIndex": 1, "throughIndex": 2, "summary": "s"}),
        ("context_maintainer_run", P),
    ],
)
@pytest.mark.parametrize("version", [V2, V3], ids=["v2", "v3"])
def test_missing_expected_window_is_left_to_the_dispatcher(version, tool, arguments) -> None:
    result = validate_tool_arguments(version, tool, arguments)
    assert EXPECTED_WINDOW_ARG not in result


@pytest.mark.parametrize("arguments", [None, [], "purpose", 1, [("purpose", "x")]])
def test_arguments_that_are_not_an_object_are_invalid_with_no_argument_named(arguments) -> None:
    error = _refusal(V2, "context_task_memory_get", arguments)
    assert error.code == "invalid_arguments"
    assert error.details == {"argument": None, "tool": "context_task_memory_get"}


def test_unknown_keys_are_invalid_and_the_message_lists_the_allowed_ones() -> None:
    error = _refusal(V2, "context_window_read", {**P, "windowid": "a", "sessionId": "x"})
    assert error.code == "invalid_arguments"
    # sorted: a capital letter sorts before lower case, so "sessionId" < "windowid"
    assert error.details == {"argument": "sessionId", "tool": "context_window_read"}
    assert "purpose, windowId" in error.message


def test_unknown_keys_are_reported_before_missing_ones() -> None:
    error = _refusal(V2, "context_window_read", {"purpse": "typo"})
    assert error.details["argument"] == "purpse"


def test_expected_window_is_unknown_in_v1_where_the_tool_has_no_guard() -> None:
    error = _refusal(
        V1, "context_window_memory_set", {**P, "expectedWindowId": "main", "memory": "m"}
    )
    assert error.details["argument"] == "expectedWindowId"


def test_first_error_follows_schema_order_whatever_the_key_order() -> None:
    arguments = {"limit": 99, "afterIndex": -5, "purpose": ""}
    assert _refusal(V2, "context_history_list", arguments).details["argument"] == "purpose"
    arguments = {"limit": 99, "afterIndex": -5, "purpose": "p"}
    assert _refusal(V2, "context_history_list", arguments).details["argument"] == "afterIndex"


def test_lengths_count_characters_not_bytes() -> None:
    result = validate_tool_arguments(V2, "context_history_list", {"purpose": "预" * 200})
    assert result["purpose"] == "预" * 200


@pytest.mark.parametrize(
    ("version", "tool", "available"),
    [
        (V2, "context_window_delete", 13),
        (V2, "get_weather", 13),
        (PREFIX, "context_history_list", 0),
    ],
)
def test_unknown_tool_is_tool_unknown_listing_the_available_tools(version, tool, available) -> None:
    error = _refusal(version, tool, P)
    assert error.code == "tool_unknown"
    assert error.details["tool"] == tool
    assert error.details["available"] == list(version.tools)
    assert len(error.details["available"]) == available
    assert version.key in error.message


# ---------------------------------------------------------------- agreement with JSON Schema

_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=70),
    st.sampled_from(["", "main", "beta-2", "Main", "a" * 65, "active", "closed", "x" * 201]),
    st.lists(st.integers(), max_size=1),
)


def _argument_dicts(version, tool: str):
    names = [*version.tools[tool]["inputSchema"]["properties"], "extra"]
    return st.dictionaries(st.sampled_from(names), _VALUES, max_size=len(names))


@pytest.mark.parametrize("tool", list(V2.tools))
@pytest.mark.parametrize("version", [V1, V2], ids=["v1", "v2"])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_the_checker_agrees_with_jsonschema_on_validity(version, tool, data) -> None:
    """Our checker accepts exactly what the published schema accepts.

    The one intended difference: a missing expectedWindowId is for the
    dispatcher, so the reference schema is checked with it filled in.
    """
    arguments = data.draw(_argument_dicts(version, tool))
    schema = version.tools[tool]["inputSchema"]
    reference = dict(arguments)
    if EXPECTED_WINDOW_ARG in schema["required"]:
        reference.setdefault(EXPECTED_WINDOW_ARG, "main")
    expected_valid = jsonschema.Draft202012Validator(schema).is_valid(reference)
    try:
        validate_tool_arguments(version, tool, arguments)
        valid = True
    except ProtocolError as error:
        assert error.code == "invalid_arguments"
        valid = False
    assert valid == expected_valid, arguments
