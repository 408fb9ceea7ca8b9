"""Publish-time option validation (contract §3, §2.1)."""

from __future__ import annotations

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextproto.protocol.catalog import all_versions, get_version
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.options import validate_options


def _codes(result) -> list[tuple[str | None, str]]:
    return [(error["option"], error["code"]) for error in result.errors]


@pytest.mark.parametrize("entry", all_versions(), ids=lambda v: v.key)
def test_empty_options_mean_all_defaults(entry) -> None:
    result = validate_options(entry.protocol_id, entry.version, {})
    assert result.valid
    assert result.errors == []
    assert result.normalized == entry.defaults


@pytest.mark.parametrize(
    ("key", "checkpoint_max"),
    [
        (("prefix", 2), 12000),
        (("unified", 1), 12000),
        (("unified", 2), 3000),
        (("unified", 3), 3000),
        (("unified", 4), 3000),
    ],
)
def test_checkpoint_budget_default_depends_on_the_version(
    key: tuple[str, int], checkpoint_max: int
) -> None:
    assert validate_options(*key, {}).normalized["checkpointMaxCharacters"] == checkpoint_max


def test_given_values_override_defaults_and_the_rest_are_merged_in() -> None:
    result = validate_options(
        "unified", 3, {"stateMessagePlacement": "trailing_user", "pageSize": 10}
    )
    assert result.valid
    assert result.normalized == {
        **get_version("unified", 3).defaults,
        "stateMessagePlacement": "trailing_user",
        "pageSize": 10,
    }


def test_normalized_does_not_alias_the_catalog_defaults() -> None:
    result = validate_options("unified", 1, {})
    result.normalized["pageSize"] = 1
    assert get_version("unified", 1).defaults["pageSize"] == 200


@pytest.mark.parametrize(
    ("key", "options", "option", "code"),
    [
        (("unified", 2), {"pageSize": 9}, "pageSize", "option_out_of_range"),
        (("unified", 2), {"pageSize": 1001}, "pageSize", "option_out_of_range"),
        (
            ("unified", 1),
            {"checkpointMaxCharacters": 999},
            "checkpointMaxCharacters",
            "option_out_of_range",
        ),
        (
            ("unified", 1),
            {"checkpointMaxCharacters": 24001},
            "checkpointMaxCharacters",
            "option_out_of_range",
        ),
        (("unified", 1), {"maxWindows": 0}, "maxWindows", "option_out_of_range"),
        (("unified", 1), {"maxFolds": 65537}, "maxFolds", "option_out_of_range"),
        (("unified", 2), {"pageSize": True}, "pageSize", "option_wrong_type"),
        (("unified", 2), {"pageSize": 200.0}, "pageSize", "option_wrong_type"),
        (("unified", 2), {"pageSize": "200"}, "pageSize", "option_wrong_type"),
        (("unified", 2), {"pageSize": None}, "pageSize", "option_wrong_type"),
        (("unified", 2), {"guiProjection": 1}, "guiProjection", "option_wrong_type"),
        (("unified", 2), {"guiProjection": "true"}, "guiProjection", "option_wrong_type"),
        (
            ("unified", 3),
            {"stateMessagePlacement": 1},
            "stateMessagePlacement",
            "option_wrong_type",
        ),
        (
            ("unified", 3),
            {"stateMessagePlacement": "system"},
            "stateMessagePlacement",
            "option_bad_enum",
        ),
        (
            ("unified", 3),
            {"stateMessagePlacement": "user"},
            "stateMessagePlacement",
            "option_bad_enum",
        ),
        (
            ("unified", 3),
            {"stateMessagePlacement": "assistant"},
            "stateMessagePlacement",
            "option_bad_enum",
        ),
        (
            ("unified", 3),
            {"stateMessagePlacement": "Trailing_Assistant"},
            "stateMessagePlacement",
            "option_bad_enum",
        ),
        (
            ("unified", 2),
            {"stateMessagePlacement": "trailing_assistant"},
            "stateMessagePlacement",
            "option_unknown",
        ),
        (
            ("unified", 1),
            {"stateMessagePlacement": "trailing_assistant"},
            "stateMessagePlacement",
            "option_unknown",
        ),
        (("unified", 4), {"maskKeepRecent": -1}, "maskKeepRecent", "option_out_of_range"),
        (("unified", 4), {"maskKeepRecent": 1001}, "maskKeepRecent", "option_out_of_range"),
        (("unified", 4), {"maskMinChars": -1}, "maskMinChars", "option_out_of_range"),
        (("unified", 4), {"maskMinChars": 1000001}, "maskMinChars", "option_out_of_range"),
        (("unified", 4), {"maskStep": 0}, "maskStep", "option_out_of_range"),
        (("unified", 4), {"maskStep": 1001}, "maskStep", "option_out_of_range"),
        (("unified", 4), {"maskStep": 2.5}, "maskStep", "option_wrong_type"),
        (("unified", 4), {"maskKeepRecent": "6"}, "maskKeepRecent", "option_wrong_type"),
        (("unified", 4), {"maskMinChars": True}, "maskMinChars", "option_wrong_type"),
        (
            ("unified", 4),
            {"stateMessagePlacement": "system"},
            "stateMessagePlacement",
            "option_bad_enum",
        ),
        (("unified", 4), {"maskKeep": 6}, "maskKeep", "option_unknown"),
        (("unified", 3), {"maskStep": 10}, "maskStep", "option_unknown"),
        (("unified", 2), {"maskKeepRecent": 6}, "maskKeepRecent", "option_unknown"),
        (("prefix", 2), {"maskMinChars": 10}, "maskMinChars", "option_unknown"),
        (("prefix", 2), {"maxWindows": 5}, "maxWindows", "option_unknown"),
        (("prefix", 2), {"maxFolds": 5}, "maxFolds", "option_unknown"),
        (("unified", 1), {"pagesize": 200}, "pagesize", "option_unknown"),
    ],
)
def test_each_bad_option_is_reported_with_its_name_and_code(
    key: tuple[str, int], options: dict, option: str, code: str
) -> None:
    result = validate_options(*key, options)
    assert not result.valid
    assert result.normalized is None
    assert _codes(result) == [(option, code)]
    assert option in result.errors[0]["message"]


def test_out_of_range_message_names_the_range() -> None:
    message = validate_options("unified", 2, {"pageSize": 5}).errors[0]["message"]
    assert "between 10 and 1000" in message
    assert "5" in message


def test_bad_enum_message_lists_the_allowed_values() -> None:
    message = validate_options("unified", 3, {"stateMessagePlacement": "system"}).errors[0][
        "message"
    ]
    for value in ("trailing_assistant", "before_history_assistant", "trailing_user", "system"):
        assert value in message


def test_unknown_option_message_lists_the_known_options() -> None:
    message = validate_options("prefix", 2, {"maxWindows": 5}).errors[0]["message"]
    assert "prefix@2" in message
    assert "checkpointMaxCharacters" in message


def test_all_errors_are_reported_at_once_in_schema_order_then_unknown_sorted() -> None:
    result = validate_options(
        "unified",
        3,
        {
            "zeta": 1,
            "stateMessagePlacement": "system",
            "maxFolds": 0,
            "alpha": 2,
            "guiProjection": "yes",
            "pageSize": 200,
        },
    )
    assert _codes(result) == [
        ("guiProjection", "option_wrong_type"),
        ("maxFolds", "option_out_of_range"),
        ("stateMessagePlacement", "option_bad_enum"),
        ("alpha", "option_unknown"),
        ("zeta", "option_unknown"),
    ]
    assert all(error["message"] for error in result.errors)


def test_error_order_does_not_depend_on_key_order() -> None:
    forward = {"b": 1, "a": 1, "pageSize": 0, "guiProjection": 0}
    backward = dict(reversed(list(forward.items())))
    assert (
        validate_options("unified", 1, forward).errors
        == validate_options("unified", 1, backward).errors
    )


@pytest.mark.parametrize("options", [None, [], "{}", 3, [("pageSize", 10)]])
def test_options_that_are_not_an_object_are_refused(options: object) -> None:
    result = validate_options("unified", 2, options)
    assert not result.valid
    assert result.normalized is None
    assert _codes(result) == [(None, "options_not_object")]


def test_unknown_protocol_raises_protocol_unknown() -> None:
    with pytest.raises(ProtocolError) as caught:
        validate_options("unified", 9, {})
    assert caught.value.code == "protocol_unknown"


def test_v4_masking_options_take_their_boundaries_and_merge_with_the_defaults() -> None:
    for options in (
        {"maskKeepRecent": 0, "maskMinChars": 0, "maskStep": 1},
        {"maskKeepRecent": 1000, "maskMinChars": 1000000, "maskStep": 1000},
    ):
        result = validate_options("unified", 4, options)
        assert result.valid, result.errors
        assert result.normalized == {**get_version("unified", 4).defaults, **options}
    assert validate_options("unified", 4, {}).normalized["stateMessagePlacement"] == (
        "trailing_user"
    )


def test_boundaries_are_inclusive() -> None:
    result = validate_options(
        "unified",
        1,
        {"pageSize": 1000, "checkpointMaxCharacters": 1000, "maxWindows": 1, "maxFolds": 65536},
    )
    assert result.valid, result.errors


_OPTION_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=70000),
    st.sampled_from(
        ["", "trailing_assistant", "trailing_user", "before_history_assistant", "system", "200"]
    ),
)


@pytest.mark.parametrize("entry", all_versions(), ids=lambda v: v.key)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_validation_agrees_with_the_published_json_schema(entry, data) -> None:
    names = [*entry.option_schema["properties"], "stateMessagePlacement", "unknownOption"]
    options = data.draw(st.dictionaries(st.sampled_from(names), _OPTION_VALUES))
    result = validate_options(entry.protocol_id, entry.version, options)
    expected = jsonschema.Draft202012Validator(entry.option_schema).is_valid(options)
    assert result.valid == expected, options
    if result.valid:
        jsonschema.validate(result.normalized, entry.option_schema)
