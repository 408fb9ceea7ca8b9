"""KV key names, window record shape and the initial state of a session (contract §2.5)."""

from __future__ import annotations

import re
from typing import Any, Literal, TypedDict

MAIN_WINDOW = "main"
WINDOW_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")

KEY_ACTIVE_WINDOW = "activeWindow"
KEY_TASK_MEMORY = "taskMemory"
KEY_CURRENT_WINDOW_ENTRY = "currentWindowEntry"
WINDOW_PREFIX = "window/"
CHECKPOINT_PREFIX = "checkpoint/"
COVERED_PREFIX = "coveredThrough/"
FOLD_PREFIX = "fold/"

WindowStatus = Literal["active", "suspended", "completed"]
STATUS_ACTIVE: WindowStatus = "active"
STATUS_SUSPENDED: WindowStatus = "suspended"
STATUS_COMPLETED: WindowStatus = "completed"
WINDOW_STATUSES: tuple[WindowStatus, ...] = (STATUS_ACTIVE, STATUS_SUSPENDED, STATUS_COMPLETED)


class WindowKV(TypedDict):
    """The value of `window/<id>` as the engine writes it (contract §2.5).

    Records read back from KV are plain JSON: code reading them checks each key.
    """

    goal: str
    status: WindowStatus
    input: str
    memory: str
    outcomes: list[str]
    openedFrom: str | None
    createdAtIndex: int


class CompletedWindowHandoff(TypedDict):
    """unified@4's handoff input of a return by `context_window_complete` (contract §9): what
    the sub-task produced, so the parent's view shows it."""

    completedWindowId: str
    goal: str
    outcome: str


class WindowEntry(TypedDict):
    """The value of `currentWindowEntry`: how the agent arrived in its window."""

    windowId: str
    fromWindowId: str
    upperBoundBeforeEntry: int
    # The handoff of this entry: the `input` of an open; after a return by complete, the
    # target's own input (unified@2/@3) or the completed window and its outcome (unified@4).
    input: str | CompletedWindowHandoff
    enteredAtRevision: int


def window_key(window_id: str) -> str:
    return WINDOW_PREFIX + window_id


def checkpoint_key(window_id: str) -> str:
    return CHECKPOINT_PREFIX + window_id


def covered_key(window_id: str) -> str:
    return COVERED_PREFIX + window_id


def fold_key(fold_id: str) -> str:
    return FOLD_PREFIX + fold_id


def new_window_record(
    *, goal: str, input: str = "", opened_from: str | None = None, created_at_index: int = 0
) -> WindowKV:
    """Return a fresh `window/<id>` value."""
    return {
        "goal": goal,
        "status": STATUS_ACTIVE,
        "input": input,
        "memory": "",
        "outcomes": [],
        "openedFrom": opened_from,
        "createdAtIndex": created_at_index,
    }


def initial_kv() -> dict[str, Any]:
    """Return the KV a new session starts with: `main` active and its record."""
    return {
        KEY_ACTIVE_WINDOW: MAIN_WINDOW,
        window_key(MAIN_WINDOW): new_window_record(goal="Main conversation"),
    }


def is_valid_window_id(window_id: object) -> bool:
    return isinstance(window_id, str) and bool(WINDOW_ID_RE.fullmatch(window_id))
