"""Interaction groups: the atomic units of one window's history (contract §2.7).

Providers need every tool result right after its call, so the view, folds and
prefix compression all cut history only between groups, never inside one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contextproto.protocol.messages import (
    KIND_TEXT,
    KIND_TOOL_CALL,
    KIND_TOOL_RESULT,
    NEVER_FOLDABLE_KINDS,
    ROLE_USER,
    RawMessage,
)

GROUP_TOOL_INTERACTION = "tool_interaction"
GROUP_ASSISTANT_TEXT = "assistant_text"
GROUP_USER_MESSAGE = "user_message"
GROUP_ORPHAN_RESULT = "orphan_result"

# Why a group is not foldable. The order of REASON_PRECEDENCE is the order in which
# fold validation reports them, so a group's single `reason` is the first one that a
# fold over it would be refused for.
REASON_CONTAINS_USER_INPUT = "contains_user_input"
REASON_UNANSWERED_CALL = "unanswered_call"
REASON_ORPHAN_RESULT = "orphan_result"
REASON_PRECEDENCE = (REASON_CONTAINS_USER_INPUT, REASON_UNANSWERED_CALL, REASON_ORPHAN_RESULT)


@dataclass(frozen=True)
class Group:
    """One interaction group of a window's history, in index order."""

    first_index: int
    last_index: int
    messages: tuple[RawMessage, ...]
    kind: str
    foldable: bool
    reason: str | None
    open: bool

    @property
    def indices(self) -> tuple[int, ...]:
        return tuple(m.index for m in self.messages)


def _is_user_input(message: RawMessage) -> bool:
    return message.kind in NEVER_FOLDABLE_KINDS or message.role == ROLE_USER


def _close(messages: list[RawMessage], kind: str, *, open_: bool, orphan: bool) -> Group:
    reasons = set()
    if any(_is_user_input(m) for m in messages):
        reasons.add(REASON_CONTAINS_USER_INPUT)
    if open_:
        reasons.add(REASON_UNANSWERED_CALL)
    if orphan:
        reasons.add(REASON_ORPHAN_RESULT)
    reason = next((r for r in REASON_PRECEDENCE if r in reasons), None)
    return Group(
        first_index=messages[0].index,
        last_index=messages[-1].index,
        messages=tuple(messages),
        kind=kind,
        foldable=reason is None,
        reason=reason,
        open=open_,
    )


def build_groups(window_messages: Sequence[RawMessage]) -> list[Group]:
    """Split one window's messages (index order, gaps allowed) into interaction groups.

    A result for a call that is not pending (never made, made in another window, or
    already answered) is an integrity fault: outside a group it forms its own
    `orphan_result` group; inside an open group it makes that group unfoldable.
    """
    groups: list[Group] = []
    current: list[RawMessage] = []
    pending: set[str] = set()
    orphan_inside = False

    for message in window_messages:
        if current:
            current.append(message)
            if message.kind == KIND_TOOL_CALL:
                pending.add(message.tool_call_id or "")
            elif message.kind == KIND_TOOL_RESULT:
                if message.tool_call_id in pending:
                    pending.discard(message.tool_call_id or "")
                else:
                    orphan_inside = True
            if not pending:
                groups.append(
                    _close(current, GROUP_TOOL_INTERACTION, open_=False, orphan=orphan_inside)
                )
                current, orphan_inside = [], False
            continue

        if message.kind == KIND_TOOL_CALL:
            current = [message]
            pending = {message.tool_call_id or ""}
        elif message.kind == KIND_TOOL_RESULT:
            groups.append(_close([message], GROUP_ORPHAN_RESULT, open_=False, orphan=True))
        elif message.kind == KIND_TEXT and not _is_user_input(message):
            groups.append(_close([message], GROUP_ASSISTANT_TEXT, open_=False, orphan=False))
        elif _is_user_input(message):
            groups.append(_close([message], GROUP_USER_MESSAGE, open_=False, orphan=False))
        else:
            # An assistant message of an unknown kind carries no pairing obligation;
            # treat it like text so it neither breaks nor joins a group.
            groups.append(_close([message], GROUP_ASSISTANT_TEXT, open_=False, orphan=False))

    if current:
        groups.append(_close(current, GROUP_TOOL_INTERACTION, open_=True, orphan=orphan_inside))
    return groups
