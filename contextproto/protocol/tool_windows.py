"""Window tools: open, memory, complete, list, search, read (contract §2.5, §5).

Handlers run after the dispatcher's checks, so for the mutating ones the active
window read here is the window of the call's frozen view (the revisions match).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contextproto.protocol import errors
from contextproto.protocol.catalog import ProtocolVersion
from contextproto.protocol.state import (
    KEY_ACTIVE_WINDOW,
    KEY_CURRENT_WINDOW_ENTRY,
    MAIN_WINDOW,
    STATUS_ACTIVE,
    STATUS_COMPLETED,
    STATUS_SUSPENDED,
    CompletedWindowHandoff,
    WindowEntry,
    checkpoint_key,
    covered_key,
    is_valid_window_id,
    new_window_record,
    window_key,
)
from contextproto.protocol.tool_base import (
    Invocation,
    Refusal,
    ToolOutcome,
    preview,
    record_of,
    success,
    window_not_found,
)
from contextproto.protocol.tool_results import (
    WindowCompleteResult,
    WindowListResult,
    WindowMemorySetResult,
    WindowOpenResult,
    WindowReadResult,
    WindowSummary,
)
from contextproto.protocol.vocabulary import UNIFIED


def return_names_completed_window(version: ProtocolVersion) -> bool:
    """Whether a return by complete hands the parent the completed window and its outcome
    as the entry's handoff input (unified@4 on, contract §9). Without it a model that returned
    saw the parent's old handoff and no trace of what it had just finished, and re-opened
    the finished window; unified@1-3 keep the parent's own input, as published."""
    return version.protocol_id == UNIFIED and version.version >= 4


def _entry(
    inv: Invocation, *, target: str, came_from: str, handoff: str | CompletedWindowHandoff
) -> WindowEntry:
    """Return the `currentWindowEntry` value for a switch committed by this call."""
    return {
        "windowId": target,
        "fromWindowId": came_from,
        "upperBoundBeforeEntry": inv.call.frame.upper_bound,
        "input": handoff,
        # The switch commits as the next revision: the entry names the state it creates.
        "enteredAtRevision": inv.ctx.current_revision + 1,
    }


def window_open(inv: Invocation) -> ToolOutcome:
    """Switch to a new window (with a goal) or back to an existing one (resume=true).

    A resumed window becomes active again whatever its status, completed
    included; its goal, memory and outcomes are kept, `input` is replaced by
    this entry's handoff ("" when none is given) and `openedFrom` names the
    window being left. A goal passed with resume=true is ignored; the result
    shows the window's goal. The window left becomes suspended unless it is
    completed.
    """
    target = inv.args["windowId"]
    if not is_valid_window_id(target):
        raise Refusal(
            errors.INVALID_ARGUMENTS,
            f"windowId {target!r} is not a valid window id: lowercase letters, digits, '_' "
            "and '-', starting with a letter or digit, at most 64 characters.",
            {"argument": "windowId", "tool": inv.call.tool_name},
        )
    current = inv.active_window()
    if target == current:
        raise Refusal(
            errors.WINDOW_ALREADY_ACTIVE,
            f"You are already in window '{current}'; no switch is needed, go on working here.",
            {"windowId": target},
        )
    kv = inv.reader.kv_get_many([window_key(target), window_key(current)])
    existing = kv.get(window_key(target))
    resume = bool(inv.args.get("resume", False))
    handoff = inv.args.get("input", "")

    if existing is not None and not resume:
        raise Refusal(
            errors.WINDOW_EXISTS,
            f"Window '{target}' already exists (status {existing.get('status')}); pass "
            "resume: true to return to it, or choose another windowId for a new window.",
            {"windowId": target, "status": existing.get("status")},
        )
    if existing is None and resume:
        raise Refusal(
            errors.WINDOW_NOT_FOUND,
            f"There is no window '{target}' to resume; to create it, call without resume "
            "and with a goal.",
            {"windowId": target, "argument": "windowId"},
        )
    if existing is None:
        goal = inv.args.get("goal", "")
        if not goal.strip():
            raise Refusal(
                errors.WINDOW_GOAL_REQUIRED,
                f"Window '{target}' is new: give it a goal (what this sub-task must achieve).",
                {"windowId": target, "argument": "goal"},
            )
        count, limit = inv.reader.window_count(), inv.option("maxWindows")
        if count >= limit:
            raise Refusal(
                errors.WINDOW_LIMIT_REACHED,
                f"This session already has {count} windows, the limit (maxWindows) is {limit}; "
                "no new window can be opened. Resume an existing window (resume: true) or go "
                "on in the current one.",
                {"windowCount": count, "maxWindows": limit},
            )
        record: Mapping[str, Any] = new_window_record(
            goal=goal, input=handoff, opened_from=current, created_at_index=inv.call.call_index
        )
    else:
        record = {**existing, "status": STATUS_ACTIVE, "input": handoff, "openedFrom": current}

    writes: dict[str, Any] = {window_key(target): record, KEY_ACTIVE_WINDOW: target}
    left = record_of(current, kv)
    if left.get("status") != STATUS_COMPLETED:
        writes[window_key(current)] = {**left, "status": STATUS_SUSPENDED}
    if inv.writes_entry:
        writes[KEY_CURRENT_WINDOW_ENTRY] = _entry(
            inv, target=target, came_from=current, handoff=handoff
        )
    return success(
        WindowOpenResult(
            success=True,
            windowId=target,
            previousWindowId=current,
            created=existing is None,
            goal=record.get("goal", ""),
            status=STATUS_ACTIVE,
        ),
        kv_writes=writes,
    )


def window_memory_set(inv: Invocation) -> ToolOutcome:
    """Replace the active window's working memory."""
    window_id = inv.active_window()
    record = record_of(window_id, inv.reader.kv_get_many([window_key(window_id)]))
    memory = inv.args["memory"]
    return success(
        WindowMemorySetResult(success=True, windowId=window_id, memory=memory),
        kv_writes={window_key(window_id): {**record, "memory": memory}},
    )


def window_complete(inv: Invocation) -> ToolOutcome:
    """Complete the active window, record the outcome and switch back.

    The target is `returnToWindowId`, else the window this one was entered from,
    else `main`. An explicit target must exist, differ from the window being
    completed and not be completed itself; an implicit one that is gone or
    completed falls back to `main`, which can never be completed.
    """
    current = inv.active_window()
    if current == MAIN_WINDOW:
        raise Refusal(
            errors.WINDOW_MAIN_NOT_COMPLETABLE,
            "The main window cannot be completed; it is where the session lives. To finish "
            "the task, give your final answer instead.",
            {"windowId": current},
        )
    explicit = inv.args.get("returnToWindowId")
    record_w = record_of(current, inv.reader.kv_get_many([window_key(current)]))
    candidate = explicit if explicit is not None else record_w.get("openedFrom") or MAIN_WINDOW
    kv = inv.reader.kv_get_many([window_key(candidate), window_key(MAIN_WINDOW)])
    target_record = kv.get(window_key(candidate))
    if target_record is None and candidate == MAIN_WINDOW:
        target_record = record_of(MAIN_WINDOW, kv)

    if explicit is not None:
        if explicit == current:
            raise Refusal(
                errors.WINDOW_RETURN_TO_SELF,
                f"returnToWindowId '{explicit}' is the window you are completing; name another "
                "window, or leave returnToWindowId out to go back where you came from.",
                {"windowId": current, "argument": "returnToWindowId"},
            )
        if target_record is None:
            raise window_not_found(explicit, argument="returnToWindowId")
        if target_record.get("status") == STATUS_COMPLETED:
            raise Refusal(
                errors.WINDOW_RETURN_COMPLETED,
                f"Window '{explicit}' is completed; you cannot return to it by completing this "
                "one. Name an active or suspended window, or leave returnToWindowId out.",
                {"windowId": explicit, "argument": "returnToWindowId"},
            )
        target = explicit
    elif (
        candidate == current
        or target_record is None
        or target_record.get("status") == STATUS_COMPLETED
    ):
        # The window we came from is gone or finished: main always takes us back.
        target = MAIN_WINDOW
        target_record = record_of(MAIN_WINDOW, kv)
    else:
        target = candidate

    outcome = inv.args["outcome"]
    outcomes = record_w.get("outcomes") or []
    writes: dict[str, Any] = {
        window_key(current): {
            **record_w,
            "status": STATUS_COMPLETED,
            "outcomes": [*outcomes, outcome],
        },
        window_key(target): {**target_record, "status": STATUS_ACTIVE},
        KEY_ACTIVE_WINDOW: target,
    }
    if inv.writes_entry:
        handoff: str | CompletedWindowHandoff = target_record.get("input", "")
        if return_names_completed_window(inv.ctx.version):
            handoff = {
                "completedWindowId": current,
                "goal": record_w.get("goal", ""),
                "outcome": outcome,
            }
        writes[KEY_CURRENT_WINDOW_ENTRY] = _entry(
            inv, target=target, came_from=current, handoff=handoff
        )
    return success(
        WindowCompleteResult(
            success=True, windowId=target, previousWindowId=current, outcome=outcome
        ),
        kv_writes=writes,
    )


def _summary(window_id: str, record: dict[str, Any]) -> WindowSummary:
    outcomes = record.get("outcomes") or []
    return {
        "windowId": window_id,
        "goal": record.get("goal", ""),
        "status": record.get("status"),
        "outcomePreview": preview(str(outcomes[-1])) if outcomes else None,
    }


def window_list(inv: Invocation) -> ToolOutcome:
    """List a page of the session's windows, optionally of one status; no switch."""
    offset, limit = inv.args["offset"], inv.args["limit"]
    # One row more than asked tells whether another page exists without a count query.
    rows = inv.reader.windows(inv.args.get("status"), offset, limit + 1)
    return success(
        WindowListResult(
            success=True,
            windows=[_summary(wid, record) for wid, record in rows[:limit]],
            nextOffset=offset + limit if len(rows) > limit else None,
        )
    )


def window_search(inv: Invocation) -> ToolOutcome:
    """Find windows by goal, memory, outcomes or checkpoint text; no switch, one page."""
    rows = inv.reader.search_windows(inv.args["query"], inv.args["limit"])
    return success(
        WindowListResult(
            success=True, windows=[_summary(wid, record) for wid, record in rows], nextOffset=None
        )
    )


def window_read(inv: Invocation) -> ToolOutcome:
    """Return one window's record, checkpoint (null when none) and coverage; no switch."""
    window_id = inv.args["windowId"]
    keys = [window_key(window_id), checkpoint_key(window_id), covered_key(window_id)]
    kv = inv.reader.kv_get_many(keys)
    record = kv.get(window_key(window_id))
    if record is None:
        raise window_not_found(window_id)
    return success(
        WindowReadResult(
            success=True,
            window={"id": window_id, **record},
            checkpoint=kv.get(checkpoint_key(window_id)),
            coveredThrough=int(kv.get(covered_key(window_id)) or 0),
        )
    )
