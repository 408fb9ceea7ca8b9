"""How a view's history items render as model messages (contract §4.1, §4.4): a raw message
as it was written (its images beyond the newest few omitted, a long tool result previewed as
head and tail), a fold as its note, a masked tool result as its stub; each with its source.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contextproto.protocol.content_parts import has_image, is_image_part, part_text
from contextproto.protocol.history import HistoryItem
from contextproto.protocol.messages import (
    DERIVED_FOLD,
    DERIVED_MASKED,
    DERIVED_RAW,
    KIND_TOOL_CALL,
    KIND_TOOL_RESULT,
    ROLE_ASSISTANT,
    Fold,
    ModelMessage,
    ProjectionSource,
    RawMessage,
)

GUI_IMAGES_KEPT = 3
DEFAULT_TOOL_RESULT_PREVIEW_CHARS = 16000

# A rendered message beside its source.
Rendered = tuple[ModelMessage, ProjectionSource]


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


def render_history(
    items: Sequence[HistoryItem],
    *,
    session_id: str,
    gui: bool,
    preview_chars: int,
    masked: Mapping[str, str] | None = None,
) -> list[Rendered]:
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

    out: list[Rendered] = []
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
