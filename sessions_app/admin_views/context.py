"""The context viewer: one turn's view beside the raw log it came from, the view's token
breakdown, and what changed since the turn before.

Everything here works on a snapshot's stored JSON (messages, sources, request, usage) and on
one page of raw messages, so its cost follows the size of the view, never of the log. Token
counts are estimates (characters / 4 of the JSON, as the scripted model counts), labelled
so in the templates; the provider-reported figure is shown beside them when there is one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from contextproto.protocol.messages import RawMessage
from contextproto.protocol.tokens import json_tokens
from sessions_app.admin_views.common import arguments_block, content_text, preview
from sessions_app.models import ProjectionSnapshot

ESTIMATE_LABEL = "estimate: characters / 4 of the JSON"
SOURCE_LINKS = 20
DIFF_LINES = 200

# ------------------------------------------------------------------ derived types and badges

RAW, FOLD, SYSTEM = "raw", "context_fold", "system"
HEADER, STATE = "context_header", "context_state"
MASKED = "masked"  # unified@4: a tool result shown as a one-line stub


def derived_badge(derived_type: str) -> str:
    """The CSS class of a derived type's badge."""
    return {
        SYSTEM: "badge-system",
        RAW: "badge-raw",
        HEADER: "badge-header",
        FOLD: "badge-fold",
        STATE: "badge-state",
        MASKED: "badge-masked",
    }.get(derived_type, "badge-other")


def message_tokens(message: Any) -> int:
    """Estimated tokens of one view message (its JSON as the neutral wire format holds it)."""
    return json_tokens(message)


# ------------------------------------------------------------------ token breakdown

# (key, label, badge class): the order the breakdown bar and table show them.
SEGMENTS = (
    ("system", "System prompt", "badge-system"),
    ("header", "Header", "badge-header"),
    ("history", "History: raw messages", "badge-raw"),
    ("folds", "History: folds", "badge-fold"),
    ("masked", "History: masked tool results", "badge-masked"),
    ("state", "State message", "badge-state"),
    ("tools", "Tool schemas", "badge-tools"),
)
OPTIONAL_SEGMENTS = frozenset({"masked"})
SEGMENT_OF = {
    SYSTEM: "system",
    HEADER: "header",
    RAW: "history",
    FOLD: "folds",
    MASKED: "masked",
    STATE: "state",
}


@dataclass(frozen=True)
class Segment:
    key: str
    label: str
    css: str
    tokens: int
    messages: int
    share: str  # percent of the breakdown's total, "12.5" (pre-formatted: used in a style)


@dataclass(frozen=True)
class TokenBreakdown:
    """What one view costs, by part. `total` is the sum of the parts (all estimates)."""

    segments: tuple[Segment, ...]
    total: int
    request_tokens: int  # the whole request as sent (provider framing included)
    reported: int | None  # provider-reported input tokens of the turn, if any
    reported_estimated: bool  # the reporter itself estimated (scripted model)
    per_message: tuple[int, ...]

    def tokens(self, key: str) -> int:
        return next((s.tokens for s in self.segments if s.key == key), 0)


def token_breakdown(
    *,
    messages: Sequence[dict[str, Any]],
    sources: Sequence[dict[str, Any]],
    request: Any,
    usage: Any = None,
) -> TokenBreakdown:
    """Split a view's estimated tokens into system, header, history (raw, folds, masked
    results), state and tools."""
    per_message = tuple(message_tokens(m) for m in messages)
    totals = {key: 0 for key, _, _ in SEGMENTS}
    counts = dict.fromkeys(totals, 0)
    for position, tokens in enumerate(per_message):
        source = sources[position] if position < len(sources) else {}
        key = SEGMENT_OF.get(str(source.get("derivedType")), "history")
        totals[key] += tokens
        counts[key] += 1
    tools = request.get("tools") if isinstance(request, dict) else None
    if tools:
        totals["tools"] = json_tokens(tools)
        counts["tools"] = len(tools) if isinstance(tools, list) else 1
    total = sum(totals.values())
    segments = tuple(
        Segment(
            key=key,
            label=label,
            css=css,
            tokens=totals[key],
            messages=counts[key],
            share=f"{100 * totals[key] / total:.1f}" if total else "0.0",
        )
        for key, label, css in SEGMENTS
        # Masked results exist in unified@4 views only; other views keep their six parts.
        if key not in OPTIONAL_SEGMENTS or counts[key]
    )
    reported = usage.get("inputTokens") if isinstance(usage, dict) else None
    return TokenBreakdown(
        segments=segments,
        total=total,
        request_tokens=json_tokens(request),
        reported=reported if isinstance(reported, int) else None,
        reported_estimated=bool(isinstance(usage, dict) and usage.get("estimated")),
        per_message=per_message,
    )


def snapshot_breakdown(snapshot: ProjectionSnapshot) -> TokenBreakdown:
    return token_breakdown(
        messages=snapshot.messages or [],
        sources=snapshot.sources or [],
        request=snapshot.request,
        usage=snapshot.usage,
    )


# ------------------------------------------------------------------ where each raw message went

SHOWN, FOLDED, COMPRESSED, HIDDEN = "shown", "folded", "compressed", "hidden"
STATUS_HELP = {
    SHOWN: "in the view as itself",
    MASKED: "in the view as a one-line stub; the model reads it back with context_history_read",
    FOLDED: "in the view only through a fold's summary",
    COMPRESSED: "covered by the window's checkpoint (the header carries it)",
    HIDDEN: "another window's history: not in this view",
}
STATUS_BADGE = {
    SHOWN: "badge-raw",
    MASKED: "badge-masked",
    FOLDED: "badge-fold",
    COMPRESSED: "badge-header",
    HIDDEN: "badge-hidden",
}


def _state_fields(messages: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The JSON of the view's context_state message ({} without one or if unreadable)."""
    for message in messages:
        if message.get("kind") == STATE:
            _, _, body = str(message.get("content", "")).partition("\n")
            try:
                value = json.loads(body)
            except ValueError:
                return {}
            return value if isinstance(value, dict) else {}
    return {}


@dataclass
class ViewIndex:
    """Where each raw message of a turn went: its position in the view, or why it is absent.

    Every message of the view's window W above the checkpoint (C < index <= U) is in the
    view, as itself or inside a fold (contract §4.1), so a W message that is in neither was
    covered by the checkpoint; any other absent message is another window's history.
    """

    window_id: str
    upper_bound: int
    covered: int | None  # coveredThrough/W at this turn, when the view states it (v2, v3)
    raw_at: dict[str, int] = field(default_factory=dict)
    masked_at: dict[str, int] = field(default_factory=dict)
    fold_at: dict[str, int] = field(default_factory=dict)
    fold_ids: dict[int, str] = field(default_factory=dict)
    window_of: dict[str, str] = field(default_factory=dict)  # MessageId -> its source's window
    header_at: int | None = None
    state_at: int | None = None

    def place(self, message: RawMessage) -> tuple[str, int | None]:
        """(status, position in the view that stands for it, if any)."""
        if message.id in self.raw_at:
            return SHOWN, self.raw_at[message.id]
        if message.id in self.masked_at:
            return MASKED, self.masked_at[message.id]
        if message.id in self.fold_at:
            return FOLDED, self.fold_at[message.id]
        if message.window_id == self.window_id:
            return COMPRESSED, self.header_at
        return HIDDEN, None


def view_index(snapshot: ProjectionSnapshot) -> ViewIndex:
    """Index a snapshot's sources by original MessageId."""
    index = ViewIndex(
        window_id=snapshot.window_id,
        upper_bound=snapshot.upper_bound,
        covered=_int_or_none(_state_fields(snapshot.messages or []).get("checkpointPosition")),
    )
    for position, source in enumerate(snapshot.sources or []):
        derived = source.get("derivedType")
        ids = [str(i) for i in source.get("messageIds") or []]
        if derived in (RAW, MASKED, FOLD):
            index.window_of.update(dict.fromkeys(ids, str(source.get("windowId") or "")))
        if derived == RAW:
            index.raw_at.update(dict.fromkeys(ids, position))
        elif derived == MASKED:
            index.masked_at.update(dict.fromkeys(ids, position))
        elif derived == FOLD:
            index.fold_at.update(dict.fromkeys(ids, position))
            index.fold_ids[position] = str(source.get("foldId") or "")
        elif derived == HEADER:
            index.header_at = position
        elif derived == STATE:
            index.state_at = position
    return index


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class ViewRange:
    """The raw messages one view was built from: #first through the turn's bound, all windows.

    `counts` says where every message of the range went (status -> messages), whatever page
    of it the raw pane shows.
    """

    first: int
    last: int
    counts: dict[str, int]


def view_range_start(snapshot: ProjectionSnapshot, window_first: int | None) -> int:
    """The range's first index: the earliest message a source names, or W's first message
    (the checkpoint covers W from its start)."""
    starts = [
        int(source["firstIndex"])
        for source in snapshot.sources or []
        if isinstance(source.get("firstIndex"), int)
    ]
    if window_first is not None and window_first <= snapshot.upper_bound:
        starts.append(window_first)
    return min(starts) if starts else max(snapshot.upper_bound, 1)


def view_range(index: ViewIndex, *, first: int, window_count: int) -> ViewRange:
    """Count each status over #first..bound; `window_count` is W's messages in that range.

    Shown, masked and folded come from the view's sources; W's other messages are the ones
    the checkpoint covers; everything else in the range is another window's history.
    """
    last = index.upper_bound
    in_window = sum(
        1
        for position_of in (index.raw_at, index.masked_at, index.fold_at)
        for message_id in position_of
        if index.window_of.get(message_id) == index.window_id
    )
    counts = {
        SHOWN: len(index.raw_at),
        MASKED: len(index.masked_at),
        FOLDED: len(index.fold_at),
        COMPRESSED: max(window_count - in_window, 0),
    }
    size = max(last - first + 1, 0)
    counts[HIDDEN] = max(size - sum(counts.values()), 0)
    return ViewRange(first=first, last=last, counts=counts)


def raw_rows(
    messages: Sequence[RawMessage],
    index: ViewIndex,
    *,
    detail_url: Callable[[RawMessage], str],
) -> list[dict[str, Any]]:
    """The raw pane: each message with its status in the view and the position standing for it."""
    rows = []
    for message in messages:
        status, position = index.place(message)
        # Plain "shown" needs no words; hidden rows say it in the badge's title only.
        note = "" if status == SHOWN else STATUS_HELP[status]
        if status == SHOWN and message.window_id != index.window_id:
            note = f"an input of this run, carried from window {message.window_id}"
        elif status == FOLDED and position is not None:
            note = f"folded into {index.fold_ids.get(position, 'a fold')}"
        elif status == COMPRESSED and index.covered is not None:
            note = f"covered by {index.window_id}'s checkpoint (through #{index.covered})"
        rows.append(
            {
                "message": message,
                "status": status,
                "badge": STATUS_BADGE[status],
                "position": position,
                "note": note,
                "preview": preview(content_text(message.content), 240),
                "arguments": arguments_block(message.arguments),
                "detail_url": detail_url(message),
            }
        )
    return rows


def view_rows(
    snapshot: ProjectionSnapshot,
    breakdown: TokenBreakdown,
    *,
    message_url: Callable[[str], str],
    fold_url: Callable[[str], str],
    locate: Callable[[int], str],
) -> list[dict[str, Any]]:
    """The model's view: each message, its estimated tokens and links to its sources.

    `locate(index)` is the context viewer's own URL with the raw pane at that index, so a
    derived message leads to the raw messages it stands for beside it.
    """
    rows = []
    sources = snapshot.sources or []
    for position, message in enumerate(snapshot.messages or []):
        source = sources[position] if position < len(sources) else {}
        ids = [str(i) for i in source.get("messageIds") or []]
        fold_id = source.get("foldId")
        first = source.get("firstIndex")
        derived = str(source.get("derivedType", ""))
        rows.append(
            {
                "position": position,
                "message": message,
                "text": content_text(message.get("content")),
                "arguments": arguments_block(message.get("arguments")),
                "source": source,
                "derived": derived,
                "badge": derived_badge(derived),
                "tokens": breakdown.per_message[position]
                if position < len(breakdown.per_message)
                else 0,
                "links": [(i, message_url(i)) for i in ids[:SOURCE_LINKS]],
                "more_links": max(len(ids) - SOURCE_LINKS, 0),
                "fold_url": fold_url(fold_id) if fold_id else None,
                "locate_url": locate(int(first)) if isinstance(first, int) else None,
            }
        )
    return rows
