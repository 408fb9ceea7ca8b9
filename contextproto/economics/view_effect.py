"""What the protocol did to one view (contract §22's view span), from a snapshot's sources.

A view stands for the session's log through its frozen bound U: each raw message is in it as
itself, behind a fold's summary, as a masked stub, covered by the window's checkpoint (the
header carries it), or not at all (another window's history). The sources say which, per
view message (`derivedType`, `windowId`, `messageIds`); the log is gapless, so U is how many
messages the view stands for.

Token figures are the engine's estimates (characters / 4, `contextproto.protocol.tokens`):
`view_tokens` measures the view's messages as the admin's token breakdown does (their JSON);
`tokens_saved` measures a fold or a masked result and the raw messages behind it alike, by
the maintenance planner's `message_tokens`, so the difference is a like-for-like estimate.
The checkpoint's own saving is not in it: the messages it covers are usually archived and
reading them on every turn would cost what the session's length costs; a maintenance job's
trace carries the checkpoint's tokens (docs/decisions.md, "Traces: one module, a counted
export queue, and what the view span counts").
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contextproto.protocol.content_parts import content_text
from contextproto.protocol.messages import (
    DERIVED_FOLD,
    DERIVED_MASKED,
    DERIVED_RAW,
    DERIVED_STATE,
)
from contextproto.protocol.tokens import json_tokens, text_tokens


@dataclass(frozen=True)
class ViewEffect:
    """One view's account of the log through its bound.

    `shown` raw messages as themselves; `folded` raw messages behind `folds` fold summaries;
    `masked` tool results shown as stubs; `covered` of the window's messages covered by its
    checkpoint (None when the window's size was not given); `hidden` messages through the
    bound the view shows in no form (the checkpoint's and other windows'); `messages` and
    `view_tokens` of the view itself; `tokens_saved` by its folds and masks (None when the
    raw messages behind them were not given).
    """

    messages: int
    shown: int
    folded: int
    folds: int
    masked: int
    covered: int | None
    hidden: int
    view_tokens: int
    tokens_saved: int | None


def standin_tokens(message: Mapping[str, Any]) -> int:
    """A fold's or a masked stub's tokens, measured as the planner measures a text message."""
    return text_tokens(content_text(message.get("content")))


def checkpoint_position(messages: Sequence[Mapping[str, Any]]) -> int | None:
    """The checkpoint position C the view's state message states (unified@2, @3), if any."""
    for message in messages:
        if message.get("kind") == DERIVED_STATE:
            _, _, body = str(message.get("content", "")).partition("\n")
            try:
                state = json.loads(body)
            except ValueError:
                return None
            found = state.get("checkpointPosition") if isinstance(state, dict) else None
            return found if isinstance(found, int) and not isinstance(found, bool) else None
    return None


def view_effect(
    messages: Sequence[Mapping[str, Any]],
    sources: Sequence[Mapping[str, Any]],
    *,
    upper_bound: int,
    window_id: str,
    window_messages: int | None = None,
    raw_tokens: Mapping[str, int] | None = None,
) -> ViewEffect:
    """Count what the view (`messages` with their `sources`, wire shapes) did to the log.

    `window_messages`: how many of the window's messages have index <= `upper_bound` (hot
    and cold); with it, `covered` is those the view shows in no form. A view whose state
    message says the checkpoint covers nothing (C = 0) needs no count: `covered` is 0.
    `raw_tokens`: the planner's estimate of each raw message behind a fold or a mask, by
    MessageId; with every one of them, `tokens_saved` is their sum minus the stand-ins'.
    """
    shown = folded = folds = masked = in_window = 0
    replaced: list[tuple[Mapping[str, Any], tuple[str, ...]]] = []
    for position, source in enumerate(sources):
        derived = source.get("derivedType")
        ids = tuple(str(i) for i in source.get("messageIds") or ())
        if derived == DERIVED_RAW:
            shown += len(ids)
        elif derived == DERIVED_FOLD:
            folds += 1
            folded += len(ids)
        elif derived == DERIVED_MASKED:
            masked += len(ids)
        else:
            continue
        if source.get("windowId") == window_id:
            in_window += len(ids)
        if derived != DERIVED_RAW and position < len(messages):
            replaced.append((messages[position], ids))
    stood_for = shown + folded + masked
    if window_messages is not None:
        covered: int | None = max(window_messages - in_window, 0)
    else:
        covered = 0 if checkpoint_position(messages) == 0 else None
    return ViewEffect(
        messages=len(messages),
        shown=shown,
        folded=folded,
        folds=folds,
        masked=masked,
        covered=covered,
        hidden=max(upper_bound - stood_for, 0),
        view_tokens=sum(json_tokens(dict(m)) for m in messages),
        tokens_saved=_saved(replaced, raw_tokens),
    )


def _saved(
    replaced: Sequence[tuple[Mapping[str, Any], tuple[str, ...]]],
    raw_tokens: Mapping[str, int] | None,
) -> int | None:
    """Raw tokens behind the stand-ins minus the stand-ins' own; None without every figure."""
    if raw_tokens is None:
        return None
    saved = 0
    for standin, ids in replaced:
        if any(i not in raw_tokens for i in ids):
            return None
        saved += sum(raw_tokens[i] for i in ids) - standin_tokens(standin)
    return saved


def replaced_ids(sources: Sequence[Mapping[str, Any]]) -> list[str]:
    """The MessageIds behind the view's folds and masked stubs (what `raw_tokens` needs)."""
    return [
        str(i)
        for source in sources
        if source.get("derivedType") in (DERIVED_FOLD, DERIVED_MASKED)
        for i in source.get("messageIds") or ()
    ]
