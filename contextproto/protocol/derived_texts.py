"""The texts of a view's derived messages (contract §4.1-§4.3, §9): the system prompt with its
placeholders filled, the context header of each layout style, and the state message.

Each is a pure function of the frozen state (KV at R) and the visible history; the layout
(`projection.project`) chooses which to show and where.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from contextproto.protocol.catalog import HeaderStyle
from contextproto.protocol.history import HistoryItem
from contextproto.protocol.messages import KIND_TOOL_CALL, KIND_TOOL_RESULT, RawMessage
from contextproto.protocol.state import (
    KEY_CURRENT_WINDOW_ENTRY,
    KEY_TASK_MEMORY,
    checkpoint_key,
    window_key,
)
from contextproto.protocol.vocabulary import CLIENT_SYSTEM_PLACEHOLDER, SYSTEM_PLACEHOLDER

HEADER_LEAD = (
    "Derived context state, maintained by the context protocol (not a message from the user):"
)
STATE_LEAD = (
    "Context state, derived by the context protocol from the frozen session state "
    "(information, not an instruction):"
)

# Window record keys in the order the header shows them; unknown keys follow, sorted,
# so the rendering does not depend on how the store ordered a JSON object.
WINDOW_RECORD_ORDER = (
    "goal",
    "status",
    "input",
    "memory",
    "outcomes",
    "openedFrom",
    "createdAtIndex",
)


class ContextPressure(TypedDict):
    """The unified@4 state message's `contextPressure` (contract §9)."""

    viewTokens: int
    maxInputTokens: int | None
    triggerTokens: int | None
    maintenancePending: bool


class _StateFields(TypedDict):
    """The unified@2/@3 state message's fields, in their order (JSON keeps it)."""

    windowId: str
    # The record's and the window entry's values, as stored.
    status: object
    revision: int
    enteredFrom: object
    upperBoundBeforeEntry: object
    handoffInput: object
    checkpointPosition: int
    visibleToolResultsSinceEntry: int
    lastToolName: str | None


def _dumps(value: object, *, ensure_ascii: bool) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii)


def _window_view(window_id: str, record: Any) -> dict[str, Any]:
    view: dict[str, Any] = {"id": window_id}
    if isinstance(record, Mapping):
        for key in WINDOW_RECORD_ORDER:
            if key in record:
                view[key] = record[key]
        for key in sorted(k for k in record if k not in WINDOW_RECORD_ORDER and k != "id"):
            view[key] = record[key]
    return view


def state_text(
    *,
    window_id: str,
    kv: Mapping[str, Any],
    revision: int,
    covered: int,
    items: Sequence[HistoryItem],
) -> str:
    state = _state_fields(
        window_id=window_id, kv=kv, revision=revision, covered=covered, items=items
    )
    return STATE_LEAD + "\n" + _dumps(state, ensure_ascii=False)


def _state_fields(
    *,
    window_id: str,
    kv: Mapping[str, Any],
    revision: int,
    covered: int,
    items: Sequence[HistoryItem],
) -> _StateFields:
    """The unified@2/@3 state message's fields, in their order."""
    record = kv.get(window_key(window_id))
    record = record if isinstance(record, Mapping) else {}
    entry = kv.get(KEY_CURRENT_WINDOW_ENTRY)
    # An entry of another window is a leftover of an earlier switch; it says nothing
    # about how the agent arrived in W.
    if not (isinstance(entry, Mapping) and entry.get("windowId") == window_id):
        entry = {}
    bound_before = entry.get("upperBoundBeforeEntry")
    since = bound_before if isinstance(bound_before, int) else 0
    raws = [i for i in items if isinstance(i, RawMessage)]
    last_call = next((m for m in reversed(raws) if m.kind == KIND_TOOL_CALL), None)
    return {
        "windowId": window_id,
        "status": record.get("status"),
        "revision": revision,
        "enteredFrom": entry.get("fromWindowId"),
        "upperBoundBeforeEntry": bound_before,
        "handoffInput": entry.get("input") or record.get("input") or None,
        "checkpointPosition": covered,
        "visibleToolResultsSinceEntry": sum(
            1 for m in raws if m.kind == KIND_TOOL_RESULT and m.index > since
        ),
        "lastToolName": last_call.tool_name if last_call is not None else None,
    }


def header_text(
    style: HeaderStyle, *, window_id: str, kv: Mapping[str, Any], session_inputs: Any
) -> str:
    """The context header of a layout's `style`."""
    checkpoint = kv.get(checkpoint_key(window_id))
    if style is HeaderStyle.STABLE:
        return _header_v4(window_id=window_id, kv=kv, session_inputs=session_inputs)
    if style is HeaderStyle.PREFIX:
        # prefix@2 is not an @1-era rendering: non-ASCII inputs stay readable (and cheap).
        body = {"agent_inputs": session_inputs, "checkpoint": checkpoint}
        return HEADER_LEAD + "\n" + _dumps(body, ensure_ascii=False)
    window = _window_view(window_id, kv.get(window_key(window_id)))
    memory = kv.get(KEY_TASK_MEMORY)
    if style is HeaderStyle.WINDOW_ASCII:
        body = {
            "agent_inputs": session_inputs,
            "task_memory": memory,
            "active_window": window,
            "working_checkpoint": checkpoint,
        }
        return HEADER_LEAD + "\n" + _dumps(body, ensure_ascii=True)
    body = {
        "inputs": session_inputs,
        "task_memory": memory,
        "current_window": window,
        "current_window_checkpoint": checkpoint,
    }
    return HEADER_LEAD + "\n" + _dumps(body, ensure_ascii=False)


def _stable(value: Any) -> Any:
    """`value` with every object's keys sorted, so its JSON does not depend on how a store
    ordered them (a cached prefix must be byte-stable)."""
    if isinstance(value, Mapping):
        return {str(k): _stable(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [_stable(v) for v in value]
    return value


def _header_v4(*, window_id: str, kv: Mapping[str, Any], session_inputs: Any) -> str:
    """The unified@4 header: only what changes at a task-memory write, a window switch or a
    checkpoint commit (contract §9); everything else is in the state message."""
    record = kv.get(window_key(window_id))
    goal = record.get("goal") if isinstance(record, Mapping) else None
    body = {
        "inputs": _stable(session_inputs),
        "task_memory": _stable(kv.get(KEY_TASK_MEMORY)),
        "current_window": {"id": window_id, "goal": _stable(goal)},
        "current_window_checkpoint": _stable(kv.get(checkpoint_key(window_id))),
    }
    return HEADER_LEAD + "\n" + _dumps(body, ensure_ascii=False)


_PLACEHOLDERS = re.compile(
    "|".join(re.escape(p) for p in (SYSTEM_PLACEHOLDER, CLIENT_SYSTEM_PLACEHOLDER))
)


def system_text(system_prompt: str, protocol_prompt: str, client_system: str) -> str:
    """The version's system prompt with the protocol prompt and the client's system text in
    their places, in one pass (a client text that itself says `{{context_protocol}}` stays
    as written)."""
    values = {SYSTEM_PLACEHOLDER: protocol_prompt, CLIENT_SYSTEM_PLACEHOLDER: client_system}
    return _PLACEHOLDERS.sub(lambda match: values[match.group(0)], system_prompt)


def pressure_state_text(
    *,
    window_id: str,
    kv: Mapping[str, Any],
    revision: int,
    covered: int,
    items: Sequence[HistoryItem],
    masked: int,
    pressure: ContextPressure,
) -> str:
    fields = _state_fields(
        window_id=window_id, kv=kv, revision=revision, covered=covered, items=items
    )
    record = kv.get(window_key(window_id))
    record = record if isinstance(record, Mapping) else {}
    state = {
        "windowId": fields["windowId"],
        "status": fields["status"],
        "revision": fields["revision"],
        "enteredFrom": fields["enteredFrom"],
        "upperBoundBeforeEntry": fields["upperBoundBeforeEntry"],
        "handoffInput": _stable(fields["handoffInput"]),
        "workingMemory": _stable(record.get("memory") or None),
        "outcomes": _stable(record.get("outcomes") or []),
        "checkpointPosition": fields["checkpointPosition"],
        "visibleToolResultsSinceEntry": fields["visibleToolResultsSinceEntry"],
        "lastToolName": fields["lastToolName"],
        "maskedToolResults": masked,
        "contextPressure": pressure,
    }
    return STATE_LEAD + "\n" + _dumps(state, ensure_ascii=False)
