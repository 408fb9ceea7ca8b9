"""Prefix compression planning (contract §6): choose the range a checkpoint covers, hash it, page
it.

Pure functions over what the maintenance service loaded: window W's raw messages above
its `coveredThrough` C (up to the frozen upper bound, index order) and W's folds. The
service freezes the plan, serves its pages, asks the maintainer model for a checkpoint
(checkpoints.py: the hash, the pages, the prompts, the check of the answer) and commits
`checkpoint/W` and `coveredThrough/W = B` guarded by the frozen revision and the source hash.

Boundary rules for the new coveredThrough B (C < B):

* B is the last index of a complete interaction group (contract §2.7), never inside one, so a
  tool call and its result are compressed together or not at all;
* B never cuts a fold of W above C: each is entirely <= B (it becomes compressed) or
  entirely > B;
* B stays below the first unanswered (open) call. Everything written after an open call
  belongs to its group, so B can never pass it. A call that is never answered would
  therefore stop compression forever at that point (the Google ADK failure): the plan
  does not hide that. Whenever the open call is what stops B (B is the highest boundary
  below it, or there is none), it is reported in `blocked_by` as
  `{"kind": "unanswered_call", "toolCallId", "index"}`; finished history below it is
  still compressed. Writing a result for the call (an error result if it will never
  finish) unblocks it;
* an orphan tool result (a result without a pending call) is an integrity fault, but a
  finished one: it can never pair any more, so it is allowed inside the compressed range
  instead of blocking compression. Each one inside (C, B] is reported in `blocked_by` as
  `{"kind": "orphan_result", "index", "toolCallId"}` so operators see it;
* user messages (inputs, approvals, runtime instructions) are compressible, unlike folds:
  the checkpoint summarises them, and the current run's inputs stay visible through input
  protection in the projection;
* a recent tail stays uncompressed: B is the highest boundary with at least
  `keep_tail_tokens` estimated tokens of W above it. When none qualifies there is nothing
  to compress. An explicit `requested_through` (an external maintainer's `throughIndex`)
  is checked against every rule except the tail rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from contextproto.protocol import errors
from contextproto.protocol.checkpoints import pages_of, source_hash
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.groups import GROUP_ORPHAN_RESULT, Group, build_groups
from contextproto.protocol.messages import (
    KIND_TOOL_CALL,
    KIND_TOOL_RESULT,
    Fold,
    RawMessage,
)
from contextproto.protocol.tokens import message_tokens

BlockedKind = Literal["unanswered_call", "orphan_result"]
BLOCKED_UNANSWERED_CALL: BlockedKind = "unanswered_call"
BLOCKED_ORPHAN_RESULT: BlockedKind = "orphan_result"


class BlockedEntry(TypedDict):
    """A message that keeps compression from going further (the plan's `blockedBy`)."""

    kind: BlockedKind
    toolCallId: str | None
    index: int


class MaintenancePlanWire(TypedDict):
    """The plan fields of the external maintainer's plan response (contract §12.1)."""

    frozenRevision: int
    windowId: str
    fromIndex: int
    coveredThrough: int
    throughIndex: int
    sourceHash: str
    pageCount: int
    messageCount: int
    previousCheckpoint: str
    blockedBy: list[BlockedEntry]
    tailTokensKept: int


# Why there is nothing to compress (details["reason"] of maintenance_nothing_to_compress).
NOTHING_NO_MESSAGES = "no_messages"
NOTHING_UNANSWERED_CALL = "unanswered_call"
NOTHING_NO_BOUNDARY = "no_valid_boundary"
NOTHING_WITHIN_TAIL = "within_tail_budget"

# Why an explicit throughIndex is refused (details["reason"] of maintenance_boundary_invalid).
INVALID_NOT_ABOVE_CHECKPOINT = "not_above_checkpoint"
INVALID_UNANSWERED_CALL = "unanswered_call"
INVALID_NOT_IN_WINDOW = "not_in_window"
INVALID_INSIDE_GROUP = "inside_group"
INVALID_CUTS_FOLD = "cuts_fold"


@dataclass(frozen=True)
class MaintenancePlan:
    """A frozen compression job: W's range (covered_through, through_index] and its source."""

    window_id: str
    frozen_revision: int
    from_index: int
    covered_through: int
    through_index: int
    message_ids: tuple[str, ...]
    source_hash: str
    page_count: int
    previous_checkpoint: str
    blocked_by: tuple[BlockedEntry, ...]
    tail_tokens_kept: int

    def to_wire(self) -> MaintenancePlanWire:
        """Render the plan fields of the external maintainer's plan response (contract §12.1)."""
        return {
            "frozenRevision": self.frozen_revision,
            "windowId": self.window_id,
            "fromIndex": self.from_index,
            "coveredThrough": self.covered_through,
            "throughIndex": self.through_index,
            "sourceHash": self.source_hash,
            "pageCount": self.page_count,
            "messageCount": len(self.message_ids),
            "previousCheckpoint": self.previous_checkpoint,
            "blockedBy": [entry.copy() for entry in self.blocked_by],
            "tailTokensKept": self.tail_tokens_kept,
        }


# ---------------------------------------------------------------------------- boundary


@dataclass(frozen=True)
class _Analysis:
    messages: tuple[RawMessage, ...]
    groups: tuple[Group, ...]
    group_ends: frozenset[int]
    candidates: tuple[int, ...]  # ascending: complete-group ends below any open call, no fold cut
    cut_folds: dict[int, str]  # complete-group end -> id of a fold it would cut
    open_group: Group | None
    unanswered: tuple[BlockedEntry, ...]
    orphans: tuple[BlockedEntry, ...]
    tokens_above: dict[int, int]  # complete-group end -> estimated tokens of W above it
    total_tokens: int


def _pairing_faults(groups: Sequence[Group]) -> tuple[list[BlockedEntry], list[BlockedEntry]]:
    """Return (unanswered calls of the open group, orphan results), each in index order."""
    unanswered: list[BlockedEntry] = []
    orphans: list[BlockedEntry] = []
    for group in groups:
        if group.kind == GROUP_ORPHAN_RESULT:
            message = group.messages[0]
            orphans.append(_orphan_entry(message))
            continue
        pending: dict[str, RawMessage] = {}
        for message in group.messages:
            if message.kind == KIND_TOOL_CALL:
                pending[message.tool_call_id or ""] = message
            elif message.kind == KIND_TOOL_RESULT:
                if (message.tool_call_id or "") in pending:
                    del pending[message.tool_call_id or ""]
                else:
                    orphans.append(_orphan_entry(message))
        if group.open:
            unanswered.extend(
                {
                    "kind": BLOCKED_UNANSWERED_CALL,
                    "toolCallId": call.tool_call_id,
                    "index": call.index,
                }
                for call in sorted(pending.values(), key=lambda m: m.index)
            )
    return unanswered, orphans


def _orphan_entry(message: RawMessage) -> BlockedEntry:
    return {
        "kind": BLOCKED_ORPHAN_RESULT,
        "index": message.index,
        "toolCallId": message.tool_call_id,
    }


def _analyse(
    window_messages: Sequence[RawMessage], covered_through: int, folds: Sequence[Fold]
) -> _Analysis:
    messages = tuple(
        sorted((m for m in window_messages if m.index > covered_through), key=lambda m: m.index)
    )
    groups = tuple(build_groups(messages))
    open_group = next((g for g in groups if g.open), None)
    unanswered, orphans = _pairing_faults(groups)

    # A boundary B cuts a fold when some fold has first_index <= B < last_index, that is
    # when the largest last_index among folds starting at or below B exceeds B.
    spans = sorted(
        (f.first_index, f.last_index, f.id) for f in folds if f.first_index > covered_through
    )
    span_at = 0
    reach, reach_fold = covered_through, ""
    candidates: list[int] = []
    cut_folds: dict[int, str] = {}
    tokens_above: dict[int, int] = {}
    total = sum(message_tokens(m) for m in messages)
    below = 0
    for group in groups:
        below += sum(message_tokens(m) for m in group.messages)
        if group.open:
            break
        end = group.last_index
        tokens_above[end] = total - below
        while span_at < len(spans) and spans[span_at][0] <= end:
            if spans[span_at][1] > reach:
                reach, reach_fold = spans[span_at][1], spans[span_at][2]
            span_at += 1
        if reach > end:
            cut_folds[end] = reach_fold
        else:
            candidates.append(end)
    return _Analysis(
        messages=messages,
        groups=groups,
        group_ends=frozenset(g.last_index for g in groups if not g.open),
        candidates=tuple(candidates),
        cut_folds=cut_folds,
        open_group=open_group,
        unanswered=tuple(unanswered),
        orphans=tuple(orphans),
        tokens_above=tokens_above,
        total_tokens=total,
    )


def _blocked_by(analysis: _Analysis, boundary: int | None) -> tuple[BlockedEntry, ...]:
    cap = analysis.candidates[-1] if analysis.candidates else None
    entries = [
        e.copy() for e in analysis.orphans if boundary is not None and e["index"] <= boundary
    ]
    if analysis.open_group is not None and (cap is None or boundary == cap):
        # The open call is what stops compression here: surface it, never fail silently.
        entries.extend(e.copy() for e in analysis.unanswered)
    return tuple(entries)


def _nearest_at_or_below(analysis: _Analysis, index: int) -> int | None:
    below = [b for b in analysis.candidates if b <= index]
    return below[-1] if below else None


def _check_requested(analysis: _Analysis, covered_through: int, requested: int) -> None:
    is_index = isinstance(requested, int) and not isinstance(requested, bool)

    def refuse(reason: str, message: str, **extra: Any) -> ProtocolError:
        return ProtocolError(
            errors.MAINTENANCE_BOUNDARY_INVALID,
            message,
            {
                "reason": reason,
                "throughIndex": requested,
                "coveredThrough": covered_through,
                "nearestValidBoundary": (
                    _nearest_at_or_below(analysis, requested) if is_index else None
                ),
                **extra,
            },
        )

    if not is_index:
        raise refuse(INVALID_NOT_IN_WINDOW, "throughIndex must be an integer message index.")
    if requested <= covered_through:
        raise refuse(
            INVALID_NOT_ABOVE_CHECKPOINT,
            f"throughIndex {requested} is not above #{covered_through}, the window's current "
            "coveredThrough; coverage never moves back.",
        )
    open_group = analysis.open_group
    if open_group is not None and requested >= open_group.first_index:
        first_call = analysis.unanswered[0] if analysis.unanswered else None
        raise refuse(
            INVALID_UNANSWERED_CALL,
            f"throughIndex {requested} is at or after the unanswered call at "
            f"#{open_group.first_index}; compression must stay below an unanswered call.",
            toolCallId=first_call["toolCallId"] if first_call is not None else None,
            callIndex=open_group.first_index,
        )
    if requested not in {m.index for m in analysis.messages}:
        raise refuse(
            INVALID_NOT_IN_WINDOW,
            f"throughIndex {requested} is not a message of this window within the planned "
            "range; take indices from the window's raw log.",
        )
    if requested not in analysis.group_ends:
        group = next(g for g in analysis.groups if g.first_index <= requested <= g.last_index)
        raise refuse(
            INVALID_INSIDE_GROUP,
            f"throughIndex {requested} is inside the interaction group "
            f"#{group.first_index}-#{group.last_index}; end on the last message of a group.",
            groupFirstIndex=group.first_index,
            groupLastIndex=group.last_index,
        )
    if requested in analysis.cut_folds:
        raise refuse(
            INVALID_CUTS_FOLD,
            f"throughIndex {requested} cuts fold {analysis.cut_folds[requested]}; a fold is "
            "compressed whole or not at all.",
            foldId=analysis.cut_folds[requested],
        )


def _choose(
    analysis: _Analysis, covered_through: int, keep_tail_tokens: int, requested: int | None
) -> tuple[int | None, str | None]:
    """Return (B, None) or (None, why nothing can be compressed)."""
    if requested is not None:
        _check_requested(analysis, covered_through, requested)
        return requested, None
    if not analysis.messages:
        return None, NOTHING_NO_MESSAGES
    if not analysis.candidates:
        if analysis.open_group is not None and analysis.open_group is analysis.groups[0]:
            return None, NOTHING_UNANSWERED_CALL
        return None, NOTHING_NO_BOUNDARY
    keep = max(0, keep_tail_tokens)
    for boundary in reversed(analysis.candidates):
        if analysis.tokens_above[boundary] >= keep:
            return boundary, None
    return None, NOTHING_WITHIN_TAIL


def choose_boundary(
    *,
    window_messages: Sequence[RawMessage],
    covered_through: int,
    folds: Sequence[Fold],
    keep_tail_tokens: int,
    requested_through: int | None = None,
) -> tuple[int | None, tuple[BlockedEntry, ...]]:
    """Choose the new coveredThrough B of W; return (B or None, blocked_by).

    `window_messages` are W's messages above `covered_through` (index order), `folds` W's
    folds. Raises ProtocolError(maintenance_boundary_invalid) when `requested_through` is
    given and breaks a rule; details carry the reason and `nearestValidBoundary`.
    """
    analysis = _analyse(window_messages, covered_through, folds)
    boundary, _ = _choose(analysis, covered_through, keep_tail_tokens, requested_through)
    return boundary, _blocked_by(analysis, boundary)


def _nothing_message(
    reason: str, *, window_id: str, covered_through: int, analysis: _Analysis, keep_tail_tokens: int
) -> str:
    if reason == NOTHING_NO_MESSAGES:
        return (
            f"window '{window_id}' has no messages above #{covered_through}; nothing to compress."
        )
    if reason == NOTHING_UNANSWERED_CALL:
        call = analysis.unanswered[0] if analysis.unanswered else None
        return (
            f"nothing to compress: the unanswered call {call and call['toolCallId']} at "
            f"#{call and call['index']} is the first interaction above #{covered_through} and "
            "compression cannot pass it; write its tool result (an error result if it will "
            "never finish) to unblock compression."
        )
    if reason == NOTHING_WITHIN_TAIL:
        return (
            f"nothing to compress: history is within the tail budget ({analysis.total_tokens} "
            f"estimated tokens above #{covered_through}, the tail keeps {keep_tail_tokens})."
        )
    return (
        f"nothing to compress: no interaction group of window '{window_id}' above "
        f"#{covered_through} ends where every fold stays whole."
    )


def plan_maintenance(
    *,
    window_id: str,
    frozen_revision: int,
    window_messages: Sequence[RawMessage],
    covered_through: int,
    previous_checkpoint: str,
    folds: Sequence[Fold],
    page_size: int,
    keep_tail_tokens: int,
    requested_through: int | None = None,
) -> MaintenancePlan:
    """Freeze the compression job of W at `frozen_revision`.

    Raises ProtocolError(maintenance_nothing_to_compress) with details `reason` and
    `blockedBy` when no boundary qualifies, and ProtocolError(maintenance_boundary_invalid)
    when `requested_through` breaks a boundary rule. Folds of other windows are ignored.
    """
    if page_size < 1:
        raise ValueError("page_size must be at least 1")
    own_folds = [f for f in folds if f.window_id == window_id]
    analysis = _analyse(window_messages, covered_through, own_folds)
    boundary, reason = _choose(analysis, covered_through, keep_tail_tokens, requested_through)
    blocked_by = _blocked_by(analysis, boundary)
    if boundary is None:
        reason = reason or NOTHING_NO_BOUNDARY
        raise ProtocolError(
            errors.MAINTENANCE_NOTHING_TO_COMPRESS,
            _nothing_message(
                reason,
                window_id=window_id,
                covered_through=covered_through,
                analysis=analysis,
                keep_tail_tokens=keep_tail_tokens,
            ),
            {
                "reason": reason,
                "blockedBy": [dict(e) for e in blocked_by],
                "windowId": window_id,
                "coveredThrough": covered_through,
                "estimatedTokensAboveCheckpoint": analysis.total_tokens,
                "keepTailTokens": keep_tail_tokens,
            },
        )
    in_range = [m for m in analysis.messages if m.index <= boundary]
    return MaintenancePlan(
        window_id=window_id,
        frozen_revision=frozen_revision,
        from_index=covered_through + 1,
        covered_through=covered_through,
        through_index=boundary,
        message_ids=tuple(m.id for m in in_range),
        source_hash=source_hash(previous_checkpoint, in_range),
        page_count=pages_of(len(in_range), page_size),
        previous_checkpoint=previous_checkpoint,
        blocked_by=blocked_by,
        tail_tokens_kept=analysis.tokens_above[boundary],
    )
