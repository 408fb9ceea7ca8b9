"""The protocol catalog: one immutable definition per `id@version` (SPEC §1, §5).

The catalog is code, not rows, so every process that imports it carries the same
definitions; `fingerprint()` lets nodes prove that to each other (SPEC §12).
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import prompts
from .errors import PROTOCOL_UNKNOWN, ProtocolError
from .state import WINDOW_ID_RE, WINDOW_STATUSES

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

PREFIX = "prefix"
UNIFIED = "unified"

STABLE = "stable"
EXPERIMENTAL = "experimental"

# Where a system prompt takes the protocol prompt (SPEC §4).
SYSTEM_PLACEHOLDER = "{{context_protocol}}"

# Argument the dispatcher checks itself (SPEC §5.1), after the schema check.
EXPECTED_WINDOW_ARG = "expectedWindowId"

PLACEMENT_TRAILING_ASSISTANT = "trailing_assistant"
PLACEMENT_BEFORE_HISTORY_ASSISTANT = "before_history_assistant"
PLACEMENT_TRAILING_USER = "trailing_user"
STATE_MESSAGE_PLACEMENTS = (
    PLACEMENT_TRAILING_ASSISTANT,
    PLACEMENT_BEFORE_HISTORY_ASSISTANT,
    PLACEMENT_TRAILING_USER,
)

HISTORY_LIST = "context_history_list"
FOLD_CREATE = "context_fold_create"
FOLD_LIST = "context_fold_list"
FOLD_READ = "context_fold_read"
WINDOW_OPEN = "context_window_open"
WINDOW_MEMORY_SET = "context_window_memory_set"
WINDOW_COMPLETE = "context_window_complete"
WINDOW_LIST = "context_window_list"
WINDOW_SEARCH = "context_window_search"
WINDOW_READ = "context_window_read"
TASK_MEMORY_GET = "context_task_memory_get"
TASK_MEMORY_SET = "context_task_memory_set"
MAINTAINER_RUN = "context_maintainer_run"

UNIFIED_TOOL_ORDER = (
    HISTORY_LIST,
    FOLD_CREATE,
    FOLD_LIST,
    FOLD_READ,
    WINDOW_OPEN,
    WINDOW_MEMORY_SET,
    WINDOW_COMPLETE,
    WINDOW_LIST,
    WINDOW_SEARCH,
    WINDOW_READ,
    TASK_MEMORY_GET,
    TASK_MEMORY_SET,
    MAINTAINER_RUN,
)
PROTOCOL_TOOL_NAMES: frozenset[str] = frozenset(UNIFIED_TOOL_ORDER)

MUTATING_TOOLS = frozenset(
    {FOLD_CREATE, WINDOW_OPEN, WINDOW_MEMORY_SET, WINDOW_COMPLETE, TASK_MEMORY_SET}
)
# v2+: tools whose call must state the window the model believes it is in.
V2_EXPECTED_WINDOW_TOOLS = frozenset(
    {WINDOW_OPEN, WINDOW_MEMORY_SET, WINDOW_COMPLETE, FOLD_CREATE, MAINTAINER_RUN}
)

PAGE_LIMIT_MAX = 50
MEMORY_MAX = 16000


@dataclass(frozen=True)
class ProtocolVersion:
    """One catalog entry: options schema, prompt and tool schemas of `id@version`."""

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
    state_message: bool

    # The dict fields make the generated hash fail; the key identifies a version.
    def __hash__(self) -> int:
        return hash((self.protocol_id, self.version))

    @property
    def key(self) -> str:
        return f"{self.protocol_id}@{self.version}"

    def to_public(self) -> dict[str, Any]:
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


# ---------------------------------------------------------------- options


def _bool_option(title: str, description: str, default: bool) -> dict[str, Any]:
    return {"type": "boolean", "title": title, "description": description, "default": default}


def _int_option(
    title: str, description: str, default: int, minimum: int, maximum: int
) -> dict[str, Any]:
    return {
        "type": "integer",
        "title": title,
        "description": description,
        "default": default,
        "minimum": minimum,
        "maximum": maximum,
    }


def _option_schema(key: str, *, checkpoint_max: int, windowed: bool, placement: bool) -> dict:
    props: dict[str, Any] = {
        "guiProjection": _bool_option(
            "GUI projection",
            "Keep images only in the 3 most recent messages that carry them; older images "
            "are replaced by a short text marker. Saves tokens in long GUI sessions.",
            True,
        ),
        "pageSize": _int_option(
            "Maintenance page size",
            "How many raw messages the maintainer reads per page while it writes a "
            "checkpoint. Larger pages mean fewer, bigger maintainer calls.",
            200,
            10,
            1000,
        ),
        "checkpointMaxCharacters": _int_option(
            "Checkpoint length limit",
            "Maximum length, in characters, of a window's checkpoint (the summary that "
            "replaces its older history). This limits the summary, not the model's input.",
            checkpoint_max,
            1000,
            24000,
        ),
    }
    if windowed:
        props["maxWindows"] = _int_option(
            "Windows per session",
            "Maximum number of windows a session may have, the main window included. "
            "Opening one more is refused with an error the model can read.",
            128,
            1,
            1024,
        )
        props["maxFolds"] = _int_option(
            "Folds per session",
            "Maximum number of folds a session may have, folds already covered by a "
            "checkpoint included.",
            1024,
            1,
            65536,
        )
    if placement:
        props["stateMessagePlacement"] = {
            "type": "string",
            "title": "State message placement (experiment)",
            "description": (
                "Where the context_state message goes in the model's view: "
                "trailing_assistant (group A, default) after the history as an assistant "
                "message; before_history_assistant (group B) between the header and the "
                "history; trailing_user (group C) after the history as a user message."
            ),
            "enum": list(STATE_MESSAGE_PLACEMENTS),
            "default": PLACEMENT_TRAILING_ASSISTANT,
        }
    return {
        "$schema": JSON_SCHEMA_DIALECT,
        "title": f"Options of {key}",
        "type": "object",
        "properties": props,
        "additionalProperties": False,
    }


def _defaults_of(option_schema: dict[str, Any]) -> dict[str, Any]:
    return {name: prop["default"] for name, prop in option_schema["properties"].items()}


# ---------------------------------------------------------------- tools


def _string(
    description: str,
    *,
    min_length: int | None = None,
    max_length: int | None = None,
    pattern: str | None = None,
    enum: list[str] | None = None,
) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "description": description}
    if min_length is not None:
        schema["minLength"] = min_length
    if max_length is not None:
        schema["maxLength"] = max_length
    if pattern is not None:
        schema["pattern"] = pattern
    if enum is not None:
        schema["enum"] = enum
    return schema


JSON_INTEGER_MAX = 2**53 - 1


def _integer(
    description: str,
    *,
    default: int | None = None,
    minimum: int | None = None,
    maximum: int | None = None,
) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer", "description": description}
    if default is not None:
        schema["default"] = default
    if minimum is not None:
        schema["minimum"] = minimum
    # Every integer argument is bounded: an unbounded offset or index reaches the database
    # as an out-of-range value. 2^53 - 1 is the largest integer every JSON reader keeps exact.
    schema["maximum"] = JSON_INTEGER_MAX if maximum is None else maximum
    return schema


def _window_id(description: str) -> dict[str, Any]:
    return _string(description, pattern=WINDOW_ID_RE.pattern)


def _limit(what: str) -> dict[str, Any]:
    return _integer(
        f"How many {what} to return (at most {PAGE_LIMIT_MAX}).",
        default=20,
        minimum=1,
        maximum=PAGE_LIMIT_MAX,
    )


def _offset() -> dict[str, Any]:
    return _integer(
        "How many entries to skip; pass the previous nextOffset to read on.", default=0, minimum=0
    )


PURPOSE = _string("Why you are making this call, in a few words.", min_length=1, max_length=200)
EXPECTED_WINDOW = _string(
    "The id of the window you believe you are in now (see context_state). A guard, not a "
    "write target: if it differs from the actual window, nothing is changed."
)


def _tool(
    name: str,
    description: str,
    args: dict[str, dict[str, Any]],
    required: list[str],
    *,
    expected_window: str | None,
) -> dict[str, Any]:
    """Build one tool: `purpose` first, then `expectedWindowId` if any, then its arguments.

    `expected_window` is "required", "optional" or None (argument absent).
    """
    # Copies, so no two tools share a mutable schema dict.
    props: dict[str, Any] = {"purpose": copy.deepcopy(PURPOSE)}
    req = ["purpose"]
    if expected_window is not None:
        props[EXPECTED_WINDOW_ARG] = copy.deepcopy(EXPECTED_WINDOW)
        if expected_window == "required":
            req.append(EXPECTED_WINDOW_ARG)
    props.update(args)
    req.extend(required)
    return {
        "name": name,
        "description": description,
        "inputSchema": {
            "type": "object",
            "properties": props,
            "required": req,
            "additionalProperties": False,
        },
    }


def _unified_tools(version: int) -> dict[str, dict[str, Any]]:
    guarded = "required" if version >= 2 else None
    maintainer_guard = "required" if version >= 2 else "optional"
    if version >= 2:
        open_input = _string(
            "Handoff for the window you enter: briefly what is done, the next step and "
            "where to return. Required and non-empty.",
            min_length=1,
            max_length=4000,
        )
        open_required = ["windowId", "input"]
    else:
        open_input = _string(
            "Handoff for the window you enter: what it needs to know to start or go on.",
            max_length=4000,
        )
        open_required = ["windowId"]

    tools = [
        _tool(
            HISTORY_LIST,
            "List the active window's uncompressed history as interaction groups with their "
            "real message indices, a short preview and whether each group is foldable. Use "
            "it before context_fold_create to find fromIndex and throughIndex. Page with "
            "nextAfterIndex.",
            {
                "afterIndex": _integer(
                    "List groups after this message index; -1 starts at the beginning, "
                    "pass the previous nextAfterIndex to read on.",
                    default=-1,
                    minimum=-1,
                ),
                "limit": _limit("groups"),
            },
            [],
            expected_window=None,
        ),
        _tool(
            FOLD_CREATE,
            "Fold a long, finished stretch of your own work in the active window into a "
            "short summary, so it stops taking space. fromIndex and throughIndex must be "
            "group boundaries from context_history_list; only foldable groups; user inputs "
            "are never folded. The raw text stays readable with context_fold_read.",
            {
                "fromIndex": _integer(
                    "First message index of the range (a group start).", minimum=1
                ),
                "throughIndex": _integer(
                    "Message index where the range ends (a group end).", minimum=1
                ),
                "summary": _string(
                    "Work note standing in for the range: results and open points, not a "
                    "copy of the tool log.",
                    min_length=1,
                    max_length=2000,
                ),
            },
            ["fromIndex", "throughIndex", "summary"],
            expected_window=guarded,
        ),
        _tool(
            FOLD_LIST,
            "List the folds of a window (default: the active window) with their summary, "
            "index range and whether a checkpoint already covers them (compressed).",
            {
                "windowId": _window_id("Window whose folds to list; default the active one."),
                "offset": _offset(),
                "limit": _limit("folds"),
            },
            [],
            expected_window=None,
        ),
        _tool(
            FOLD_READ,
            "Read the original messages of a fold as JSON text, in slices; also works for "
            "compressed folds and for folds of other windows. Does not switch window. Pass "
            "nextCursor to read on.",
            {
                "foldId": _string(
                    "The fold id, as given by the fold message or context_fold_list.",
                    min_length=1,
                    max_length=128,
                ),
                "cursor": _integer(
                    "Offset of the slice to read; 0 for the start.", default=0, minimum=0
                ),
            },
            ["foldId"],
            expected_window=None,
        ),
        _tool(
            WINDOW_OPEN,
            "Switch to a window: create a new one for a distinct sub-task (give a goal), or "
            "return to an existing one (resume=true). Only the active window's history is "
            "visible after the switch.",
            {
                "windowId": _window_id(
                    "The window to enter: lowercase letters, digits, '_' and '-', starting "
                    "with a letter or digit, at most 64 characters."
                ),
                "goal": _string(
                    "Goal of the window; required when creating a new window.", max_length=2000
                ),
                "input": open_input,
                "resume": {
                    "type": "boolean",
                    "description": "true to return to an existing window.",
                    "default": False,
                },
            },
            open_required,
            expected_window=guarded,
        ),
        _tool(
            WINDOW_MEMORY_SET,
            "Replace the active window's working memory: the notes you need to go on with "
            "this sub-task. Do not copy text already kept in task memory.",
            {
                "memory": _string(
                    "The new working memory (replaces the old one).", max_length=MEMORY_MAX
                )
            },
            ["memory"],
            expected_window=guarded,
        ),
        _tool(
            WINDOW_COMPLETE,
            "Complete the active window (not main): record its outcome and switch back to "
            "the window it was entered from, or to returnToWindowId.",
            {
                "outcome": _string(
                    "What the sub-task produced: results, not the tool log.",
                    min_length=1,
                    max_length=4000,
                ),
                "returnToWindowId": _window_id(
                    "Window to return to, if not the one this window was entered from."
                ),
            },
            ["outcome"],
            expected_window=guarded,
        ),
        _tool(
            WINDOW_LIST,
            "List the session's windows with goal, status and an outcome preview. Does not "
            "switch window.",
            {
                "offset": _offset(),
                "limit": _limit("windows"),
                "status": _string("Only windows with this status.", enum=list(WINDOW_STATUSES)),
            },
            [],
            expected_window=None,
        ),
        _tool(
            WINDOW_SEARCH,
            "Find windows whose goal, memory, outcomes or checkpoint contain the query. "
            "Does not switch window.",
            {
                "query": _string("Text to look for.", min_length=1, max_length=200),
                "limit": _limit("windows"),
            },
            ["query"],
            expected_window=None,
        ),
        _tool(
            WINDOW_READ,
            "Read one window's record, checkpoint and coverage without switching to it.",
            {"windowId": _window_id("The window to read.")},
            ["windowId"],
            expected_window=None,
        ),
        _tool(
            TASK_MEMORY_GET,
            "Read the session's task memory: goals, constraints and progress shared by all "
            "windows.",
            {},
            [],
            expected_window=None,
        ),
        _tool(
            TASK_MEMORY_SET,
            "Replace the session's task memory. Keep long-lived goals and constraints here; "
            "inputs of earlier runs are not shown again.",
            {
                "memory": _string(
                    "The new task memory (replaces the old one).", max_length=MEMORY_MAX
                )
            },
            ["memory"],
            expected_window=None,
        ),
        _tool(
            MAINTAINER_RUN,
            "Ask the maintainer to compress the active window's older history into its "
            "checkpoint now. Only useful when much history remains after folding; the host "
            "also does this by itself.",
            {},
            [],
            expected_window=maintainer_guard,
        ),
    ]
    return {tool["name"]: tool for tool in tools}


# ---------------------------------------------------------------- versions


def _version(
    protocol_id: str,
    version: int,
    status: str,
    summary: str,
    prompt: str,
    *,
    checkpoint_max: int,
    state_message: bool,
    placement: bool,
) -> ProtocolVersion:
    windowed = protocol_id == UNIFIED
    key = f"{protocol_id}@{version}"
    schema = _option_schema(
        key, checkpoint_max=checkpoint_max, windowed=windowed, placement=placement
    )
    return ProtocolVersion(
        protocol_id=protocol_id,
        version=version,
        status=status,
        summary=summary,
        option_schema=schema,
        defaults=_defaults_of(schema),
        prompt=prompt,
        tools=_unified_tools(version) if windowed else {},
        mutating_tools=MUTATING_TOOLS if windowed else frozenset(),
        expected_window_tools=(
            V2_EXPECTED_WINDOW_TOOLS if windowed and version >= 2 else frozenset()
        ),
        windowed=windowed,
        state_message=state_message,
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
        state_message=False,
        placement=False,
    ),
    _version(
        UNIFIED,
        1,
        STABLE,
        "Windows, folds and per-window prefix compression.",
        prompts.UNIFIED_V1,
        checkpoint_max=12000,
        state_message=False,
        placement=False,
    ),
    _version(
        UNIFIED,
        2,
        STABLE,
        "unified@1 plus a context_state message and the expectedWindowId guard.",
        prompts.UNIFIED_V2,
        checkpoint_max=3000,
        state_message=True,
        placement=False,
    ),
    _version(
        UNIFIED,
        3,
        EXPERIMENTAL,
        "unified@2 with a position-neutral prompt and configurable placement of the state "
        "message (experiment).",
        prompts.UNIFIED_V3,
        checkpoint_max=3000,
        state_message=True,
        placement=True,
    ),
)
_BY_KEY = {(v.protocol_id, v.version): v for v in _VERSIONS}


def all_versions() -> list[ProtocolVersion]:
    """Return every catalog entry: prefix@2, unified@1, unified@2, unified@3."""
    return list(_VERSIONS)


def find_version(protocol_id: str, version: int) -> ProtocolVersion | None:
    """Return the entry for `protocol_id@version`, or None."""
    # True == 1 in a dict lookup; a bool is not a version number.
    if not isinstance(version, int) or isinstance(version, bool):
        return None
    return _BY_KEY.get((protocol_id, version))


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


def _definition(version: ProtocolVersion) -> dict[str, Any]:
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
    """Return the fingerprint of the whole catalog (SPEC §12)."""
    return fingerprint_of(_VERSIONS)


# ---------------------------------------------------------------- value checker

# The catalog's schemas use only these keywords; options.py and arguments.py check
# values with `check_value` instead of a general JSON Schema library, so the rules
# (a bool is not an integer, 3.0 is not an integer) and the messages are ours.
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
