"""What the runner records as it goes: runs, sessions, stages and the stop, as report.json has them.

TypedDicts, so the runner and the report read a record by name; key order is the order each
record is built in, which is the order report.json shows.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

STOP_BUDGET = "budget_exhausted"
STOP_GROUP_FAILED = "group_failed_stage"
NOT_RUN = "not_run"


class TokensWire(TypedDict):
    input: int
    uncachedInput: int
    cacheRead: int
    cacheWrite: int
    output: int
    total: int
    calls: int
    source: str


class RunRecord(TypedDict, total=False):
    """A run of a session; one not run has only session, number, input, verdict, reason."""

    session: int
    number: int
    input: str
    runId: str
    status: str
    verdict: str
    reason: str
    turns: int
    answer: str | None
    toolCalls: list[str | None]
    checks: list[dict[str, Any]]
    tokens: TokensWire
    maintenanceTokens: TokensWire
    snapshotIds: list[str]


class SessionRecord(TypedDict):
    repetition: int
    sessionId: str
    agentVersionId: str
    runs: list[RunRecord]


class StageRecord(TypedDict):
    id: str
    title: str
    sessions: list[SessionRecord]
    verdict: NotRequired[str]
    reason: NotRequired[str]


class Stop(TypedDict, total=False):
    """Why the experiment stopped: the budget (group, stage, session, run, spent tokens) or
    a group failing a stage under `stop_experiment` (stage, groups)."""

    reason: str
    group: str
    stage: str
    sessionId: str
    run: int
    spentTokens: int
    groups: list[str]
