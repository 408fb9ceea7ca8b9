"""The model's view for one turn (contract §4): a pure function of frozen state and raw rows.

`view.py` plans a view, has a source load exactly the rows `plan_reads` names (W's
messages above C, the current run's inputs, W's folds above C, a few KV keys) and hands
them to `project`, which assembles them by the version's catalog layout. Nothing here
scans the whole log, so the cost of a turn grows with what the model sees, not with the
session's size.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, TypedDict

from contextproto.protocol import client_state, errors
from contextproto.protocol.catalog import HeaderStyle, Layout, StateStyle, find_version
from contextproto.protocol.content_parts import has_image, is_image_part, part_text
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.groups import build_groups
from contextproto.protocol.masking import mask_results
from contextproto.protocol.messages import (
    DERIVED_FOLD,
    DERIVED_HEADER,
    DERIVED_MASKED,
    DERIVED_RAW,
    DERIVED_STATE,
    DERIVED_SYSTEM,
    KIND_INPUT,
    KIND_TOOL_CALL,
    KIND_TOOL_RESULT,
    ROLE_ASSISTANT,
    ROLE_SYSTEM,
    ROLE_USER,
    Fold,
    ModelMessage,
    ModelMessageWire,
    ProjectionSource,
    RawMessage,
    Role,
    SourceWire,
)
from contextproto.protocol.state import (
    KEY_ACTIVE_WINDOW,
    KEY_CURRENT_WINDOW_ENTRY,
    KEY_TASK_MEMORY,
    MAIN_WINDOW,
    checkpoint_key,
    covered_key,
    window_key,
)
from contextproto.protocol.tokens import json_tokens
from contextproto.protocol.vocabulary import (
    CLIENT_SYSTEM_PLACEHOLDER,
    MASK_KEEP_RECENT,
    MASK_MIN_CHARS,
    MASK_STEP,
    PLACEMENT_BEFORE_HISTORY_ASSISTANT,
    PLACEMENT_TRAILING_ASSISTANT,
    PLACEMENT_TRAILING_USER,
    PREFIX,
    STATE_MESSAGE_PLACEMENTS,
    SYSTEM_PLACEHOLDER,
)

GUI_IMAGES_KEPT = 3
DEFAULT_TOOL_RESULT_PREVIEW_CHARS = 16000

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


# --------------------------------------------------------------------------- reads


@dataclass(frozen=True)
class ReadPlan:
    """The rows the DB layer must fetch for one view, and nothing else."""

    window_id: str
    after_index: int  # C: fetch W's messages with index > C ...
    through_index: int  # U: ... and index <= U
    run_id: str | None  # fetch input messages with input_run == run_id, index <= U, any window
    folds_window: str | None  # fetch this window's folds with first_index > folds_after_index
    folds_after_index: int


# The only key needed before W is known; covered_key(W) follows once it is.
KV_KEYS_FOR_PLAN = (KEY_ACTIVE_WINDOW,)


def _base_protocol(protocol_id: str) -> str:
    return protocol_id.split("@", 1)[0]


def plan_reads(
    *,
    protocol_id: str,
    active_window: str | None,
    covered_through: int,
    run_id: str | None,
    upper_bound: int,
) -> ReadPlan:
    """Return the rows a view needs, given `activeWindow` and `coveredThrough/W`.

    `protocol_id` is the catalog id (`prefix`, `unified`; an `id@version` form is
    accepted). prefix@2 always reads window `main` and never reads folds.
    """
    prefix = _base_protocol(protocol_id) == PREFIX
    window_id = MAIN_WINDOW if prefix or not active_window else active_window
    return ReadPlan(
        window_id=window_id,
        after_index=covered_through,
        through_index=upper_bound,
        run_id=run_id,
        folds_window=None if prefix else window_id,
        folds_after_index=covered_through,
    )


def kv_keys_for_view(protocol_id: str, window_id: str) -> tuple[str, ...]:
    """Return the KV keys `project` reads for window `window_id` (and the names of a gateway
    client's tools, which the view sends after the others)."""
    if _base_protocol(protocol_id) == PREFIX:
        return (covered_key(MAIN_WINDOW), checkpoint_key(MAIN_WINDOW), *client_state.VIEW_KEYS)
    return (
        KEY_ACTIVE_WINDOW,
        KEY_TASK_MEMORY,
        window_key(window_id),
        checkpoint_key(window_id),
        covered_key(window_id),
        KEY_CURRENT_WINDOW_ENTRY,
        *client_state.VIEW_KEYS,
    )


# --------------------------------------------------------------------------- types


@dataclass(frozen=True)
class ProjectionInput:
    """Everything one view depends on; equal inputs give byte-equal projections."""

    protocol_id: str  # catalog id: "prefix" | "unified"
    version: int
    options: Mapping[str, Any]  # normalized: every key of the version present
    system_prompt: str
    protocol_prompt: str
    session_id: str
    session_inputs: Any  # the session's inputs (a JSON value)
    run_id: str | None
    upper_bound: int
    revision: int
    kv: Mapping[str, Any]  # the keys of kv_keys_for_view; a missing key means absent
    window_messages: Sequence[RawMessage]  # W's messages with C < index <= U
    run_inputs: Sequence[RawMessage]  # current run's inputs, index <= U, any window
    folds: Sequence[Fold]  # W's folds with first_index > C
    tool_result_preview_chars: int = DEFAULT_TOOL_RESULT_PREVIEW_CHARS
    # Context pressure (unified@4 shows it; other versions ignore these). Passed in, not
    # read, so the view stays a pure function of its input.
    max_input_tokens: int | None = None  # the AgentVersion's maxInputTokens
    trigger_tokens: int | None = None  # the fewest input tokens that queue maintenance
    maintenance_pending: bool = False  # a maintenance job of W is queued or running
    tool_tokens: int = 0  # estimated tokens of the tool schemas sent with the view


class ProjectionWire(TypedDict):
    """A view as the API returns and stores it (contract §12.1 projection)."""

    messages: list[ModelMessageWire]
    sources: list[SourceWire]
    windowId: str
    revision: int
    upperBound: int
    runId: str | None
    protocol: str
    options: dict[str, Any]


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


@dataclass(frozen=True)
class Projection:
    """The model's view: messages[i] is explained by sources[i]."""

    messages: tuple[ModelMessage, ...]
    sources: tuple[ProjectionSource, ...]
    window_id: str
    revision: int
    upper_bound: int
    run_id: str | None
    protocol: str  # "unified@2"
    options: dict[str, Any]
    # Tool call ids whose visible result is an error. Not part of the wire shape:
    # only provider adapters need it (Anthropic's `is_error`), and ModelMessage has
    # no field for it.
    error_tool_call_ids: frozenset[str] = field(default_factory=frozenset)

    def to_wire(self) -> ProjectionWire:
        return {
            "messages": [m.to_wire() for m in self.messages],
            "sources": [s.to_wire() for s in self.sources],
            "windowId": self.window_id,
            "revision": self.revision,
            "upperBound": self.upper_bound,
            "runId": self.run_id,
            "protocol": self.protocol,
            "options": self.options,
        }


# --------------------------------------------------------------------------- history


@dataclass(frozen=True)
class _Unit:
    """An atomic stretch of W's history: one interaction group or one fold."""

    first_index: int
    last_index: int
    messages: tuple[RawMessage, ...] = ()
    fold: Fold | None = None


# A history item is a raw message or a fold, in view order.
_Item = RawMessage | Fold


def _units(window_messages: Sequence[RawMessage], folds: Sequence[Fold]) -> list[_Unit]:
    """Cut W's visible messages into groups and folds, refusing folds that break a unit."""
    folds = sorted(folds, key=lambda f: (f.first_index, f.last_index, f.id))
    units = [_Unit(first_index=f.first_index, last_index=f.last_index, fold=f) for f in folds]
    # Messages and folds are both index-sorted, so one merge pass finds the fold
    # (if any) each message falls into.
    loose: list[RawMessage] = []
    pos = 0
    for message in window_messages:
        while pos < len(folds) and folds[pos].last_index < message.index:
            pos += 1
        if pos < len(folds) and folds[pos].first_index <= message.index:
            continue
        loose.append(message)
    for group in build_groups(loose):
        units.append(
            _Unit(
                first_index=group.first_index, last_index=group.last_index, messages=group.messages
            )
        )
    units.sort(key=lambda u: (u.first_index, u.last_index))
    for before, after in pairwise(units):
        if after.first_index <= before.last_index:
            # Only a corrupted state gets here (fold rules keep folds on group
            # boundaries); showing it would duplicate or split messages.
            raise ProtocolError(
                errors.PROJECTION_FOLD_CONFLICT,
                f"history units #{before.first_index}-#{before.last_index} and "
                f"#{after.first_index}-#{after.last_index} overlap: a fold overlaps another fold "
                "or cuts an interaction group.",
                {
                    "first": [before.first_index, before.last_index],
                    "second": [after.first_index, after.last_index],
                    "foldIds": [u.fold.id for u in (before, after) if u.fold is not None],
                },
            )
    return units


def _history(units: Sequence[_Unit], extra_inputs: Sequence[RawMessage]) -> list[_Item]:
    """Interleave protected inputs with W's units: before the first unit starting after them.

    An input whose index falls inside a unit's range (an open group, a fold) thus
    lands right after that unit, never inside it. The same holds for W's own user
    messages written while a call was open (contract §4.1 step 2): they follow their
    group, so a call is always followed directly by its results.
    """
    items: list[_Item] = []
    pos = 0
    for unit in units:
        while pos < len(extra_inputs) and extra_inputs[pos].index < unit.first_index:
            items.append(extra_inputs[pos])
            pos += 1
        if unit.fold is not None:
            items.append(unit.fold)
        else:
            items.extend(_user_messages_last(unit.messages))
    items.extend(extra_inputs[pos:])
    return items


def _user_messages_last(group: Sequence[RawMessage]) -> list[RawMessage]:
    """The group's messages with its user messages moved after the rest, order kept."""
    if len(group) < 2 or group[0].kind != KIND_TOOL_CALL:
        return list(group)  # a lone message, or a group without a call: nothing to keep apart
    return [m for m in group if m.role != ROLE_USER] + [m for m in group if m.role == ROLE_USER]


def _pairing_error(problem: str, message: str, **details: Any) -> ProtocolError:
    return ProtocolError(errors.PAIRING_VIOLATION, message, {"problem": problem, **details})


def _check_pairing(items: Sequence[_Item]) -> None:
    """Refuse a history where a call lacks exactly one later result, or a result its call."""
    pending: dict[str, int] = {}
    answered: dict[str, tuple[int, int]] = {}
    for item in items:
        if isinstance(item, Fold):
            continue
        call_id = item.tool_call_id or ""
        if item.kind == KIND_TOOL_CALL:
            if call_id in pending or call_id in answered:
                first = pending.get(call_id) or answered[call_id][0]
                raise _pairing_error(
                    "duplicate_call",
                    f"tool call id {call_id!r} is used by two calls (#{first} and #{item.index}).",
                    toolCallId=call_id,
                    indices=[first, item.index],
                )
            pending[call_id] = item.index
        elif item.kind == KIND_TOOL_RESULT:
            if call_id in pending:
                answered[call_id] = (pending.pop(call_id), item.index)
            elif call_id in answered:
                call_index, result_index = answered[call_id]
                raise _pairing_error(
                    "duplicate_result",
                    f"tool call {call_id!r} (#{call_index}) has a second result #{item.index} "
                    f"after #{result_index}; each call has exactly one result.",
                    toolCallId=call_id,
                    indices=[call_index, result_index, item.index],
                )
            else:
                raise _pairing_error(
                    "result_without_call",
                    f"tool result #{item.index} answers {call_id!r}, but no call with that id "
                    "precedes it in the view.",
                    toolCallId=call_id,
                    indices=[item.index],
                )
    if pending:
        call_id, index = min(pending.items(), key=lambda kv: kv[1])
        raise _pairing_error(
            "call_without_result",
            f"tool call {call_id!r} (#{index}) has no result in the view; a view is only built "
            "once every call of the window is answered.",
            toolCallId=call_id,
            indices=[index],
        )


# --------------------------------------------------------------------------- rendering


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


def _fold_text(fold: Fold) -> str:
    count = len(fold.message_ids)
    return (
        f"[context_fold {fold.id}] Window '{fold.window_id}', messages "
        f"#{fold.first_index}-#{fold.last_index} ({count} messages) are folded into this note.\n"
        "Summary (the agent's own work note, not an instruction and not a verified fact):\n"
        f"{fold.summary}\n"
        f'To read the raw messages, call context_fold_read with {{"foldId": "{fold.id}"}}.'
    )


def _omit_images(content: list[dict[str, Any]], index: int) -> list[dict[str, Any]]:
    marker = {"type": "text", "text": f"[image omitted from view: message #{index}]"}
    return [dict(marker) if is_image_part(p) else p for p in content]


def _preview_marker(index: int, total: int, head: int, tail: int) -> str:
    return (
        f"\n[... tool result #{index} truncated for view: {total} characters in full; "
        f"showing first {head} and last {tail} ...]\n"
    )


def _is_high_surrogate(char: str) -> bool:
    return "\ud800" <= char <= "\udbff"


def _preview_text(text: str, limit: int, index: int) -> str:
    """Head, marker and tail of a long text: at most `limit` characters, marker included.

    Shorter than `text` whenever it is cut (only texts longer than `limit` are), and never
    splits a UTF-16 surrogate pair. A limit too small for the marker shows the head alone.
    """
    if limit <= 0 or len(text) <= limit:
        return text
    # The marker's length depends on the digits of head and tail, which are at most
    # limit // 2 + 1: sized with those, the real marker is never longer.
    widest = _preview_marker(index, len(text), limit // 2 + 1, limit // 2 + 1)
    budget = limit - len(widest)
    if budget < 2:
        return _cut(text, limit)
    head_text = _cut(text, budget // 2)
    tail_start = len(text) - (budget - budget // 2)
    if _is_high_surrogate(text[tail_start - 1]):
        tail_start += 1  # the tail would start on the low half of a pair
    tail_text = text[tail_start:]
    return head_text + _preview_marker(index, len(text), len(head_text), len(tail_text)) + tail_text


def _cut(text: str, length: int) -> str:
    """The first `length` characters of `text`, one fewer if that splits a surrogate pair."""
    if length > 0 and _is_high_surrogate(text[length - 1]):
        length -= 1
    return text[:length]


def _preview(content: Any, limit: int, index: int) -> Any:
    if isinstance(content, str):
        return _preview_text(content, limit, index)
    if isinstance(content, list):
        return [
            {**p, "text": _preview_text(text, limit, index)}
            if (text := part_text(p)) is not None
            else p
            for p in content
        ]
    return content


def _copy_content(content: Any) -> Any:
    # The view must never share mutable parts with the raw rows it was built from.
    if isinstance(content, list):
        return [dict(p) if isinstance(p, dict) else p for p in content]
    return content


def _raw_model_message(message: RawMessage, content: Any) -> ModelMessage:
    paired = message.kind in (KIND_TOOL_CALL, KIND_TOOL_RESULT)
    return ModelMessage(
        role=message.role,
        kind=message.kind,
        content=content,
        tool_call_id=message.tool_call_id if paired else None,
        tool_name=message.tool_name if paired else None,
        arguments=message.arguments if message.kind == KIND_TOOL_CALL else None,
    )


def _render_history(
    items: Sequence[_Item],
    *,
    session_id: str,
    gui: bool,
    preview_chars: int,
    masked: Mapping[str, str] | None = None,
) -> list[tuple[ModelMessage, ProjectionSource]]:
    """Render the history items; `masked` maps a tool result's MessageId to its stub."""
    masked = masked or {}
    keep_images: set[int] = set()
    if gui:
        # A masked result shows no image, so it does not take one of the places kept.
        with_images = [
            pos
            for pos, item in enumerate(items)
            if isinstance(item, RawMessage) and item.id not in masked and has_image(item.content)
        ]
        keep_images = set(with_images[-GUI_IMAGES_KEPT:])
    else:
        keep_images = set(range(len(items)))

    out: list[tuple[ModelMessage, ProjectionSource]] = []
    for pos, item in enumerate(items):
        if isinstance(item, Fold):
            out.append(
                (
                    ModelMessage(role=ROLE_ASSISTANT, kind=DERIVED_FOLD, content=_fold_text(item)),
                    ProjectionSource(
                        derived_type=DERIVED_FOLD,
                        session_id=session_id,
                        window_id=item.window_id,
                        fold_id=item.id,
                        first_index=item.first_index,
                        last_index=item.last_index,
                        message_ids=tuple(item.message_ids),
                    ),
                )
            )
            continue
        stub = masked.get(item.id)
        if stub is not None:
            # The stub replaces the whole content (images too) and is never previewed.
            out.append(
                (
                    _raw_model_message(item, stub),
                    ProjectionSource(
                        derived_type=DERIVED_MASKED,
                        session_id=session_id,
                        window_id=item.window_id,
                        first_index=item.index,
                        last_index=item.index,
                        message_ids=(item.id,),
                    ),
                )
            )
            continue
        content = _copy_content(item.content)
        if pos not in keep_images and has_image(content):
            content = _omit_images(content, item.index)
        if item.kind == KIND_TOOL_RESULT:
            content = _preview(content, preview_chars, item.index)
        out.append(
            (
                _raw_model_message(item, content),
                ProjectionSource(
                    derived_type=DERIVED_RAW,
                    session_id=session_id,
                    window_id=item.window_id,
                    first_index=item.index,
                    last_index=item.index,
                    message_ids=(item.id,),
                ),
            )
        )
    return out


def _state_content(
    *,
    window_id: str,
    kv: Mapping[str, Any],
    revision: int,
    covered: int,
    items: Sequence[_Item],
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
    items: Sequence[_Item],
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


def _header_content(
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


# --------------------------------------------------------------------------- unified@4


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


def _state_v4(
    *,
    window_id: str,
    kv: Mapping[str, Any],
    revision: int,
    covered: int,
    items: Sequence[_Item],
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


def _dedupe_sorted(messages: Sequence[RawMessage], seen: set[str]) -> list[RawMessage]:
    out = []
    for message in sorted(messages, key=lambda m: (m.index, m.id)):
        if message.id not in seen:
            seen.add(message.id)
            out.append(message)
    return out


def project(inp: ProjectionInput) -> Projection:
    """Build the model's view for one turn (contract §4).

    Pure and deterministic: equal inputs give equal projections with identical
    JSON. Rows outside the plan (other windows, W at or below C, above U, earlier
    runs' inputs, folds at or below C) are ignored even if passed in.

    Raises ProtocolError `projection_pairing_violation` when the history has a
    call without exactly one later result or a result without a preceding call.
    A call that is still pending counts as a violation: the caller must not
    project while a call of the active window awaits its result. Raises
    `projection_fold_conflict` for folds that overlap or cut a group (corrupt
    state) and `protocol_unknown` for a version this engine does not know.
    """
    protocol_id = _base_protocol(inp.protocol_id)
    entry = find_version(protocol_id, inp.version)
    if entry is None:
        raise ProtocolError(
            errors.PROTOCOL_UNKNOWN,
            f"the engine cannot project protocol {protocol_id}@{inp.version}.",
            {"protocol": f"{protocol_id}@{inp.version}"},
        )
    layout = entry.layout
    options = dict(inp.options)

    def option(name: str) -> Any:
        # Normalized options hold every key; the version's default covers a caller that
        # passes fewer.
        return options[name] if name in options else entry.defaults.get(name)

    visible = _visible(inp, windowed=entry.windowed)
    items = visible.items
    masked = (
        mask_results(
            [i for i in items if isinstance(i, RawMessage)],
            window_id=visible.window_id,
            keep_recent=int(option(MASK_KEEP_RECENT)),
            step=int(option(MASK_STEP)),
            min_chars=int(option(MASK_MIN_CHARS)),
        )
        if layout.masking
        else {}
    )
    sid = inp.session_id
    system = (
        ModelMessage(
            role=ROLE_SYSTEM,
            kind=DERIVED_SYSTEM,
            content=system_text(
                inp.system_prompt, inp.protocol_prompt, client_state.client_system(inp.kv)
            ),
        ),
        ProjectionSource(derived_type=DERIVED_SYSTEM, session_id=sid),
    )
    header = (
        ModelMessage(
            role=ROLE_ASSISTANT,
            kind=DERIVED_HEADER,
            content=_header_content(
                layout.header,
                window_id=visible.window_id,
                kv=inp.kv,
                session_inputs=inp.session_inputs,
            ),
        ),
        ProjectionSource(derived_type=DERIVED_HEADER, session_id=sid, window_id=visible.window_id),
    )
    history = _render_history(
        items,
        session_id=sid,
        gui=bool(options.get("guiProjection", True)),
        preview_chars=inp.tool_result_preview_chars,
        masked=masked,
    )
    ordered = _placed(
        inp, layout, option, visible, before_state=[system, header], history=history, masked=masked
    )
    return Projection(
        messages=tuple(m for m, _ in ordered),
        sources=tuple(s for _, s in ordered),
        window_id=visible.window_id,
        revision=inp.revision,
        upper_bound=inp.upper_bound,
        run_id=inp.run_id,
        protocol=f"{protocol_id}@{inp.version}",
        options=options,
        error_tool_call_ids=frozenset(
            i.tool_call_id
            for i in items
            if isinstance(i, RawMessage)
            and i.kind == KIND_TOOL_RESULT
            and i.is_error
            and i.tool_call_id
        ),
    )


@dataclass(frozen=True)
class _Visible:
    """What of the rows the view shows: the window, its covered bound, the history items."""

    window_id: str
    covered: int
    items: list[_Item]


def _visible(inp: ProjectionInput, *, windowed: bool) -> _Visible:
    """The window's messages in (C, U], this run's inputs and the folds above C, grouped into
    history items and checked for pairing; rows outside the plan are ignored."""
    kv = inp.kv
    window_id = (kv.get(KEY_ACTIVE_WINDOW) or MAIN_WINDOW) if windowed else MAIN_WINDOW
    covered = int(kv.get(covered_key(window_id)) or 0)
    bound = inp.upper_bound
    seen: set[str] = set()
    window_messages = _dedupe_sorted(
        [m for m in inp.window_messages if m.window_id == window_id and covered < m.index <= bound],
        seen,
    )
    extra_inputs = _dedupe_sorted(
        [
            m
            for m in inp.run_inputs
            if inp.run_id is not None
            and m.kind == KIND_INPUT
            and m.input_run == inp.run_id
            and m.index <= bound
        ],
        seen,
    )
    folds = (
        [f for f in inp.folds if f.window_id == window_id and f.first_index > covered]
        if windowed
        else []
    )
    items = _history(_units(window_messages, folds), extra_inputs)
    _check_pairing(items)
    return _Visible(window_id=window_id, covered=covered, items=items)


_Placed = tuple[ModelMessage, ProjectionSource]


def _placed(
    inp: ProjectionInput,
    layout: Layout,
    option: Callable[[str], Any],
    visible: _Visible,
    *,
    before_state: list[_Placed],
    history: Sequence[_Placed],
    masked: Mapping[str, str],
) -> list[_Placed]:
    """System and header, the history, and the layout's state message at its placement."""
    if layout.state is StateStyle.NONE:
        return [*before_state, *history]
    placement = layout.placement or option("stateMessagePlacement") or PLACEMENT_TRAILING_ASSISTANT
    if placement not in STATE_MESSAGE_PLACEMENTS:
        # Normalized options never get here; refuse rather than guess a position.
        raise ProtocolError(
            errors.OPTION_BAD_ENUM,
            f"stateMessagePlacement {placement!r} is not one of "
            f"{', '.join(STATE_MESSAGE_PLACEMENTS)}.",
            {"option": "stateMessagePlacement", "value": placement},
        )
    window_id, kv = visible.window_id, inp.kv
    if layout.state is StateStyle.PRESSURE:
        # viewTokens: every message of this view but the state message itself, plus the
        # tool schemas, as the admin's token breakdown estimates them (docs/decisions.md).
        view_tokens = inp.tool_tokens + sum(
            json_tokens(m.to_wire()) for m, _ in [*before_state, *history]
        )
        text = _state_v4(
            window_id=window_id,
            kv=kv,
            revision=inp.revision,
            covered=visible.covered,
            items=visible.items,
            masked=len(masked),
            pressure={
                "viewTokens": view_tokens,
                "maxInputTokens": inp.max_input_tokens,
                "triggerTokens": inp.trigger_tokens,
                "maintenancePending": bool(inp.maintenance_pending),
            },
        )
    else:
        text = _state_content(
            window_id=window_id,
            kv=kv,
            revision=inp.revision,
            covered=visible.covered,
            items=visible.items,
        )
    role: Role = ROLE_USER if placement == PLACEMENT_TRAILING_USER else ROLE_ASSISTANT
    state = (
        ModelMessage(role=role, kind=DERIVED_STATE, content=text),
        ProjectionSource(
            derived_type=DERIVED_STATE, session_id=inp.session_id, window_id=window_id
        ),
    )
    if placement == PLACEMENT_BEFORE_HISTORY_ASSISTANT:
        return [*before_state, state, *history]
    return [*before_state, *history, state]
