"""Conversation ids a gateway client sends on its own (contract §14, SPEC §19.1), read from
its headers.

Within an Application a conversation id names one session; a sub-agent's own id within that
conversation names a child session of it. `CONVERSATION_HEADERS` are the headers read, in
order (the first present wins); every client header in it was checked against the real
client in the suite (tests/clients), and docs/contract.md §14 lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# Ours first: a client that knows the gateway says which conversation a request is.
CONVERSATION_HEADER = "x-contextproto-conversation"
# Claude Code: the same id on every request of a conversation (-p, --continue, interactive).
CLAUDE_CODE_SESSION = "x-claude-code-session-id"
# Codex CLI: `session-id` (equal to its `thread-id`), the same across `codex exec` and
# `codex exec resume`.
CODEX_SESSION = "session-id"
CONVERSATION_HEADERS: tuple[str, ...] = (CONVERSATION_HEADER, CLAUDE_CODE_SESSION, CODEX_SESSION)
# Claude Code's sub-agents: their own id, and the id of the sub-agent that started them (none
# for one the main conversation started).
CLAUDE_CODE_AGENT = "x-claude-code-agent-id"
CLAUDE_CODE_PARENT_AGENT = "x-claude-code-parent-agent-id"
# The column's size: ids are uuids in every client checked.
CONVERSATION_ID_MAX = 255


@dataclass(frozen=True)
class ConversationRef:
    """The conversation a request says it belongs to. `agent_id`: '' for the conversation
    itself, a sub-agent's own id for a child session; `parent_agent_id`: the sub-agent that
    started this one ('' for the conversation itself); `header`: where the id came from."""

    conversation_id: str
    agent_id: str = ""
    parent_agent_id: str = ""
    header: str = CONVERSATION_HEADER


class ConversationHeaderInvalid(ValueError):
    """A conversation header the gateway cannot take (empty after trimming, too long)."""

    def __init__(self, header: str, message: str) -> None:
        super().__init__(message)
        self.header = header


def conversation_of(headers: Mapping[str, str]) -> ConversationRef | None:
    """The conversation `headers` (lower-cased names) name, or None. A blank value counts as
    absent; a value longer than `CONVERSATION_ID_MAX` is refused (a truncated id could name
    another conversation)."""
    for header in CONVERSATION_HEADERS:
        conversation_id = _value(headers, header)
        if conversation_id:
            return ConversationRef(
                conversation_id=conversation_id,
                agent_id=_value(headers, CLAUDE_CODE_AGENT),
                parent_agent_id=_value(headers, CLAUDE_CODE_PARENT_AGENT),
                header=header,
            )
    return None


def _value(headers: Mapping[str, str], header: str) -> str:
    value = headers.get(header, "").strip()
    if len(value) > CONVERSATION_ID_MAX:
        raise ConversationHeaderInvalid(
            header, f"The {header} header must be at most {CONVERSATION_ID_MAX} characters."
        )
    return value
