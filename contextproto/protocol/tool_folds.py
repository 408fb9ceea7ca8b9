"""History and fold tools: history list and read, fold create, list and read (contract §5, §9).

Coverage (`coveredThrough/<id>`) is always read from the current committed
state: a checkpoint committed after the call's view only hides more history,
and a fold below it would be refused anyway.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence

from contextproto.protocol import errors
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.folds import make_fold, validate_fold_range
from contextproto.protocol.foldtext import (
    FOLD_READ_SLICE_UNITS,
    CursorError,
    Utf16Slice,
    read_slice,
    render_fold_text,
    render_message_text,
)
from contextproto.protocol.groups import Group, build_groups
from contextproto.protocol.messages import KIND_TOOL_CALL, KIND_TOOL_RESULT, Fold, RawMessage
from contextproto.protocol.state import MAIN_WINDOW, covered_key, fold_key, window_key
from contextproto.protocol.tool_base import (
    PREVIEW_CHARS,
    Invocation,
    Refusal,
    ToolOutcome,
    preview,
    success,
    text_of,
    window_not_found,
)
from contextproto.protocol.tool_results import (
    FoldCreateResult,
    FoldEntry,
    FoldListResult,
    FoldReadResult,
    HistoryGroup,
    HistoryListResult,
    HistoryReadResult,
)

REASON_ALREADY_FOLDED = "already_folded"


def _covered(inv: Invocation, window_id: str) -> int:
    value = inv.reader.kv_get_many([covered_key(window_id)]).get(covered_key(window_id))
    return int(value or 0)


def _message_preview(message: RawMessage) -> str:
    if message.kind == KIND_TOOL_CALL:
        # Text that is no JSON object is shown as the model wrote it.
        arguments = (
            message.arguments
            if isinstance(message.arguments, str)
            else json.dumps(
                message.arguments, ensure_ascii=False, separators=(",", ":"), sort_keys=True
            )
        )
        return f"{message.tool_name}({arguments})"
    if message.kind == KIND_TOOL_RESULT:
        marker = "→ error:" if message.is_error else "→"
        return f"{marker} {text_of(message.content)}"
    return text_of(message.content)


def _group_preview(group: Group) -> str:
    # Stop once the preview is full, so a group with many messages stays cheap to list.
    parts: list[str] = []
    length = 0
    for message in group.messages:
        # Cut before flattening: a huge tool result costs no more than a short one.
        part = " ".join(_message_preview(message)[: 4 * PREVIEW_CHARS].split())
        parts.append(part)
        length += len(part) + 1
        if length > PREVIEW_CHARS:
            break
    return preview(" ".join(parts))


def _fold_holding(folds: Sequence[Fold], starts: Sequence[int], group: Group) -> Fold | None:
    at = bisect.bisect_right(starts, group.first_index) - 1
    if at >= 0 and folds[at].last_index >= group.last_index:
        return folds[at]
    return None


def history_list(inv: Invocation) -> ToolOutcome:
    """List the interaction groups of a window's uncompressed history, one page at a time.

    The window is the CALL's window (the one its tool_call message was written
    in) and the bound is the call's frozen upper bound, not the activeWindow now:
    the model asks about the history of the view it was shown, and indices it
    gets here must be valid for a context_fold_create made from that same view.
    Read-only, so no revision check applies.
    """
    window_id, bound = inv.call.call_window_id, inv.call.frame.upper_bound
    covered = _covered(inv, window_id)
    after, limit = inv.args["afterIndex"], inv.args["limit"]
    # Groups must be built from C on: a page starting mid-group would turn the
    # results of earlier calls into false orphans. C..U is the window's live
    # history, which compression keeps within the model's budget.
    groups = build_groups(inv.reader.window_messages(window_id, covered, bound))
    folds = inv.reader.folds_in_range(window_id, covered + 1, bound) if bound > covered else []
    folds = sorted(folds, key=lambda f: f.first_index)
    starts = [f.first_index for f in folds]

    remaining = [g for g in groups if g.first_index > after]
    page = remaining[:limit]
    listed: list[HistoryGroup] = []
    for group in page:
        fold = _fold_holding(folds, starts, group)
        listed.append(
            {
                "firstIndex": group.first_index,
                "lastIndex": group.last_index,
                "indices": list(group.indices),
                "kind": group.kind,
                "preview": _group_preview(group),
                "foldable": group.foldable and fold is None,
                "reason": REASON_ALREADY_FOLDED if fold is not None else group.reason,
                "foldId": fold.id if fold is not None else None,
            }
        )
    more = len(remaining) > len(page)
    return success(
        HistoryListResult(
            success=True,
            windowId=window_id,
            coveredThrough=covered,
            upperBound=bound,
            groups=listed,
            nextAfterIndex=page[-1].last_index if more and page else None,
        )
    )


def fold_create(inv: Invocation) -> ToolOutcome:
    """Fold whole foldable groups of the active window into the agent's summary.

    The fold id derives from the toolCallId, so a replayed call names the same
    fold; `createdAtIndex` is the call's index. The summary is stored as given.
    """
    window_id, bound = inv.active_window(), inv.call.frame.upper_bound
    covered = _covered(inv, window_id)
    first, last = inv.args["fromIndex"], inv.args["throughIndex"]
    low, high = min(first, last), max(first, last)
    messages = validate_fold_range(
        window_id=window_id,
        window_messages=inv.reader.window_outline(window_id, covered, bound),
        covered_through=covered,
        upper_bound=bound,
        from_index=first,
        through_index=last,
        endpoint_windows=inv.reader.message_windows([first, last]),
        existing_folds=inv.reader.folds_intersecting(window_id, low, high),
        fold_count=inv.reader.fold_count(),
        max_folds=inv.option("maxFolds"),
    )
    fold = make_fold(
        tool_call_id=inv.call.tool_call_id,
        window_id=window_id,
        messages=messages,
        summary=inv.args["summary"],
        created_at_index=inv.call.call_index,
    )
    return success(
        FoldCreateResult(
            success=True,
            foldId=fold.id,
            windowId=window_id,
            firstIndex=fold.first_index,
            lastIndex=fold.last_index,
            messageCount=len(fold.message_ids),
        ),
        kv_writes={fold_key(fold.id): fold.to_kv()},
    )


def _fold_entry(fold: Fold, covered: int) -> FoldEntry:
    return {
        "foldId": fold.id,
        "windowId": fold.window_id,
        "firstIndex": fold.first_index,
        "lastIndex": fold.last_index,
        "summary": fold.summary,
        "compressed": fold.last_index <= covered,
    }


def fold_list(inv: Invocation) -> ToolOutcome:
    """List a page of one window's folds, compressed ones flagged; no switch.

    `windowId` defaults to the CALL's window, like context_history_list.
    """
    window_id = inv.args.get("windowId") or inv.call.call_window_id
    kv = inv.reader.kv_get_many([window_key(window_id), covered_key(window_id)])
    if window_key(window_id) not in kv and window_id != MAIN_WINDOW:
        raise window_not_found(window_id)
    covered = int(kv.get(covered_key(window_id)) or 0)
    offset, limit = inv.args["offset"], inv.args["limit"]
    # One row more than asked tells whether another page exists without a count query.
    folds = inv.reader.folds_of_window(window_id, offset, limit + 1)
    return success(
        FoldListResult(
            success=True,
            windowId=window_id,
            folds=[_fold_entry(f, covered) for f in folds[:limit]],
            nextOffset=offset + limit if len(folds) > limit else None,
        )
    )


def fold_read(inv: Invocation) -> ToolOutcome:
    """Serve one slice of a fold's raw messages as JSON text; any window, compressed or not.

    Never switches window and writes nothing. Cursors count UTF-16 code units.
    """
    fold_id = inv.args["foldId"]
    fold = inv.reader.fold(fold_id)
    if fold is None:
        raise Refusal(
            errors.FOLD_NOT_FOUND,
            f"There is no fold '{fold_id}' in this session; take fold ids from the fold "
            "messages of your view or from context_fold_list.",
            {"foldId": fold_id, "argument": "foldId"},
        )
    messages = inv.reader.messages_by_ids(list(fold.message_ids))
    if len(messages) != len(fold.message_ids):
        found = {m.id for m in messages}
        raise Refusal(
            errors.FOLD_MESSAGES_MISSING,
            f"Fold '{fold_id}' names messages this session cannot load; its raw text cannot "
            "be served. Work from the fold's summary; the operator has to look at the log.",
            {"foldId": fold_id, "missing": [i for i in fold.message_ids if i not in found]},
        )
    piece = _page(inv, render_fold_text(messages))
    return success(
        FoldReadResult(
            success=True,
            foldId=fold.id,
            windowId=fold.window_id,
            firstIndex=fold.first_index,
            lastIndex=fold.last_index,
            compressed=fold.last_index <= _covered(inv, fold.window_id),
            text=piece.text,
            cursor=piece.cursor,
            nextCursor=piece.next_cursor,
            totalLength=piece.total_length,
        )
    )


def _page(inv: Invocation, text: str) -> Utf16Slice:
    """The slice of `text` at the call's `cursor` (fold read and history read page alike).

    A cursor outside the text, or inside a surrogate pair, fails like a bad argument.
    """
    try:
        return read_slice(text, inv.args["cursor"], FOLD_READ_SLICE_UNITS)
    except CursorError as exc:
        raise ProtocolError(
            errors.INVALID_ARGUMENTS,
            f"{inv.call.tool_name}: argument 'cursor' is invalid: {exc}; pass 0 or the "
            "nextCursor of the previous read.",
            {"argument": "cursor", "tool": inv.call.tool_name},
        ) from exc


def history_read(inv: Invocation) -> ToolOutcome:
    """Serve one slice of the raw message at `index`; any window, archived ones included.

    The bound is the call's frozen upper bound: the model reads what its view could name.
    Never switches window and writes nothing. Cursors count UTF-16 code units, as for
    context_fold_read.
    """
    index, bound = inv.args["index"], inv.call.frame.upper_bound
    if index > bound:
        raise Refusal(
            errors.HISTORY_INDEX_OUT_OF_RANGE,
            f"There is no message #{index} in the view this call was made from: its messages "
            f"are #1 to #{bound}. Take the index from a masked result's stub, a fold or "
            "context_history_list.",
            {"index": index, "upperBound": bound, "argument": "index"},
        )
    message = inv.reader.message_at(index)
    if message is None:
        # Indices are gapless, so every index up to the bound exists: the log is damaged.
        raise Refusal(
            errors.HISTORY_MESSAGE_MISSING,
            f"Message #{index} cannot be loaded from this session's log; go on without it. "
            "The operator has to look at the log.",
            {"index": index},
        )
    piece = _page(inv, render_message_text(message))
    return success(
        HistoryReadResult(
            success=True,
            index=message.index,
            windowId=message.window_id,
            text=piece.text,
            cursor=piece.cursor,
            nextCursor=piece.next_cursor,
            totalLength=piece.total_length,
        )
    )
