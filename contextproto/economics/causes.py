"""Why a cache breaks between two consecutive turns, and what the break re-bills.

`first_divergence` of the two requests gives the first block that differs; the block is
traced back to the projection message it was rendered from (the adapters merge, move and
re-role messages, so the trace renders the same projection once more with every message
tagged), and the message's ProjectionSource, compared across the two turns, gives the cause
(CAUSES). Each pair also counts its re-billed tokens: blocks after the divergence whose
content the previous request already sent (a cache could have served them; this turn pays
them again).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from contextproto.economics.inputs import EconomySettings, ViewTurn, request_body
from contextproto.economics.linearise import (
    SECTION_SYSTEM,
    SECTION_TOOLS,
    Divergence,
    Linearised,
)
from contextproto.protocol.adapters import PROVIDER_ANTHROPIC_MESSAGES
from contextproto.protocol.content_parts import (
    PART_IMAGE,
    PART_REDACTED_THINKING,
    PART_TEXT,
    PART_THINKING,
    part_type,
)
from contextproto.protocol.messages import (
    DERIVED_FOLD,
    DERIVED_HEADER,
    DERIVED_MASKED,
    DERIVED_RAW,
    DERIVED_STATE,
    DERIVED_SYSTEM,
    KIND_INPUT,
    KIND_TOOL_CALL,
    ProjectionSource,
)
from contextproto.protocol.projection import Projection

# Causes of a cache break between two consecutive turns, in the order they are tested.
CAUSE_APPEND = "append only"  # the request extends the previous one: nothing re-billed
CAUSE_TOOLS = "tools"  # the tool list changed: everything re-billed
CAUSE_SYSTEM = "system"  # the system prompt changed
CAUSE_WINDOW_SWITCH = "window switch"  # the active window differs
CAUSE_CHECKPOINT = "checkpoint"  # the active window's coverage moved (a checkpoint committed)
CAUSE_HEADER = "header"  # task memory, the window record or the checkpoint text changed
CAUSE_FOLD = "fold"  # a fold replaced history from its first message
CAUSE_STATE = "state message"  # a state message placed before history changed (unified@3 B)
CAUSE_MASKING = "masking"  # a tool result turned into (or back from) a masked stub
CAUSE_HISTORY = "history"  # another change of shown history (images dropped, inputs dropped)
CAUSES = (
    CAUSE_APPEND,
    CAUSE_TOOLS,
    CAUSE_SYSTEM,
    CAUSE_WINDOW_SWITCH,
    CAUSE_CHECKPOINT,
    CAUSE_HEADER,
    CAUSE_FOLD,
    CAUSE_STATE,
    CAUSE_MASKING,
    CAUSE_HISTORY,
)


# --------------------------------------------------------------------------- tracing blocks

# Private-use characters around a message's position: never in model text, kept as is by
# JSON without ensure_ascii.
_TAG = re.compile("\ue000(\\d+)\ue001")


def _tag(position: int) -> str:
    return f"\ue000{position}\ue001"


def _tagged_content(content: Any, tag: str) -> Any:
    """`content` with every rendered part replaced by `tag`, empty parts kept empty.

    The adapters drop empty text and turn each image into one block: a text part with the
    tag keeps that block count, so the tagged request has the real one's block structure.
    A thinking part keeps its type with the tag as its text (or data): Anthropic sends it as
    one block, OpenAI leaves it out, as for the real part.
    """
    if isinstance(content, str):
        return tag if content else ""
    if isinstance(content, list):
        out: list[Any] = []
        for part in content:
            kind = part_type(part)
            if kind == PART_IMAGE:
                out.append({"type": PART_TEXT, "text": tag})
            elif kind == PART_TEXT:
                out.append({"type": PART_TEXT, "text": tag if part.get("text") else ""})
            elif kind == PART_THINKING:
                out.append({"type": PART_THINKING, "thinking": tag, "signature": ""})
            elif kind == PART_REDACTED_THINKING:
                out.append({"type": PART_REDACTED_THINKING, "data": tag})
            else:
                out.append(part)  # rendered by no adapter; kept so nothing else moves
        return out
    if content is None:
        return None
    return tag if str(content) else ""


def _tagged(projection: Projection) -> Projection:
    messages = []
    for position, message in enumerate(projection.messages):
        tag = _tag(position)
        messages.append(
            replace(
                message,
                content=_tagged_content(message.content, tag),
                # A tool call's own block is its tool_use: its arguments carry the tag too.
                arguments={"tag": tag} if message.kind == KIND_TOOL_CALL else message.arguments,
            )
        )
    return replace(projection, messages=tuple(messages))


def _content_blocks(content: Any) -> list[Any]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])


def _block_values(provider: str, body: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(section, value) of each block in the simulator's prefix order (cache_sim.linearise)."""
    out: list[tuple[str, Any]] = [(SECTION_TOOLS, t) for t in body.get("tools") or []]
    if provider == PROVIDER_ANTHROPIC_MESSAGES:
        system = body.get("system")
        if system is not None:
            out += [(SECTION_SYSTEM, b) for b in _content_blocks(system)]
        for message in body.get("messages") or []:
            out += [("messages", b) for b in _content_blocks(message.get("content"))]
    else:
        out += [("messages", m) for m in body.get("messages") or []]
    return out


def block_owners(provider: str, turn: ViewTurn, settings: EconomySettings) -> list[int | None]:
    """Per request block, the position of the projection message it was rendered from.

    None for tools. Renders the projection once more with each message's content replaced
    by a tag naming its position: same roles, kinds, ids and emptiness, so the adapters
    merge, move and mark exactly as they did for the real request.
    """
    body = request_body(provider, replace(turn, projection=_tagged(turn.projection)), settings)
    owners: list[int | None] = []
    for section, value in _block_values(provider, body):
        if section == SECTION_TOOLS:
            owners.append(None)
            continue
        found = _TAG.search(json.dumps(value, ensure_ascii=False))
        owners.append(int(found.group(1)) if found else None)
    return owners


# --------------------------------------------------------------------------- causes


def _is_history(source: ProjectionSource) -> bool:
    return source.derived_type not in (DERIVED_SYSTEM, DERIVED_HEADER, DERIVED_STATE)


def _trailing(projection: Projection, position: int) -> bool:
    """Whether no history message follows `position` (a trailing derived message)."""
    return not any(_is_history(s) for s in projection.sources[position + 1 :])


def _shown_ids(projection: Projection) -> set[str]:
    """Ids of the active window's non-input raw messages the view shows or folds."""
    inputs = {
        mid
        for message, source in zip(projection.messages, projection.sources, strict=True)
        if message.kind == KIND_INPUT
        for mid in source.message_ids
    }
    return {
        mid
        for source in projection.sources
        if _is_history(source) and source.window_id == projection.window_id
        for mid in source.message_ids
        if mid not in inputs
    }


def classify(
    previous: Projection,
    current: Projection,
    divergence: Divergence,
    previous_owner: int | None,
    current_owner: int | None,
) -> str:
    """The cause of the cache break between two consecutive views (one of CAUSES).

    `divergence` is `first_divergence` of their requests; the owners are the positions of
    the projection messages its blocks were rendered from (None: a tool, or past the end).
    """
    if divergence.kind in ("identical", "appended"):
        return CAUSE_APPEND
    refs = [r for r in (divergence.previous, divergence.current) if r is not None]
    if any(r.section == SECTION_TOOLS for r in refs):
        return CAUSE_TOOLS
    before = previous.sources[previous_owner] if previous_owner is not None else None
    after = current.sources[current_owner] if current_owner is not None else None
    # The previous request differs first at its trailing state: all it held before that is
    # a prefix of this one, which only appended (and rebuilt the state after the history).
    if (
        previous_owner is not None
        and previous.sources[previous_owner].derived_type == DERIVED_STATE
        and _trailing(previous, previous_owner)
        and (after is None or after.derived_type not in (DERIVED_SYSTEM, DERIVED_HEADER))
    ):
        return CAUSE_APPEND
    kinds = {s.derived_type for s in (before, after) if s is not None}
    if any(r.section == SECTION_SYSTEM for r in refs) or DERIVED_SYSTEM in kinds:
        return CAUSE_SYSTEM
    if previous.window_id != current.window_id:
        return CAUSE_WINDOW_SWITCH
    if _shown_ids(previous) - _shown_ids(current):
        # Messages of the window left the view without a fold: its coverage moved.
        return CAUSE_CHECKPOINT
    if DERIVED_HEADER in kinds:
        return CAUSE_HEADER
    if DERIVED_FOLD in kinds:
        return CAUSE_FOLD
    if before is not None and before.derived_type == DERIVED_RAW:
        folded = {
            mid for s in current.sources if s.derived_type == DERIVED_FOLD for mid in s.message_ids
        }
        if folded.intersection(before.message_ids):
            return CAUSE_FOLD
    if DERIVED_STATE in kinds:
        return CAUSE_STATE
    if DERIVED_MASKED in kinds:
        return CAUSE_MASKING
    return CAUSE_HISTORY


def rebilled_tokens(previous: Linearised, current: Linearised, position: int | None) -> int:
    """Tokens of `current` from `position` on whose content `previous` sent from there on."""
    if position is None:
        return 0
    sent = {b.digest for b in previous.blocks[position:]}
    return sum(b.tokens for b in current.blocks[position:] if b.digest in sent)
