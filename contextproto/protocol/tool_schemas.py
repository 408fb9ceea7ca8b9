"""Tool schemas of the unified protocol (contract §5): name, description, inputSchema per tool.

Built from a few field helpers; every tool takes `purpose` first, then (v2+) the
`expectedWindowId` guard, then its own arguments.
"""

from __future__ import annotations

import copy
from typing import Any

from .state import WINDOW_ID_RE, WINDOW_STATUSES
from .vocabulary import (
    EXPECTED_WINDOW_ARG,
    FOLD_CREATE,
    FOLD_LIST,
    FOLD_READ,
    HISTORY_LIST,
    HISTORY_READ,
    JSON_INTEGER_MAX,
    MAINTAINER_RUN,
    MEMORY_MAX,
    PAGE_LIMIT_MAX,
    TASK_MEMORY_GET,
    TASK_MEMORY_SET,
    TOOLS_SINCE,
    WINDOW_COMPLETE,
    WINDOW_LIST,
    WINDOW_MEMORY_SET,
    WINDOW_OPEN,
    WINDOW_READ,
    WINDOW_SEARCH,
)


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


def _history_read() -> dict[str, Any]:
    return _tool(
        HISTORY_READ,
        "Read one raw message of this session by its index, as JSON text in slices: a tool "
        "result masked in your view, or any message of any window, compressed or archived "
        "ones included. Read-only; does not switch window. Pass nextCursor to read on.",
        {
            "index": _integer(
                "The message index, as a masked result's stub or a fold names it.", minimum=1
            ),
            "cursor": _integer(
                "Offset of the slice to read; 0 for the start.", default=0, minimum=0
            ),
        },
        ["index"],
        expected_window=None,
    )


def unified_tools(version: int) -> dict[str, dict[str, Any]]:
    """The tool schemas of unified@`version`, by name.

    UNIFIED_TOOL_ORDER, with a tool a later version added (TOOLS_SINCE) placed after the
    tool it belongs with: context_history_read (v4) after context_history_list.
    """
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
    if version >= TOOLS_SINCE[HISTORY_READ]:
        tools.insert(1, _history_read())
    return {tool["name"]: tool for tool in tools}
