"""What each protocol tool answers (contract §5): the JSON of its `tool_result`, by tool.

A success carries `"success": true` and the tool's fields; a refusal carries
`"success": false` and an `error` object. `success` is the tag that tells them apart.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from contextproto.protocol.state import WindowStatus


class ToolFailure(TypedDict):
    """A refusal: `error` holds `code`, `message`, `correctable` and the refusal's details
    (window ids, revisions, the argument at fault, ...) side by side (contract §5.2)."""

    success: Literal[False]
    error: dict[str, object]


def tool_failure(
    code: str,
    message: str,
    *,
    correctable: bool = True,
    details: dict[str, Any] | None = None,
) -> ToolFailure:
    """The one builder of a refusal result: `{"success": false, "error": {...}}`.

    The refusal's details come first and `code`, `message`, `correctable` last, so a detail
    can never shadow them. Used by the engine's dispatcher, the service's dispatch and
    runtime, and the MCP edge alike.
    """
    error: dict[str, object] = {
        **(details or {}),
        "code": code,
        "message": message,
        "correctable": correctable,
    }
    return {"success": False, "error": error}


class _Succeeded(TypedDict):
    success: Literal[True]


# ---------------------------------------------------------------- history and folds


class HistoryGroup(TypedDict):
    """One interaction group of `context_history_list`."""

    firstIndex: int
    lastIndex: int
    indices: list[int]
    kind: str  # groups.GROUP_*
    preview: str
    foldable: bool
    reason: str | None  # groups.REASON_* or "already_folded"; None when foldable
    foldId: str | None  # the fold holding the group, if any


class HistoryListResult(_Succeeded):
    windowId: str
    coveredThrough: int
    upperBound: int
    groups: list[HistoryGroup]
    nextAfterIndex: int | None


class HistoryReadResult(_Succeeded):
    index: int
    windowId: str
    text: str
    cursor: int
    nextCursor: int | None
    totalLength: int


class FoldCreateResult(_Succeeded):
    foldId: str
    windowId: str
    firstIndex: int
    lastIndex: int
    messageCount: int


class FoldEntry(TypedDict):
    """One fold of `context_fold_list`."""

    foldId: str
    windowId: str
    firstIndex: int
    lastIndex: int
    summary: str
    compressed: bool


class FoldListResult(_Succeeded):
    windowId: str
    folds: list[FoldEntry]
    nextOffset: int | None


class FoldReadResult(_Succeeded):
    foldId: str
    windowId: str
    firstIndex: int
    lastIndex: int
    compressed: bool
    text: str
    cursor: int
    nextCursor: int | None
    totalLength: int


# ---------------------------------------------------------------- windows


class WindowOpenResult(_Succeeded):
    windowId: str
    previousWindowId: str
    created: bool
    goal: str
    status: WindowStatus


class WindowMemorySetResult(_Succeeded):
    windowId: str
    memory: str


class WindowCompleteResult(_Succeeded):
    windowId: str
    previousWindowId: str
    outcome: str


class WindowSummary(TypedDict):
    """One window of `context_window_list` and `context_window_search`."""

    windowId: str
    goal: str
    status: str | None  # as stored
    outcomePreview: str | None


class WindowListResult(_Succeeded):
    windows: list[WindowSummary]
    nextOffset: int | None


class WindowReadResult(_Succeeded):
    # The stored record with its id in front, as stored (older records may lack keys).
    window: dict[str, Any]
    checkpoint: str | None  # the window's checkpoint text, None when there is none
    coveredThrough: int


# ---------------------------------------------------------------- memory and maintainer


class TaskMemoryResult(_Succeeded):
    memory: str


class MaintainerRunResult(_Succeeded):
    windowId: str
    queued: bool


ToolSuccess = (
    HistoryListResult
    | HistoryReadResult
    | FoldCreateResult
    | FoldListResult
    | FoldReadResult
    | WindowOpenResult
    | WindowMemorySetResult
    | WindowCompleteResult
    | WindowListResult
    | WindowReadResult
    | TaskMemoryResult
    | MaintainerRunResult
)
ToolResult = ToolSuccess | ToolFailure
