"""unified@4's masking tier (contract §9): which tool results the view shows as one-line stubs.

Pure functions over raw messages; the projection calls `mask_results` with the visible
history of the active window and renders each stub in place of its result.
"""

from __future__ import annotations

from collections.abc import Sequence

from contextproto.protocol import json_texts
from contextproto.protocol.content_parts import is_image_part, part_text
from contextproto.protocol.messages import KIND_TOOL_CALL, KIND_TOOL_RESULT, RawMessage


def _json(value: object) -> str:
    return json_texts.plain(value)


def result_size(content: object) -> tuple[int, int]:
    """(characters, images) of a tool result's content, as masking measures it.

    Characters: a string's length; for a list of parts, the text of each text part plus
    the data (or URL) of each image part, and the JSON of any other part. That is what
    the result would put in the view, images included.
    """
    if isinstance(content, str):
        return len(content), 0
    if not isinstance(content, list):
        return len(_json(content)), 0
    chars = images = 0
    for part in content:
        text = part_text(part)
        if text is not None:
            chars += len(text)
        elif is_image_part(part):
            images += 1
            chars += len(str(part.get("data") or part.get("url") or ""))
        else:
            chars += len(_json(part))
    return chars, images


def masked_stub(index: int, tool_name: str | None, content: object, *, is_error: bool) -> str:
    """The one line that stands for a masked tool result (contract §9)."""
    chars, images = result_size(content)
    size = f"{chars} characters"
    if images:
        size += f" with {images} image{'s' if images > 1 else ''}"
    if is_error:
        size = "an error result, " + size
    name = tool_name or "a tool"
    return (
        f"[tool result #{index} of {name} masked: {size}; read it with "
        f'context_history_read {{"index": {index}}}]'
    )


def mask_results(
    items: Sequence[RawMessage], *, window_id: str, keep_recent: int, step: int, min_chars: int
) -> dict[str, str]:
    """The stubs of the masked tool results of W's visible history, by MessageId.

    `items` are the raw messages of the visible history: above C and outside folds, so
    folded and compressed results are never candidates. Of W's tool results in index
    order, all but the newest `keep_recent` are eligible; the oldest floor(n / step) * step
    of those n are masked, each shown as its stub when longer than `min_chars` characters.
    The boundary thus moves once every `step` results, not on every turn.
    """
    results = sorted(
        (i for i in items if i.kind == KIND_TOOL_RESULT and i.window_id == window_id),
        key=lambda m: m.index,
    )
    eligible = results[: max(len(results) - keep_recent, 0)]
    step = max(step, 1)
    names = {i.tool_call_id: i.tool_name for i in items if i.kind == KIND_TOOL_CALL}
    stubs: dict[str, str] = {}
    for message in eligible[: len(eligible) // step * step]:
        if result_size(message.content)[0] > min_chars:
            name = message.tool_name or names.get(message.tool_call_id)
            stubs[message.id] = masked_stub(
                message.index, name, message.content, is_error=bool(message.is_error)
            )
    return stubs
