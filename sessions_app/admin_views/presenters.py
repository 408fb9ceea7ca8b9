"""Rows as the session browser's templates show them: the selectors of `reads` return data,
these add the links, the pretty JSON, the previews and the chart. No query here."""

from __future__ import annotations

from typing import Any

from contextproto.protocol.gateway.wires import wire_for
from contextproto.protocol.messages import RawMessage
from sessions_app import charts
from sessions_app.admin_views.common import RAW_INLINE_LIMIT, content_text, pretty, preview, url
from sessions_app.admin_views.reads import ChartData, FoldEntry
from sessions_app.models import Session


def message_row(message: RawMessage, session: Session) -> dict[str, Any]:
    """A raw message as the message tables render it (preview, raw JSON if small enough)."""
    raw = pretty(message.to_wire())
    text = content_text(message.content)
    return {
        "message": message,
        "run_hex": message.run_id or "",
        "preview": preview(text),
        "raw": raw if len(raw) <= RAW_INLINE_LIMIT else None,
        "raw_size": len(raw),
        "detail_url": url("message", session, message.id),
    }


def message_rows(messages: list[RawMessage], session: Session) -> list[dict[str, Any]]:
    """`message_row` of each message, in order."""
    return [message_row(m, session) for m in messages]


def fold_rows(session: Session, entries: list[FoldEntry]) -> list[dict[str, Any]]:
    """Folds as the fold tables render them, with links to the fold and its raw range."""
    return [
        {
            "record": entry.record,
            "summary": entry.summary,
            "message_ids": entry.message_ids,
            "created_at_index": entry.created_at_index,
            "covered_through": entry.covered_through,
            "compressed": entry.compressed,
            "detail_url": url("fold", session, entry.record.fold_id),
            "range_url": url("messages", session)
            + f"?window={entry.record.window_id}&after={entry.record.first_index - 1}",
        }
        for entry in entries
    ]


def chart(session: Session, data: ChartData) -> dict[str, Any]:
    """The overview's chart: input tokens of the turns by kind, their cost, maintenance commits
    and folds as markers between them. Each point links to its turn's snapshot."""
    turns = data.turns
    markers: list[charts.Marker] = []
    for commit in data.commits:
        if commit.finished_at is not None:
            position = _position([t.created_at >= commit.finished_at for t in turns])
        else:
            bound = commit.through_index or 0
            position = _position([t.upper_bound > bound for t in turns])
        markers.append(
            charts.Marker(
                position,
                charts.MAINTENANCE,
                f"maintenance of {commit.window_id} through #{commit.through_index}",
            )
        )
    for fold in data.folds:
        # The fold_create call and its result come after the fold's last message.
        position = _position([t.upper_bound > fold.last_index + 1 for t in turns])
        markers.append(
            charts.Marker(
                position,
                charts.FOLD,
                f"fold {fold.fold_id} ({fold.window_id} #{fold.first_index}-#{fold.last_index})",
            )
        )
    svg = charts.input_tokens_chart(
        [
            charts.Turn(
                str(i + 1),
                turn.input_tokens,
                href=url("snapshot", session, turn.snapshot_id),
                cache_read_tokens=turn.cache_read_tokens,
                cache_write_tokens=turn.cache_write_tokens,
                cost=float(turn.cost) if turn.cost is not None else None,
            )
            for i, turn in enumerate(turns)
        ],
        markers,
        threshold=data.threshold,
    )
    return {
        "svg": svg,
        "turns": len(turns),
        "markers": markers,
        "threshold": data.threshold,
        "cached": any(t.cache_read_tokens or t.cache_write_tokens for t in turns),
        "priced": any(t.cost is not None for t in turns),
    }


def _position(after: list[bool]) -> float:
    """Half a turn before the first turn the event came before (`after`: one flag per turn,
    whether the turn came after the event), or past the end."""
    for i, hit in enumerate(after):
        if hit:
            return max(i - 0.5, 0)
    return len(after) - 0.5 if len(after) > 1 else 0


def client_api_title(client_api: str) -> str:
    """The client API a gateway run or request came through, as operators read it."""
    try:
        return wire_for(client_api).title
    except (KeyError, ValueError):
        return client_api or "unknown"
