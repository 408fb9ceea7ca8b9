"""Protocol tool dispatch: one entry point over a session-scoped reader port (contract §5, §5.2).

`dispatch` never writes. It returns the KV writes, the new fold and the side
effects; the Django layer commits the writes with the receipt and the result
message in one transaction and performs the effects after the commit. A model's
mistake is never an exception here but an error result the runtime feeds back,
so the model can read it and go on ("errors are data").

The window handlers live in `tool_windows`, the history and fold handlers in
`tool_folds`, the types they share in `tool_base`; this module holds the checks every
call goes through, the handler table, and the task memory and maintainer tools.
"""

from __future__ import annotations

from contextproto.protocol import catalog, errors, tool_folds, tool_windows
from contextproto.protocol.arguments import validate_tool_arguments
from contextproto.protocol.catalog import EXPECTED_WINDOW_ARG
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.state import KEY_TASK_MEMORY
from contextproto.protocol.tool_base import (
    EFFECT_QUEUE_MAINTENANCE,
    Handler,
    Invocation,
    Refusal,
    SessionReader,
    ToolCall,
    ToolContext,
    ToolOutcome,
    error_outcome,
    success,
)
from contextproto.protocol.tool_results import MaintainerRunResult, TaskMemoryResult

__all__ = [
    "EFFECT_QUEUE_MAINTENANCE",
    "HANDLERS",
    "SessionReader",
    "ToolCall",
    "ToolContext",
    "ToolOutcome",
    "dispatch",
    "error_outcome",
    "handled_tools",
]


def dispatch(call: ToolCall, ctx: ToolContext, reader: SessionReader) -> ToolOutcome:
    """Run one protocol tool call; return its result and the writes to commit.

    Never raises for a model's mistake: every refusal is an error result. The
    checks run in the order of contract §5.2 and the first failure answers:
    arguments, `expectedWindowId` present (v2+), revision (mutating tools),
    window guard, then the tool's own rules. Reader failures (database errors)
    do propagate: they are not the model's to fix.
    """
    try:
        args = validate_tool_arguments(ctx.version, call.tool_name, call.arguments)
        invocation = Invocation(call=call, ctx=ctx, reader=reader, args=args)
        _check_expectation(invocation)
        _check_revision(invocation)
        _check_window(invocation)
        return HANDLERS[call.tool_name](invocation)
    except ProtocolError as exc:
        return error_outcome(exc)


# ---------------------------------------------------------------- checks


def _check_expectation(inv: Invocation) -> None:
    name = inv.call.tool_name
    if name in inv.ctx.version.expected_window_tools and EXPECTED_WINDOW_ARG not in inv.args:
        raise Refusal(
            errors.WINDOW_EXPECTATION_REQUIRED,
            f"{name} needs expectedWindowId: the id of the window you believe you are in "
            "(the windowId of the context_state message). Nothing was changed; call again "
            "with it.",
            {"tool": name, "argument": EXPECTED_WINDOW_ARG},
        )


def _check_revision(inv: Invocation) -> None:
    if inv.call.tool_name not in inv.ctx.version.mutating_tools:
        return
    current, frozen = inv.ctx.current_revision, inv.call.frame.revision
    if current != frozen:
        raise Refusal(
            errors.STATE_STALE,
            f"The session state changed after the view this call was made from (revision "
            f"{frozen} then, {current} now); nothing was changed. Check the current state "
            "in your next view and call again if it is still needed.",
            {"currentRevision": current, "frozenRevision": frozen},
        )


def _check_window(inv: Invocation) -> None:
    # In v2+ the schemas carry expectedWindowId only on guarded tools; in v1 only
    # context_maintainer_run accepts it, optionally. Whenever it is given, it guards.
    if EXPECTED_WINDOW_ARG not in inv.args:
        return
    expected, actual = inv.args[EXPECTED_WINDOW_ARG], inv.active_window()
    if expected != actual:
        raise Refusal(
            errors.WINDOW_MISMATCH,
            f"You expected to be in window '{expected}', but the active window is '{actual}'; "
            f"nothing was changed. Continue in '{actual}' (pass expectedWindowId "
            f"'{actual}'), or switch with context_window_open first.",
            {
                "expectedWindowId": expected,
                "currentWindowId": actual,
                "stateRevision": inv.ctx.current_revision,
            },
        )


def task_memory_get(inv: Invocation) -> ToolOutcome:
    """Return the session's task memory ("" when never set)."""
    memory = inv.reader.kv_get_many([KEY_TASK_MEMORY]).get(KEY_TASK_MEMORY)
    return success(TaskMemoryResult(success=True, memory=memory if isinstance(memory, str) else ""))


def task_memory_set(inv: Invocation) -> ToolOutcome:
    """Replace the session's task memory."""
    memory = inv.args["memory"]
    return success(
        TaskMemoryResult(success=True, memory=memory), kv_writes={KEY_TASK_MEMORY: memory}
    )


def maintainer_run(inv: Invocation) -> ToolOutcome:
    """Queue maintenance of the active window; writes nothing (the job commits later)."""
    if not inv.ctx.maintainer_bound:
        raise Refusal(
            errors.MAINTAINER_NOT_BOUND,
            "No maintainer Agent is bound to this AgentVersion, so compression cannot be "
            "started from here; the host compresses history by itself when it grows. Go on "
            "with your task (fold finished stretches with context_fold_create if needed).",
            {},
        )
    window_id = inv.active_window()
    return success(
        MaintainerRunResult(success=True, windowId=window_id, queued=True),
        effects=((EFFECT_QUEUE_MAINTENANCE, {"windowId": window_id}),),
    )


# Imported at the top: the handler modules import tool_base, never this module.
HANDLERS: dict[str, Handler] = {
    catalog.HISTORY_LIST: tool_folds.history_list,
    catalog.HISTORY_READ: tool_folds.history_read,
    catalog.FOLD_CREATE: tool_folds.fold_create,
    catalog.FOLD_LIST: tool_folds.fold_list,
    catalog.FOLD_READ: tool_folds.fold_read,
    catalog.WINDOW_OPEN: tool_windows.window_open,
    catalog.WINDOW_MEMORY_SET: tool_windows.window_memory_set,
    catalog.WINDOW_COMPLETE: tool_windows.window_complete,
    catalog.WINDOW_LIST: tool_windows.window_list,
    catalog.WINDOW_SEARCH: tool_windows.window_search,
    catalog.WINDOW_READ: tool_windows.window_read,
    catalog.TASK_MEMORY_GET: task_memory_get,
    catalog.TASK_MEMORY_SET: task_memory_set,
    catalog.MAINTAINER_RUN: maintainer_run,
}


def handled_tools() -> frozenset[str]:
    """Return the names of the tools `dispatch` has a handler for."""
    return frozenset(HANDLERS)
