"""Fold rules (contract §5): which ranges of a window the agent may fold, and fold records.

Validation is a pure function over what the dispatcher already loaded; it never
reads state itself, so the same call validates the same way on replay.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

from contextproto.protocol import errors
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.groups import (
    REASON_CONTAINS_USER_INPUT,
    REASON_ORPHAN_RESULT,
    REASON_UNANSWERED_CALL,
    Group,
    build_groups,
)
from contextproto.protocol.messages import Fold, RawMessage

FOLD_ID_PREFIX = "f_"


def fold_id_for(tool_call_id: str) -> str:
    """Return the fold id a `context_fold_create` call names.

    Derived from the call id so that a replayed or duplicated call names the same
    fold instead of minting a second one.
    """
    digest = hashlib.sha256(tool_call_id.encode("utf-8")).hexdigest()
    return FOLD_ID_PREFIX + digest[:12]


def make_fold(
    *,
    tool_call_id: str,
    window_id: str,
    messages: Sequence[RawMessage],
    summary: str,
    created_at_index: int,
) -> Fold:
    """Build the fold record for validated `messages` (the output of validate_fold_range)."""
    if not messages:
        raise ValueError("a fold needs at least one message")
    ordered = sorted(messages, key=lambda m: m.index)
    return Fold(
        id=fold_id_for(tool_call_id),
        window_id=window_id,
        first_index=ordered[0].index,
        last_index=ordered[-1].index,
        message_ids=tuple(m.id for m in ordered),
        summary=summary,
        created_at_index=created_at_index,
    )


def _group_containing(groups: Sequence[Group], index: int) -> Group | None:
    for group in groups:
        if group.first_index <= index <= group.last_index:
            return group
    return None


def _range(group: Group) -> str:
    if group.first_index == group.last_index:
        return f"#{group.first_index}"
    return f"#{group.first_index}-#{group.last_index}"


def _check_endpoint(
    *, name: str, index: int, window_id: str, endpoint_windows: Mapping[int, str | None]
) -> None:
    owner = endpoint_windows.get(index)
    if owner is None:
        raise ProtocolError(
            errors.FOLD_INDEX_NOT_FOUND,
            f"{name} {index} is not a message of this session; take indices from "
            "context_history_list.",
            {"argument": name, "index": index},
        )
    if owner != window_id:
        raise ProtocolError(
            errors.FOLD_OTHER_WINDOW,
            f"{name} {index} belongs to window '{owner}', not to the current window "
            f"'{window_id}'; a fold covers messages of the current window only.",
            {"argument": name, "index": index, "messageWindowId": owner, "windowId": window_id},
        )


def validate_fold_range(
    *,
    window_id: str,
    window_messages: Sequence[RawMessage],
    covered_through: int,
    upper_bound: int,
    from_index: int,
    through_index: int,
    endpoint_windows: Mapping[int, str | None],
    existing_folds: Sequence[Fold],
    fold_count: int,
    max_folds: int,
) -> tuple[RawMessage, ...]:
    """Check a requested fold of W's [from_index, through_index]; return the messages to fold.

    `window_messages` are W's messages with covered_through < index <= upper_bound;
    `endpoint_windows` maps from_index and through_index to the window of that
    message in the whole session (None: no such message); `existing_folds` are W's
    uncompressed folds; `fold_count` counts every fold of the session.

    Raises ProtocolError with the first failing rule, in the order of contract §5:
    range, checkpoint, bound, existence, window, group boundaries, group
    foldability, nesting, overlap, limit.
    """
    if from_index > through_index:
        raise ProtocolError(
            errors.FOLD_RANGE_INVALID,
            f"fromIndex {from_index} is greater than throughIndex {through_index}; "
            "give the lower index first.",
            {"fromIndex": from_index, "throughIndex": through_index},
        )
    if from_index <= covered_through:
        raise ProtocolError(
            errors.FOLD_BELOW_CHECKPOINT,
            f"messages up to #{covered_through} are already covered by the window's checkpoint; "
            f"start the fold above index {covered_through}.",
            {"fromIndex": from_index, "coveredThrough": covered_through},
        )
    if through_index > upper_bound:
        raise ProtocolError(
            errors.FOLD_ABOVE_BOUND,
            f"throughIndex {through_index} is above #{upper_bound}, the last message of the view "
            "this call was made from; fold only messages you have seen.",
            {"throughIndex": through_index, "upperBound": upper_bound},
        )
    _check_endpoint(
        name="fromIndex", index=from_index, window_id=window_id, endpoint_windows=endpoint_windows
    )
    _check_endpoint(
        name="throughIndex",
        index=through_index,
        window_id=window_id,
        endpoint_windows=endpoint_windows,
    )

    ordered = sorted(
        (m for m in window_messages if covered_through < m.index <= upper_bound),
        key=lambda m: m.index,
    )
    groups = build_groups(ordered)
    start = _group_containing(groups, from_index)
    end = _group_containing(groups, through_index)
    if start is None or end is None:
        # The caller said the endpoint is W's, yet W's loaded history lacks it: the
        # inputs disagree, which is reported as "not found" rather than guessed at.
        missing = from_index if start is None else through_index
        raise ProtocolError(
            errors.FOLD_INDEX_NOT_FOUND,
            f"index {missing} is not in the current window's uncompressed history.",
            {"index": missing},
        )
    if start.first_index != from_index or end.last_index != through_index:
        hints = []
        if start.first_index != from_index:
            hints.append(
                f"index {from_index} is inside group {_range(start)}: "
                f"fold from index {start.first_index}, where the group starts"
            )
        if end.last_index != through_index:
            hints.append(
                f"index {through_index} is inside group {_range(end)}: "
                f"fold through index {end.last_index}, where the group ends"
            )
        raise ProtocolError(
            errors.FOLD_PARTIAL_GROUP,
            "a fold must start and end on interaction-group boundaries; " + "; ".join(hints) + ".",
            {
                "fromIndex": from_index,
                "throughIndex": through_index,
                "startGroup": [start.first_index, start.last_index],
                "endGroup": [end.first_index, end.last_index],
            },
        )

    inside = [g for g in groups if from_index <= g.first_index and g.last_index <= through_index]
    for reason, code, advice in (
        (
            REASON_CONTAINS_USER_INPUT,
            errors.FOLD_CONTAINS_USER_INPUT,
            "user messages are never folded; fold the stretches before or after them",
        ),
        (
            REASON_UNANSWERED_CALL,
            errors.FOLD_UNANSWERED_CALL,
            "a call still waiting for its result cannot be folded; fold only finished work",
        ),
        (
            REASON_ORPHAN_RESULT,
            errors.FOLD_ORPHAN_RESULT,
            "a tool result without its call is an integrity fault and stays visible; "
            "fold around it",
        ),
    ):
        bad = [g for g in inside if g.reason == reason]
        if bad:
            ranges = ", ".join(_range(g) for g in bad)
            raise ProtocolError(
                code,
                f"the range #{from_index}-#{through_index} contains group(s) {ranges} "
                f"({reason}); {advice}.",
                {
                    "fromIndex": from_index,
                    "throughIndex": through_index,
                    "groups": [[g.first_index, g.last_index] for g in bad],
                    "indices": [i for g in bad for i in g.indices],
                },
            )

    mine = sorted(
        (f for f in existing_folds if f.window_id == window_id), key=lambda f: f.first_index
    )
    for fold in mine:
        contains = from_index <= fold.first_index and fold.last_index <= through_index
        within = fold.first_index <= from_index and through_index <= fold.last_index
        if contains or within:
            how = "contains" if contains else "lies inside"
            raise ProtocolError(
                errors.FOLD_NESTED,
                f"the range #{from_index}-#{through_index} {how} fold {fold.id} "
                f"(#{fold.first_index}-#{fold.last_index}); folds never nest: fold a range "
                "that does not touch an existing fold.",
                {
                    "fromIndex": from_index,
                    "throughIndex": through_index,
                    "foldId": fold.id,
                    "foldRange": [fold.first_index, fold.last_index],
                },
            )
    for fold in mine:
        if from_index <= fold.last_index and fold.first_index <= through_index:
            raise ProtocolError(
                errors.FOLD_OVERLAP,
                f"the range #{from_index}-#{through_index} overlaps fold {fold.id} "
                f"(#{fold.first_index}-#{fold.last_index}); choose a range that ends before "
                f"#{fold.first_index} or starts after #{fold.last_index}.",
                {
                    "fromIndex": from_index,
                    "throughIndex": through_index,
                    "foldId": fold.id,
                    "foldRange": [fold.first_index, fold.last_index],
                },
            )
    if fold_count >= max_folds:
        raise ProtocolError(
            errors.FOLD_LIMIT_REACHED,
            f"this session already has {fold_count} folds, the limit (maxFolds) is {max_folds}; "
            "no more folds can be created.",
            {"foldCount": fold_count, "maxFolds": max_folds},
        )

    return tuple(m for m in ordered if from_index <= m.index <= through_index)
