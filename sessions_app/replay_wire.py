"""The JSON shapes of a replay report (`replay_sessions --json`), as `replay_report.py`'s
`to_wire` methods render them. No API serves them, so they have no serializer."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class ReplayTargetWire(TypedDict):
    protocol: str | None  # id@version; None: each turn as recorded
    options: dict[str, Any] | None
    label: NotRequired[str]  # only as recorded: "as recorded"


class RecordedUsageWire(TypedDict):
    inputTokens: int
    cacheReadInputTokens: int
    cacheWriteInputTokens: int
    outputTokens: int
    cost: float | None


class ProviderTurnWire(TypedDict):
    """One side (recorded or replayed) of a turn under one provider's caching rules."""

    inputTokens: int
    cacheReadTokens: int
    cacheWriteTokens: int
    hitRatio: float
    cost: float
    equivalentTokens: float
    cause: str | None


class TurnReplayWire(TypedDict):
    turn: int
    snapshotId: str
    revision: int
    upperBound: int
    windowId: str
    provider: str
    recordedProtocol: str
    replayedProtocol: str | None
    sentTokens: int
    replayedTokens: int | None
    requestIdentical: bool | None
    viewIdentical: bool | None
    usage: RecordedUsageWire | None
    notes: list[str]
    skipped: str | None
    # provider -> side ("recorded", "replayed") -> row; a skipped turn has no rows.
    providers: dict[str, dict[str, ProviderTurnWire]]


class ProviderTotalsWire(TypedDict):
    inputTokens: int
    cacheReadTokens: int
    cacheWriteTokens: int
    hitRatio: float
    equivalentTokens: float


class ProviderTotalsPairWire(TypedDict):
    recorded: ProviderTotalsWire
    replayed: ProviderTotalsWire


class ReplayTotalsWire(TypedDict):
    sessions: int
    turns: int
    skipped: int
    identicalRequests: int
    sentTokens: int
    replayedTokens: int
    providers: dict[str, ProviderTotalsPairWire]
    usageTurns: int
    usage: RecordedUsageWire | None
    notes: dict[str, int]


class SessionReplayWire(TypedDict):
    sessionId: str
    agentVersionId: str
    recordedProtocol: str
    target: ReplayTargetWire
    thinkSeconds: float | None
    tokenizer: str
    turnsRecorded: int
    turns: list[TurnReplayWire]
    totals: ReplayTotalsWire
