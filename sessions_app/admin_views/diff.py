"""The diff of two consecutive turns of a session: which view messages were added, removed
or changed (and why), how the frozen state moved, and what that did to the token breakdown.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from sessions_app.admin_views.common import content_text, preview
from sessions_app.admin_views.context import (
    FOLD,
    MASKED,
    RAW,
    SEGMENTS,
    ViewIndex,
    derived_badge,
    snapshot_breakdown,
    view_index,
)
from sessions_app.models import ProjectionSnapshot

DIFF_LINES = 200

# ------------------------------------------------------------------ the diff of two turns

SAME, ADDED, REMOVED, CHANGED = "same", "added", "removed", "changed"


def _key(source: dict[str, Any]) -> tuple[str, str]:
    """What makes two view messages "the same message" across turns."""
    derived = str(source.get("derivedType", ""))
    if derived in (RAW, MASKED):
        # A result that becomes masked is the same message, changed: one key for both.
        ids = source.get("messageIds") or [""]
        return RAW, str(ids[0])
    if derived == FOLD:
        return derived, str(source.get("foldId"))
    return derived, ""  # one system, header and state message per view


@dataclass(frozen=True)
class DiffRow:
    op: str
    derived: str
    badge: str
    old_position: int | None = None
    new_position: int | None = None
    role: str = ""
    kind: str = ""
    text: str = ""
    reason: str = ""
    lines: tuple[tuple[str, str], ...] = ()
    tokens_before: int = 0
    tokens_after: int = 0
    count: int = 1  # SAME rows are collapsed: how many unchanged messages this row stands for
    first_index: int | None = None
    last_index: int | None = None


@dataclass(frozen=True)
class SnapshotDiff:
    rows: tuple[DiffRow, ...]
    added: int
    removed: int
    changed: int
    unchanged: int
    facts: tuple[tuple[str, Any, Any], ...]  # (what, before, after) for frozen state that moved
    segments: tuple[tuple[str, str, int, int, int], ...]  # (label, css, before, after, delta)
    total_before: int
    total_after: int

    @property
    def total_delta(self) -> int:
        return self.total_after - self.total_before


def _line_diff(old: str, new: str) -> tuple[tuple[str, str], ...]:
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=1))
    lines = lines[2:]  # the ---/+++ header lines name no files here
    out = []
    for line in lines[:DIFF_LINES]:
        op = line[:1] if line[:1] in "+-@" else " "
        out.append((op, line[1:] if op != "@" else line))
    if len(lines) > DIFF_LINES:
        out.append(("@", f"… {len(lines) - DIFF_LINES} more diff lines"))
    return tuple(out)


def _removed_reason(derived: str, source: dict[str, Any], old: ViewIndex, new: ViewIndex) -> str:
    if old.window_id != new.window_id:
        return f"left the view with window {old.window_id} (the view now shows {new.window_id})"
    if derived in (RAW, MASKED):
        ids = [str(i) for i in source.get("messageIds") or []]
        if ids and ids[0] in new.fold_at:
            return f"folded into {new.fold_ids.get(new.fold_at[ids[0]], 'a fold')}"
        first = source.get("firstIndex")
        if source.get("windowId") != new.window_id:
            return "an input of an earlier run from another window: no longer carried"
        if new.covered is not None and isinstance(first, int) and first <= new.covered:
            return f"compressed: {new.window_id}'s checkpoint now covers #{new.covered}"
        return "compressed into the window's checkpoint"
    if derived == FOLD:
        return "compressed: the window's checkpoint now covers the fold"
    return "no longer in the view"


def _added_reason(derived: str, source: dict[str, Any], old: ViewIndex, new: ViewIndex) -> str:
    first, last = source.get("firstIndex"), source.get("lastIndex")
    if derived == FOLD:
        return f"new fold over #{first}-#{last}: replaces those messages"
    if derived == RAW and isinstance(first, int) and first > old.upper_bound:
        return f"new since the turn before (#{first})"
    if old.window_id != new.window_id:
        return f"in view again: the view now shows window {new.window_id}"
    return "in the view again"


def snapshot_diff(old: ProjectionSnapshot, new: ProjectionSnapshot) -> SnapshotDiff:
    """What changed from one turn's view to the next: messages, frozen state and tokens."""
    old_messages, new_messages = old.messages or [], new.messages or []
    old_sources, new_sources = old.sources or [], new.sources or []

    def source_of(sources: list, position: int) -> dict[str, Any]:
        return sources[position] if position < len(sources) else {}

    old_keys = [_key(source_of(old_sources, i)) for i in range(len(old_messages))]
    new_keys = [_key(source_of(new_sources, i)) for i in range(len(new_messages))]
    before, after = snapshot_breakdown(old), snapshot_breakdown(new)
    old_index, new_index = view_index(old), view_index(new)
    rows: list[DiffRow] = []
    counts = {SAME: 0, ADDED: 0, REMOVED: 0, CHANGED: 0}

    def row(op: str, position: int, *, side: str, **extra: Any) -> DiffRow:
        messages, sources = (
            (old_messages, old_sources)
            if side == "old"
            else (
                new_messages,
                new_sources,
            )
        )
        message, source = messages[position], source_of(sources, position)
        derived = str(source.get("derivedType", ""))
        return DiffRow(
            op=op,
            derived=derived,
            badge=derived_badge(derived),
            role=str(message.get("role", "")),
            kind=str(message.get("kind", "")),
            text=preview(content_text(message.get("content")), 300),
            first_index=source.get("firstIndex"),
            last_index=source.get("lastIndex"),
            **extra,
        )

    matcher = difflib.SequenceMatcher(a=old_keys, b=new_keys, autojunk=False)
    for tag, a1, a2, b1, b2 in matcher.get_opcodes():
        if tag == "equal":
            same = 0
            for i, j in zip(range(a1, a2), range(b1, b2), strict=True):
                if old_messages[i] == new_messages[j]:
                    same += 1
                    continue
                if same:
                    rows.append(_same_row(same, i - same, j - same))
                    counts[SAME] += same
                    same = 0
                rows.append(
                    row(
                        CHANGED,
                        j,
                        side="new",
                        old_position=i,
                        new_position=j,
                        lines=_line_diff(
                            content_text(old_messages[i].get("content")),
                            content_text(new_messages[j].get("content")),
                        ),
                        tokens_before=before.per_message[i],
                        tokens_after=after.per_message[j],
                    )
                )
                counts[CHANGED] += 1
            if same:
                rows.append(_same_row(same, a2 - same, b2 - same))
                counts[SAME] += same
            continue
        for i in range(a1, a2):
            source = source_of(old_sources, i)
            derived = str(source.get("derivedType", ""))
            rows.append(
                row(
                    REMOVED,
                    i,
                    side="old",
                    old_position=i,
                    reason=_removed_reason(derived, source, old_index, new_index),
                    tokens_before=before.per_message[i],
                )
            )
            counts[REMOVED] += 1
        for j in range(b1, b2):
            derived = str(source_of(new_sources, j).get("derivedType", ""))
            rows.append(
                row(
                    ADDED,
                    j,
                    side="new",
                    new_position=j,
                    reason=_added_reason(derived, source_of(new_sources, j), old_index, new_index),
                    tokens_after=after.per_message[j],
                )
            )
            counts[ADDED] += 1
    facts = tuple(
        (label, a, b)
        for label, a, b in (
            ("State revision", old.revision, new.revision),
            ("Upper bound", old.upper_bound, new.upper_bound),
            ("Window", old.window_id, new.window_id),
            ("Checkpoint position", old_index.covered, new_index.covered),
            ("Run", old.run_id.hex if old.run_id else None, new.run_id.hex if new.run_id else None),
            ("Protocol", old.protocol, new.protocol),
        )
        if a != b
    )
    # A part present on either side (masked results may come or go between two turns).
    present = {s.key for s in before.segments} | {s.key for s in after.segments}
    segments = tuple(
        (label, css, before.tokens(key), after.tokens(key), after.tokens(key) - before.tokens(key))
        for key, label, css in SEGMENTS
        if key in present
    )
    return SnapshotDiff(
        rows=tuple(rows),
        added=counts[ADDED],
        removed=counts[REMOVED],
        changed=counts[CHANGED],
        unchanged=counts[SAME],
        facts=facts,
        segments=segments,
        total_before=before.total,
        total_after=after.total,
    )


def _same_row(count: int, old_position: int, new_position: int) -> DiffRow:
    return DiffRow(
        op=SAME,
        derived="",
        badge="",
        old_position=old_position,
        new_position=new_position,
        count=count,
    )
