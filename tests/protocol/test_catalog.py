"""The protocol catalog: versions, option schemas, prompts and tool schemas (contract §3, §5)."""

from __future__ import annotations

import dataclasses
import json
import re

import jsonschema
import pytest

from contextproto.protocol import catalog, prompts
from contextproto.protocol.catalog import (
    PROTOCOL_TOOL_NAMES,
    SUPPORTED_KEYWORDS,
    all_versions,
    find_version,
    fingerprint,
    fingerprint_of,
    get_version,
)
from contextproto.protocol.errors import ProtocolError

ALL_TOOLS = [
    "context_history_list",
    "context_fold_create",
    "context_fold_list",
    "context_fold_read",
    "context_window_open",
    "context_window_memory_set",
    "context_window_complete",
    "context_window_list",
    "context_window_search",
    "context_window_read",
    "context_task_memory_get",
    "context_task_memory_set",
    "context_maintainer_run",
]
GUARDED_V2 = {
    "context_window_open",
    "context_window_memory_set",
    "context_window_complete",
    "context_fold_create",
    "context_maintainer_run",
}
UNIFIED = [("unified", 1), ("unified", 2), ("unified", 3)]
V4_TOOLS = [ALL_TOOLS[0], "context_history_read", *ALL_TOOLS[1:]]


def _required(version: catalog.ProtocolVersion, tool: str) -> list[str]:
    return version.tools[tool]["inputSchema"]["required"]


def test_catalog_lists_the_five_versions_in_order_with_their_status() -> None:
    assert [(v.key, v.status) for v in all_versions()] == [
        ("prefix@2", "stable"),
        ("unified@1", "stable"),
        ("unified@2", "stable"),
        ("unified@3", "experimental"),
        ("unified@4", "experimental"),
    ]


@pytest.mark.parametrize(
    ("protocol_id", "version", "windowed", "state_message"),
    [
        ("prefix", 2, False, False),
        ("unified", 1, True, False),
        ("unified", 2, True, True),
        ("unified", 3, True, True),
        ("unified", 4, True, True),
    ],
)
def test_version_flags(protocol_id: str, version: int, windowed: bool, state_message: bool) -> None:
    entry = get_version(protocol_id, version)
    assert (entry.windowed, entry.state_message) == (windowed, state_message)


@pytest.mark.parametrize(
    ("key", "defaults"),
    [
        (("prefix", 2), {"guiProjection": True, "pageSize": 200, "checkpointMaxCharacters": 12000}),
        (
            ("unified", 1),
            {
                "guiProjection": True,
                "pageSize": 200,
                "checkpointMaxCharacters": 12000,
                "maxWindows": 128,
                "maxFolds": 1024,
            },
        ),
        (
            ("unified", 2),
            {
                "guiProjection": True,
                "pageSize": 200,
                "checkpointMaxCharacters": 3000,
                "maxWindows": 128,
                "maxFolds": 1024,
            },
        ),
        (
            ("unified", 3),
            {
                "guiProjection": True,
                "pageSize": 200,
                "checkpointMaxCharacters": 3000,
                "maxWindows": 128,
                "maxFolds": 1024,
                "stateMessagePlacement": "trailing_assistant",
            },
        ),
        (
            ("unified", 4),
            {
                "guiProjection": True,
                "pageSize": 200,
                "checkpointMaxCharacters": 3000,
                "maxWindows": 128,
                "maxFolds": 1024,
                "stateMessagePlacement": "trailing_user",
                "maskKeepRecent": 6,
                "maskMinChars": 1000,
                "maskStep": 10,
            },
        ),
    ],
)
def test_defaults_per_version(key: tuple[str, int], defaults: dict) -> None:
    entry = get_version(*key)
    assert entry.defaults == defaults
    assert list(entry.option_schema["properties"]) == list(defaults)


@pytest.mark.parametrize(
    ("option", "minimum", "maximum"),
    [
        ("pageSize", 10, 1000),
        ("checkpointMaxCharacters", 1000, 24000),
        ("maxWindows", 1, 1024),
        ("maxFolds", 1, 65536),
    ],
)
def test_integer_option_ranges(option: str, minimum: int, maximum: int) -> None:
    prop = get_version("unified", 2).option_schema["properties"][option]
    assert (prop["type"], prop["minimum"], prop["maximum"]) == ("integer", minimum, maximum)


def test_state_message_placement_is_an_enum_of_three_placements() -> None:
    prop = get_version("unified", 3).option_schema["properties"]["stateMessagePlacement"]
    assert prop["enum"] == ["trailing_assistant", "before_history_assistant", "trailing_user"]


@pytest.mark.parametrize(
    ("option", "default", "minimum", "maximum"),
    [
        ("maskKeepRecent", 6, 0, 1000),
        ("maskMinChars", 1000, 0, 1000000),
        ("maskStep", 10, 1, 1000),
    ],
)
def test_v4_masking_options_have_their_ranges_and_help(
    option: str, default: int, minimum: int, maximum: int
) -> None:
    prop = get_version("unified", 4).option_schema["properties"][option]
    assert (prop["type"], prop["default"], prop["minimum"], prop["maximum"]) == (
        "integer",
        default,
        minimum,
        maximum,
    )


def test_only_v4_has_masking_options_and_its_placement_defaults_to_trailing_user() -> None:
    for entry in all_versions():
        masking = {"maskKeepRecent", "maskMinChars", "maskStep"} & set(
            entry.option_schema["properties"]
        )
        assert bool(masking) is (entry.key == "unified@4"), entry.key
    v3 = get_version("unified", 3).option_schema["properties"]["stateMessagePlacement"]
    v4 = get_version("unified", 4).option_schema["properties"]["stateMessagePlacement"]
    assert v4["enum"] == v3["enum"]
    assert (v3["default"], v4["default"]) == ("trailing_assistant", "trailing_user")
    assert "trailing_user (default)" in v4["description"]


def test_prefix_has_no_tools_and_no_window_options() -> None:
    entry = get_version("prefix", 2)
    assert entry.tools == {}
    assert entry.mutating_tools == frozenset()
    assert entry.expected_window_tools == frozenset()
    assert not {"maxWindows", "maxFolds", "stateMessagePlacement"} & set(
        entry.option_schema["properties"]
    )


@pytest.mark.parametrize("entry", all_versions(), ids=lambda v: v.key)
def test_option_schema_is_a_valid_closed_schema_an_operator_can_read(
    entry: catalog.ProtocolVersion,
) -> None:
    schema = entry.option_schema
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    jsonschema.validate(entry.defaults, schema)
    for name, prop in schema["properties"].items():
        assert prop["title"], name
        assert len(prop["description"]) > 40, name
        assert "default" in prop, name
        # options.py maps only type / range / enum problems to option codes
        assert set(prop) <= {
            "type",
            "title",
            "description",
            "default",
            "minimum",
            "maximum",
            "enum",
        }, name


@pytest.mark.parametrize("key", UNIFIED)
def test_unified_versions_have_all_thirteen_tools_in_order(key: tuple[str, int]) -> None:
    entry = get_version(*key)
    assert list(entry.tools) == ALL_TOOLS
    assert entry.mutating_tools == {
        "context_fold_create",
        "context_window_open",
        "context_window_memory_set",
        "context_window_complete",
        "context_task_memory_set",
    }


def test_v4_has_the_thirteen_tools_plus_history_read_after_history_list() -> None:
    v3, v4 = get_version("unified", 3), get_version("unified", 4)
    assert list(v4.tools) == V4_TOOLS
    # Every tool it shares with v3 is the same schema; history read is read-only.
    assert {name: v4.tools[name] for name in v3.tools} == v3.tools
    assert v4.mutating_tools == v3.mutating_tools
    assert v4.expected_window_tools == GUARDED_V2


def test_history_read_takes_an_index_from_1_and_a_cursor() -> None:
    schema = get_version("unified", 4).tools["context_history_read"]["inputSchema"]
    assert schema["required"] == ["purpose", "index"]
    assert list(schema["properties"]) == ["purpose", "index", "cursor"]
    assert schema["properties"]["index"]["minimum"] == 1
    cursor = schema["properties"]["cursor"]
    assert (cursor["default"], cursor["minimum"]) == (0, 0)


def test_protocol_tool_names_cover_every_tool_of_every_version() -> None:
    assert PROTOCOL_TOOL_NAMES == set(ALL_TOOLS) | {"context_history_read"}
    for entry in all_versions():
        assert set(entry.tools) <= PROTOCOL_TOOL_NAMES


@pytest.mark.parametrize("key", [*UNIFIED, ("unified", 4)])
@pytest.mark.parametrize("tool", V4_TOOLS)
def test_every_tool_schema_is_valid_closed_and_requires_purpose(
    key: tuple[str, int], tool: str
) -> None:
    if tool not in get_version(*key).tools:
        assert key[1] < 4 and tool == "context_history_read"
        return
    definition = get_version(*key).tools[tool]
    schema = definition["inputSchema"]
    jsonschema.Draft202012Validator.check_schema(schema)
    assert definition["name"] == tool
    assert len(definition["description"]) > 40
    assert schema["additionalProperties"] is False
    assert schema["required"][0] == "purpose"
    assert schema["properties"]["purpose"] == {
        "type": "string",
        "description": schema["properties"]["purpose"]["description"],
        "minLength": 1,
        "maxLength": 200,
    }
    assert set(schema["required"]) <= set(schema["properties"])
    for name, prop in schema["properties"].items():
        # arguments.py checks exactly this subset
        assert set(prop) <= SUPPORTED_KEYWORDS, (tool, name)
        assert prop["description"], (tool, name)


@pytest.mark.parametrize("key", [("unified", 2), ("unified", 3), ("unified", 4)])
def test_v2_and_v3_require_expected_window_on_exactly_the_guarded_tools(
    key: tuple[str, int],
) -> None:
    entry = get_version(*key)
    requiring = {t for t in entry.tools if "expectedWindowId" in _required(entry, t)}
    assert requiring == GUARDED_V2
    assert entry.expected_window_tools == GUARDED_V2


def test_v1_requires_expected_window_nowhere_and_offers_it_only_to_the_maintainer() -> None:
    entry = get_version("unified", 1)
    assert entry.expected_window_tools == frozenset()
    assert not any("expectedWindowId" in _required(entry, t) for t in entry.tools)
    offering = {
        t for t, d in entry.tools.items() if "expectedWindowId" in d["inputSchema"]["properties"]
    }
    assert offering == {"context_maintainer_run"}


@pytest.mark.parametrize(
    ("version", "required", "min_length"),
    [
        (1, ["purpose", "windowId"], None),
        (2, ["purpose", "expectedWindowId", "windowId", "input"], 1),
    ],
)
def test_window_open_input_is_required_and_non_empty_from_v2(
    version: int, required: list[str], min_length: int | None
) -> None:
    entry = get_version("unified", version)
    assert _required(entry, "context_window_open") == required
    assert (
        entry.tools["context_window_open"]["inputSchema"]["properties"]["input"].get("minLength")
        == min_length
    )


def test_window_id_arguments_use_the_window_id_pattern() -> None:
    entry = get_version("unified", 2)
    pattern = "^[a-z0-9][a-z0-9_-]{0,63}$"
    for tool, arg in [
        ("context_fold_list", "windowId"),
        ("context_window_open", "windowId"),
        ("context_window_complete", "returnToWindowId"),
        ("context_window_read", "windowId"),
    ]:
        assert entry.tools[tool]["inputSchema"]["properties"][arg]["pattern"] == pattern


def test_v2_and_v3_share_tool_schemas() -> None:
    assert get_version("unified", 2).tools == get_version("unified", 3).tools


@pytest.mark.parametrize(
    ("protocol_id", "version"),
    [
        ("unified", 5),
        ("unified", 0),
        ("prefix", 1),
        ("managed", 1),
        ("unified", True),
        ("unified", "2"),
    ],
)
def test_unknown_version_is_protocol_unknown_naming_what_exists(
    protocol_id: str, version: object
) -> None:
    assert find_version(protocol_id, version) is None  # type: ignore[arg-type]
    with pytest.raises(ProtocolError) as caught:
        get_version(protocol_id, version)  # type: ignore[arg-type]
    assert caught.value.code == "protocol_unknown"
    assert "unified@4" in caught.value.message and "prefix@2" in caught.value.message
    assert caught.value.details["available"] == [
        "prefix@2",
        "unified@1",
        "unified@2",
        "unified@3",
        "unified@4",
    ]


def test_find_version_returns_the_catalog_entry() -> None:
    entry = find_version("unified", 2)
    assert entry is not None and entry.key == "unified@2"
    assert entry is get_version("unified", 2)
    assert hash(entry) == hash(get_version("unified", 2))


@pytest.mark.parametrize("entry", all_versions(), ids=lambda v: v.key)
def test_to_public_is_camel_case_json(entry: catalog.ProtocolVersion) -> None:
    public = entry.to_public()
    assert json.loads(json.dumps(public)) == public
    assert list(public) == [
        "id",
        "version",
        "key",
        "status",
        "summary",
        "optionSchema",
        "defaults",
        "prompt",
        "tools",
        "mutatingTools",
        "expectedWindowTools",
    ]
    assert public["key"] == entry.key
    assert [t["name"] for t in public["tools"]] == list(entry.tools)
    assert public["mutatingTools"] == sorted(entry.mutating_tools)


def test_to_public_is_a_copy_the_caller_cannot_use_to_change_the_catalog() -> None:
    before = fingerprint()
    public = get_version("unified", 2).to_public()
    public["optionSchema"]["properties"]["pageSize"]["maximum"] = 5
    public["tools"][0]["inputSchema"]["properties"]["limit"]["maximum"] = 5
    assert fingerprint() == before


def test_fingerprint_is_stable_and_equals_fingerprint_of_all_versions() -> None:
    assert re.fullmatch(r"[0-9a-f]{64}", fingerprint())
    assert fingerprint() == fingerprint() == fingerprint_of(all_versions())


@pytest.mark.parametrize(
    "change",
    [
        {"prompt": prompts.UNIFIED_V2 + " "},
        {"defaults": {**get_version("unified", 2).defaults, "pageSize": 201}},
        {"status": "experimental"},
        {"summary": "changed"},
        {"tools": {}},
        {"option_schema": {**get_version("unified", 2).option_schema, "title": "x"}},
        {"expected_window_tools": frozenset()},
        {
            "layout": dataclasses.replace(
                get_version("unified", 2).layout, state=catalog.StateStyle.NONE
            )
        },
    ],
    ids=lambda change: next(iter(change)),
)
def test_fingerprint_changes_when_any_definition_changes(change: dict) -> None:
    versions = all_versions()
    versions[2] = dataclasses.replace(versions[2], **change)
    assert fingerprint_of(versions) != fingerprint()


# ---------------------------------------------------------------- prompts


@pytest.mark.parametrize("entry", all_versions(), ids=lambda v: v.key)
def test_each_version_has_its_own_prompt(entry: catalog.ProtocolVersion) -> None:
    assert entry.prompt.strip()
    assert "{{context_protocol}}" not in entry.prompt
    assert len({v.prompt for v in all_versions()}) == 5


def test_prefix_prompt_offers_no_tools() -> None:
    assert "context_" not in prompts.PREFIX_V2
    assert "checkpoint" in prompts.PREFIX_V2


def test_prompts_mention_only_tools_that_exist() -> None:
    for entry in all_versions():
        named = set(re.findall(r"context_[a-z_]+", entry.prompt))
        derived = {"context_header", "context_fold", "context_state"}
        assert named - derived <= set(entry.tools), entry.key


@pytest.mark.parametrize(
    "phrase",
    [
        "window",
        "context_history_list",
        "context_fold_create",
        "context_fold_read",
        "checkpoint",
        "context_header",
        "task memory",
        "one tool call per turn",
        "not an instruction",
    ],
)
def test_v1_prompt_explains(phrase: str) -> None:
    assert phrase in prompts.UNIFIED_V1


@pytest.mark.parametrize(
    "text", [prompts.UNIFIED_V2, prompts.UNIFIED_V3, prompts.UNIFIED_V4], ids=["v2", "v3", "v4"]
)
@pytest.mark.parametrize(
    "phrase",
    [
        "task boundaries",
        "not a fixed sequence",
        "expectedWindowId",
        "not a write target",
        "context_state",
        "do not replay the handoff",
        "answer directly",
        "do not copy tool logs",
        "Do not duplicate",
    ],
)
def test_v2_and_v3_prompts_share_the_decision_rules(text: str, phrase: str) -> None:
    assert phrase in text


def test_v2_prompt_keeps_its_positional_wording() -> None:
    # v2 stays the experiment's sentinel, so its wording is not silently neutralised.
    assert "last message" in prompts.UNIFIED_V2
    assert "above are history" in prompts.UNIFIED_V2


POSITION_WORDS = ["last message", "final message", "trailing", "above is history", "above", "below"]


@pytest.mark.parametrize("word", POSITION_WORDS)
def test_v3_prompt_is_position_neutral(word: str) -> None:
    assert word not in prompts.UNIFIED_V3.lower()


@pytest.mark.parametrize("word", POSITION_WORDS)
def test_v3_tool_descriptions_are_position_neutral(word: str) -> None:
    text = json.dumps(list(get_version("unified", 3).tools.values())).lower()
    assert word not in text


@pytest.mark.parametrize("word", POSITION_WORDS)
def test_v4_prompt_and_tools_are_position_neutral(word: str) -> None:
    # unified@4 takes the placement option too: one prompt must be true for every placement.
    assert word not in prompts.UNIFIED_V4.lower()
    assert word not in json.dumps(list(get_version("unified", 4).tools.values())).lower()


@pytest.mark.parametrize(
    "phrase",
    [
        "masked",
        "context_history_read",
        "`index`",
        "nextCursor",
        "contextPressure",
        "maintenancePending",
        "no user authority",
        "working memory and outcomes are in `context_state`",
    ],
)
def test_v4_prompt_explains_masked_results_pressure_and_the_layout(phrase: str) -> None:
    assert phrase in prompts.UNIFIED_V4


# The whole catalog's fingerprint before unified@4 was registered. Existing AgentVersions run
# on prefix@2 and unified@1-3, so adding a version must leave their definitions (prompts,
# tools, option schemas, defaults) exactly as they were.
FINGERPRINT_BEFORE_V4 = "9f2725f3b24f30f5bc35e6a1f352193daa55653aa5bda6c20a2d9ce454be5e2d"


def test_registering_unified4_left_the_earlier_versions_byte_for_byte() -> None:
    earlier = [v for v in all_versions() if v.key != "unified@4"]
    assert [v.key for v in earlier] == ["prefix@2", "unified@1", "unified@2", "unified@3"]
    assert fingerprint_of(earlier) == FINGERPRINT_BEFORE_V4


# --------------------------------------------------------------------------- layouts, keys


def test_every_version_names_its_layout() -> None:
    """`project()` assembles by these, never by comparing version numbers (issue 35)."""
    H, S = catalog.HeaderStyle, catalog.StateStyle
    assert {v.key: (v.layout.header, v.layout.state, v.layout.masking) for v in all_versions()} == {
        "prefix@2": (H.PREFIX, S.NONE, False),
        "unified@1": (H.WINDOW_ASCII, S.NONE, False),
        "unified@2": (H.WINDOW, S.FIELDS, False),
        "unified@3": (H.WINDOW, S.FIELDS, False),
        "unified@4": (H.STABLE, S.PRESSURE, True),
    }
    # A fixed placement where the version has no option for it; unified@3's option decides.
    placements = {v.key: v.layout.placement for v in all_versions()}
    assert placements["unified@3"] is None
    assert "stateMessagePlacement" in get_version("unified", 3).option_schema["properties"]
    assert [v.key for v in all_versions() if v.layout.shows_context_pressure] == ["unified@4"]
    assert [v.key for v in all_versions() if v.state_message] == [
        "unified@2",
        "unified@3",
        "unified@4",
    ]


@pytest.mark.parametrize("version", all_versions(), ids=lambda v: v.key)
def test_a_key_names_its_version(version: catalog.ProtocolVersion) -> None:
    assert catalog.by_key(version.key) is version
    assert catalog.by_key(f"  {version.key}\n") is version


@pytest.mark.parametrize(
    "key",
    ["", "unified", "unified@", "@2", "unified@9", "unified@2.0", "unified@+2", "unified@٢", "x@1"],
)
def test_anything_else_names_no_version(key: str) -> None:
    assert catalog.by_key(key) is None


@pytest.mark.parametrize("key", [None, 2, ("unified", 2), b"unified@2"])
def test_a_key_that_is_not_text_names_no_version(key: object) -> None:
    assert catalog.by_key(key) is None
