"""A view's history (contract §3.3, §4.1): the window's rows cut into interaction groups and
folds, the run's inputs placed between them, and the pairing every provider needs checked.

`visible_history` takes the rows a source loaded for a `ReadPlan` and keeps exactly the plan's
(W's messages in (C, U], the run's inputs through U, W's folds above C), so a row outside the
plan never enters a view even when a source passes it in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from contextproto.protocol import errors
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.groups import build_groups
from contextproto.protocol.messages import (
    KIND_INPUT,
    KIND_TOOL_CALL,
    KIND_TOOL_RESULT,
    ROLE_USER,
    Fold,
    RawMessage,
)
from contextproto.protocol.view_plan import ReadPlan

# A history item is a raw message or a fold, in view order.
HistoryItem = RawMessage | Fold


def visible_history(
    reads: ReadPlan,
    *,
    window_messages: Sequence[RawMessage],
    run_inputs: Sequence[RawMessage],
    folds: Sequence[Fold],
) -> list[HistoryItem]:
    """The window's messages in (C, U], this run's inputs and the folds above C, grouped into
    history items and checked for pairing; rows outside the read plan are ignored.

    Raises ProtocolError `projection_pairing_violation` when a call lacks exactly one later
    result or a result its call, and `projection_fold_conflict` for folds that overlap or cut
    a group (corrupt state).
    """
    window_id, covered, bound = reads.window_id, reads.after_index, reads.through_index
    seen: set[str] = set()
    window = _dedupe_sorted(
        [m for m in window_messages if m.window_id == window_id and covered < m.index <= bound],
        seen,
    )
    extra_inputs = _dedupe_sorted(
        [
            m
            for m in run_inputs
            if reads.run_id is not None
            and m.kind == KIND_INPUT
            and m.input_run == reads.run_id
            and m.index <= bound
        ],
        seen,
    )
    shown_folds = [
        f
        for f in folds
        if f.window_id == reads.folds_window and f.first_index > reads.folds_after_index
    ]
    items = _history(_units(window, shown_folds), extra_inputs)
    _check_pairing(items)
    return items


def _dedupe_sorted(messages: Sequence[RawMessage], seen: set[str]) -> list[RawMessage]:
    out = []
    for message in sorted(messages, key=lambda m: (m.index, m.id)):
        if message.id not in seen:
            seen.add(message.id)
            out.append(message)
    return out


@dataclass(frozen=True)
class _Unit:
    """An atomic stretch of W's history: one interaction group or one fold."""

    first_index: int
    last_index: int
    messages: tuple[RawMessage, ...] = ()
    fold: Fold | None = None


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


def _history(units: Sequence[_Unit], extra_inputs: Sequence[RawMessage]) -> list[HistoryItem]:
    """Interleave protected inputs with W's units: before the first unit starting after them.

    An input whose index falls inside a unit's range (an open group, a fold) thus
    lands right after that unit, never inside it. The same holds for W's own user
    messages written while a call was open (contract §4.1 step 2): they follow their
    group, so a call is always followed directly by its results.
    """
    items: list[HistoryItem] = []
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


def _check_pairing(items: Sequence[HistoryItem]) -> None:
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
