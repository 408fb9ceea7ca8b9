"""The protocol catalog: one immutable definition per `id@version` (contract §3, §5).

The catalog is code, not rows, so every process that imports it carries the same
definitions; `fingerprint()` lets nodes prove that to each other (contract §3).

By concern: vocabulary.py (ids, tool names, placements, limits), option_schemas.py,
tool_schemas.py, jsonschema_check.py (the value checker); this module puts them together
as versions and re-exports their public names, so `catalog.X` keeps working.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypedDict

from . import prompts
from .errors import PROTOCOL_UNKNOWN, ProtocolError
from .jsonschema_check import SUPPORTED_KEYWORDS, Problem, check_value, json_type_name
from .option_schemas import defaults_of, option_schema
from .tool_schemas import EXPECTED_WINDOW, PURPOSE, unified_tools
from .vocabulary import (
    EXPECTED_WINDOW_ARG,
    EXPERIMENTAL,
    FOLD_CREATE,
    FOLD_LIST,
    FOLD_READ,
    HISTORY_LIST,
    HISTORY_READ,
    JSON_INTEGER_MAX,
    JSON_SCHEMA_DIALECT,
    MAINTAINER_RUN,
    MASK_KEEP_RECENT,
    MASK_MIN_CHARS,
    MASK_STEP,
    MEMORY_MAX,
    MUTATING_TOOLS,
    PAGE_LIMIT_MAX,
    PLACEMENT_BEFORE_HISTORY_ASSISTANT,
    PLACEMENT_TRAILING_ASSISTANT,
    PLACEMENT_TRAILING_USER,
    PREFIX,
    PROTOCOL_TOOL_NAMES,
    STABLE,
    STATE_MESSAGE_PLACEMENTS,
    SYSTEM_PLACEHOLDER,
    TASK_MEMORY_GET,
    TASK_MEMORY_SET,
    TOOLS_SINCE,
    UNIFIED,
    UNIFIED_TOOL_ORDER,
    V2_EXPECTED_WINDOW_TOOLS,
    WINDOW_COMPLETE,
    WINDOW_LIST,
    WINDOW_MEMORY_SET,
    WINDOW_OPEN,
    WINDOW_READ,
    WINDOW_SEARCH,
)

__all__ = [
    "EXPECTED_WINDOW",
    "EXPECTED_WINDOW_ARG",
    "EXPERIMENTAL",
    "FOLD_CREATE",
    "FOLD_LIST",
    "FOLD_READ",
    "HISTORY_LIST",
    "HISTORY_READ",
    "JSON_INTEGER_MAX",
    "JSON_SCHEMA_DIALECT",
    "MAINTAINER_RUN",
    "MASK_KEEP_RECENT",
    "MASK_MIN_CHARS",
    "MASK_STEP",
    "MEMORY_MAX",
    "MUTATING_TOOLS",
    "PAGE_LIMIT_MAX",
    "PLACEMENT_BEFORE_HISTORY_ASSISTANT",
    "PLACEMENT_TRAILING_ASSISTANT",
    "PLACEMENT_TRAILING_USER",
    "PREFIX",
    "PROTOCOL_TOOL_NAMES",
    "PURPOSE",
    "STABLE",
    "STATE_MESSAGE_PLACEMENTS",
    "SUPPORTED_KEYWORDS",
    "SYSTEM_PLACEHOLDER",
    "TASK_MEMORY_GET",
    "TASK_MEMORY_SET",
    "TOOLS_SINCE",
    "UNIFIED",
    "UNIFIED_TOOL_ORDER",
    "V2_EXPECTED_WINDOW_TOOLS",
    "WINDOW_COMPLETE",
    "WINDOW_LIST",
    "WINDOW_MEMORY_SET",
    "WINDOW_OPEN",
    "WINDOW_READ",
    "WINDOW_SEARCH",
    "HeaderStyle",
    "Layout",
    "Problem",
    "ProtocolVersion",
    "ProtocolVersionPublic",
    "StateStyle",
    "all_versions",
    "by_key",
    "check_value",
    "find_version",
    "fingerprint",
    "fingerprint_of",
    "get_version",
    "json_type_name",
]


class ProtocolVersionPublic(TypedDict):
    """A catalog entry as the API and MCP publish it (contract §3)."""

    id: str
    version: int
    key: str  # "unified@2"
    status: str
    summary: str
    optionSchema: dict[str, Any]  # a JSON Schema
    defaults: dict[str, Any]
    prompt: str
    tools: list[dict[str, Any]]  # {name, description, inputSchema}
    mutatingTools: list[str]
    expectedWindowTools: list[str]


class _Definition(ProtocolVersionPublic):
    """What the catalog fingerprint hashes: the public shape and the engine's flags."""

    windowed: bool
    stateMessage: bool


class HeaderStyle(StrEnum):
    """What a view's context header (the message after the system prompt) holds."""

    PREFIX = "prefix"  # prefix@2: the session's inputs and the checkpoint
    WINDOW_ASCII = "window_ascii"  # unified@1: @1-era field names, ASCII-escaped JSON
    WINDOW = "window"  # unified@2-3: task memory, the whole window record, its checkpoint
    STABLE = "stable"  # unified@4: only what a memory write, a switch or a commit changes


class StateStyle(StrEnum):
    """Whether a view ends (or starts) its history with a state message, and which."""

    NONE = "none"
    FIELDS = "fields"  # unified@2-3: the window's position and the last tool
    PRESSURE = "pressure"  # unified@4: also working memory, outcomes, masking, contextPressure


@dataclass(frozen=True)
class Layout:
    """How a version assembles its view (contract §4, §9): `project()` reads this, never the
    version number."""

    header: HeaderStyle
    state: StateStyle
    # The state message's place; None: the option `stateMessagePlacement` decides.
    placement: str | None
    masking: bool  # older tool results replaced by stubs (options maskKeepRecent, ...)

    @property
    def shows_context_pressure(self) -> bool:
        """The unified@4 layout: a stable header, masked tool results and `contextPressure`
        in the state message (which the capacity check counts as header)."""
        return self.state is StateStyle.PRESSURE


@dataclass(frozen=True)
class ProtocolVersion:
    """One catalog entry: options schema, prompt, tool schemas and layout of `id@version`."""

    protocol_id: str
    version: int
    status: str
    summary: str
    option_schema: dict[str, Any]
    defaults: dict[str, Any]
    prompt: str
    tools: dict[str, dict[str, Any]]
    mutating_tools: frozenset[str]
    expected_window_tools: frozenset[str]
    windowed: bool
    layout: Layout

    # The dict fields make the generated hash fail; the key identifies a version.
    def __hash__(self) -> int:
        return hash((self.protocol_id, self.version))

    @property
    def key(self) -> str:
        return f"{self.protocol_id}@{self.version}"

    @property
    def state_message(self) -> bool:
        return self.layout.state is not StateStyle.NONE

    def to_public(self) -> ProtocolVersionPublic:
        """Return the camelCase JSON the API and MCP publish (a deep copy)."""
        return {
            "id": self.protocol_id,
            "version": self.version,
            "key": self.key,
            "status": self.status,
            "summary": self.summary,
            "optionSchema": copy.deepcopy(self.option_schema),
            "defaults": copy.deepcopy(self.defaults),
            "prompt": self.prompt,
            "tools": [copy.deepcopy(tool) for tool in self.tools.values()],
            "mutatingTools": sorted(self.mutating_tools),
            "expectedWindowTools": sorted(self.expected_window_tools),
        }


# ---------------------------------------------------------------- versions


def _version(
    protocol_id: str,
    version: int,
    status: str,
    summary: str,
    prompt: str,
    *,
    checkpoint_max: int,
    layout: Layout,
    placement_default: str = PLACEMENT_TRAILING_ASSISTANT,
) -> ProtocolVersion:
    windowed = protocol_id == UNIFIED
    key = f"{protocol_id}@{version}"
    schema = option_schema(
        key,
        checkpoint_max=checkpoint_max,
        windowed=windowed,
        placement=layout.state is not StateStyle.NONE and layout.placement is None,
        placement_default=placement_default,
        masking=layout.masking,
    )
    return ProtocolVersion(
        protocol_id=protocol_id,
        version=version,
        status=status,
        summary=summary,
        option_schema=schema,
        defaults=defaults_of(schema),
        prompt=prompt,
        tools=unified_tools(version) if windowed else {},
        mutating_tools=MUTATING_TOOLS if windowed else frozenset(),
        expected_window_tools=(
            V2_EXPECTED_WINDOW_TOOLS if windowed and version >= 2 else frozenset()
        ),
        windowed=windowed,
        layout=layout,
    )


_VERSIONS: tuple[ProtocolVersion, ...] = (
    _version(
        PREFIX,
        2,
        STABLE,
        "Host-maintained prefix compression on a single implicit window main; no context "
        "tools exposed to the model.",
        prompts.PREFIX_V2,
        checkpoint_max=12000,
        layout=Layout(HeaderStyle.PREFIX, StateStyle.NONE, placement=None, masking=False),
    ),
    _version(
        UNIFIED,
        1,
        STABLE,
        "Windows, folds and per-window prefix compression.",
        prompts.UNIFIED_V1,
        checkpoint_max=12000,
        layout=Layout(HeaderStyle.WINDOW_ASCII, StateStyle.NONE, placement=None, masking=False),
    ),
    _version(
        UNIFIED,
        2,
        STABLE,
        "unified@1 plus a context_state message and the expectedWindowId guard.",
        prompts.UNIFIED_V2,
        checkpoint_max=3000,
        layout=Layout(
            HeaderStyle.WINDOW,
            StateStyle.FIELDS,
            placement=PLACEMENT_TRAILING_ASSISTANT,
            masking=False,
        ),
    ),
    _version(
        UNIFIED,
        3,
        EXPERIMENTAL,
        "unified@2 with a position-neutral prompt and configurable placement of the state "
        "message (experiment).",
        prompts.UNIFIED_V3,
        checkpoint_max=3000,
        layout=Layout(HeaderStyle.WINDOW, StateStyle.FIELDS, placement=None, masking=False),
    ),
    _version(
        UNIFIED,
        4,
        EXPERIMENTAL,
        "unified@3 with a cache-stable layout (a header that changes rarely, everything "
        "volatile and the context pressure in the state message), masked older tool results "
        "and context_history_read (experiment).",
        prompts.UNIFIED_V4,
        checkpoint_max=3000,
        layout=Layout(HeaderStyle.STABLE, StateStyle.PRESSURE, placement=None, masking=True),
        # Several current Anthropic models refuse an assistant prefill (docs/decisions.md).
        placement_default=PLACEMENT_TRAILING_USER,
    ),
)
_BY_KEY = {(v.protocol_id, v.version): v for v in _VERSIONS}


def all_versions() -> list[ProtocolVersion]:
    """Return every catalog entry: prefix@2, unified@1, unified@2, unified@3, unified@4."""
    return list(_VERSIONS)


def find_version(protocol_id: str, version: int) -> ProtocolVersion | None:
    """Return the entry for `protocol_id@version`, or None."""
    # True == 1 in a dict lookup; a bool is not a version number.
    if not isinstance(version, int) or isinstance(version, bool):
        return None
    return _BY_KEY.get((protocol_id, version))


def by_key(key: object) -> ProtocolVersion | None:
    """Return the entry a key such as "unified@4" names, or None for anything else (the one
    parser of version keys)."""
    if not isinstance(key, str):
        return None
    protocol_id, at, number = key.strip().partition("@")
    if not at or not (number.isascii() and number.isdigit()):
        return None
    return _BY_KEY.get((protocol_id, int(number)))


def get_version(protocol_id: str, version: int) -> ProtocolVersion:
    """Return the entry for `protocol_id@version`; raise ProtocolError(protocol_unknown)."""
    found = find_version(protocol_id, version)
    if found is None:
        available = [v.key for v in _VERSIONS]
        raise ProtocolError(
            PROTOCOL_UNKNOWN,
            f"Unknown context protocol {protocol_id!s}@{version!s}; the catalog has: "
            f"{', '.join(available)}.",
            {"protocolId": protocol_id, "version": version, "available": available},
        )
    return found


def _definition(version: ProtocolVersion) -> _Definition:
    return {
        **version.to_public(),
        "windowed": version.windowed,
        "stateMessage": version.state_message,
    }


def fingerprint_of(versions: Iterable[ProtocolVersion]) -> str:
    """Return the sha256 hex of the canonical JSON of these definitions, in order."""
    canonical = json.dumps(
        [_definition(v) for v in versions],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def fingerprint() -> str:
    """Return the fingerprint of the whole catalog (contract §3)."""
    return fingerprint_of(_VERSIONS)
