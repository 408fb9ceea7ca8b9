"""The session endpoints' own reply shapes (contract §12.1), as rendered by their `*_to_wire`
builders in `api/views.py` (and `job_to_wire` in `api/maintenance.py`).

Shapes built below the edge sit beside their builders: `RawMessageWire`, `ModelMessageWire`
and `SourceWire` (engine, `protocol/messages.py`), `UsageWire` (`contextproto/usage.py`),
`ForkPointWire` (`services/fork.py`), `ReceiptWire` (`services/dispatch.py`), `SnapshotWire`
(`services/projection.py`), `TurnWire` (`services/turns.py`). `api/shapes.py` documents the
same shapes for the OpenAPI schema; tests/api/test_wire_shapes.py holds the two together.
"""

from __future__ import annotations

from typing import Any, TypedDict

from contextproto.usage import SessionUsageWire
from sessions_app.services.fork import ForkPointWire


class SessionWire(TypedDict):
    id: str
    agentVersionId: str
    inputs: dict[str, Any]
    stateRevision: int
    activeWindow: str
    currentRunId: str | None  # hex
    lastIndex: int
    createdAt: str
    forkedFrom: ForkPointWire | None


class SessionCreatedWire(SessionWire):
    """A new or forked session: the session key, shown once."""

    sessionKey: str


class SessionDetailWire(SessionWire):
    usage: SessionUsageWire


class ChildSessionWire(TypedDict):
    agentId: str  # the sub-agent's own id within the conversation (the client's)
    sessionId: str


class GatewayConversationWire(TypedDict):
    conversationId: str
    sessionId: str
    childSessions: list[ChildSessionWire]


class WindowWire(TypedDict):
    windowId: str
    active: bool
    # The window's KV record and checkpoint as stored (plain JSON; older records may lack keys).
    record: dict[str, Any] | None
    checkpoint: Any
    coveredThrough: int


class FoldWire(TypedDict):
    foldId: str
    windowId: str
    firstIndex: int
    lastIndex: int
    messageIds: list[str]
    summary: str
    compressed: bool


class MaintenanceJobWire(TypedDict):
    jobId: str
    status: str
    windowId: str
    trigger: str
    external: bool
    frozenRevision: int | None
    fromIndex: int | None
    throughIndex: int | None
    sourceHash: str | None
    pageCount: int
    pagesRead: int
    attempts: int
    reason: str | None
    tokensBefore: int | None
    tokensAfter: int | None
