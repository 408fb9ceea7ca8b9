"""The replay's report (contract §10): what a replay answers and how it is shown.

The result types (`SessionReplay`, its `TurnReplay`s, `ReplayTotals` over one or more
sessions) with their wire shapes (`to_wire`: the command's JSON), and `totals_rows`, the one
rendering of the totals recorded beside replayed that the admin pages and
`manage.py replay_sessions` both show. The replay itself is sessions_app/replay.py.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from contextproto.economics.cache_report import CacheEconomy, ProviderEconomy
from contextproto.economics.linearise import SIMULATED_PROVIDERS
from contextproto.protocol import catalog
from contextproto.protocol.adapters import PROVIDER_ANTHROPIC_MESSAGES, PROVIDER_OPENAI_CHAT
from sessions_app.replay_wire import (
    ProviderTotalsWire,
    ProviderTurnWire,
    RecordedUsageWire,
    ReplayTargetWire,
    ReplayTotalsWire,
    SessionReplayWire,
    TurnReplayWire,
)

AS_RECORDED = "as recorded"
# The simulated providers as the report names them, in the order it shows them.
PROVIDER_NAMES = ((PROVIDER_OPENAI_CHAT, "OpenAI"), (PROVIDER_ANTHROPIC_MESSAGES, "Anthropic"))


# --------------------------------------------------------------------------- the target


@dataclass(frozen=True)
class ReplayTarget:
    """The protocol version and normalized options to rebuild with; None: as recorded."""

    protocol: catalog.ProtocolVersion | None = None
    options: Mapping[str, Any] | None = None

    @property
    def label(self) -> str:
        if self.protocol is None:
            return AS_RECORDED
        return self.protocol.key

    def to_wire(self) -> ReplayTargetWire:
        if self.protocol is None:
            return {"protocol": None, "options": None, "label": AS_RECORDED}
        return {"protocol": self.protocol.key, "options": dict(self.options or {})}


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class RecordedUsage:
    """What the provider reported for the turn (contract §8), with the cost at the version's
    prices (None without prices)."""

    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    output_tokens: int
    cost: Decimal | None

    def to_wire(self) -> RecordedUsageWire:
        return {
            "inputTokens": self.input_tokens,
            "cacheReadInputTokens": self.cache_read_tokens,
            "cacheWriteInputTokens": self.cache_write_tokens,
            "outputTokens": self.output_tokens,
            "cost": None if self.cost is None else float(self.cost),
        }


@dataclass(frozen=True)
class TurnReplay:
    """One recorded turn and its rebuild.

    `sent_tokens` / `replayed_tokens`: tokens of the recorded request as sent and of the
    rebuilt one, in the snapshot's wire format. `request_identical`: the two serialize to
    the same JSON; `view_identical`: so do the views (messages and sources). `economy_turn`:
    its position in the economies (None when skipped).
    """

    turn: int
    snapshot_id: str
    revision: int
    upper_bound: int
    window_id: str
    provider: str
    recorded_protocol: str
    replayed_protocol: str | None
    sent_tokens: int
    replayed_tokens: int | None
    request_identical: bool | None
    view_identical: bool | None
    usage: RecordedUsage | None
    notes: tuple[str, ...] = ()
    skipped: str | None = None
    economy_turn: int | None = None
    # The rebuilt request in the snapshot's wire format (not in the report's wire shape).
    request: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class SessionReplay:
    """A session's turns, rebuilt under `target`, with both sides' cache economies.

    The economies cover the replayed turns only (skipped ones are left out of both), so the
    recorded and replayed totals compare the same turns.
    """

    session_id: str
    agent_version_id: str
    recorded_protocol: str
    target: ReplayTarget
    think_seconds: float | None
    tokenizer: str
    turns: tuple[TurnReplay, ...]
    recorded: CacheEconomy
    replayed: CacheEconomy
    turns_total: int = 0  # recorded turns of the session (more than `turns` when capped)

    @property
    def replayed_turns(self) -> list[TurnReplay]:
        return [t for t in self.turns if t.skipped is None]

    @property
    def identical(self) -> int:
        return sum(1 for t in self.turns if t.request_identical)

    def totals(self) -> ReplayTotals:
        return ReplayTotals.of([self])

    def to_wire(self) -> SessionReplayWire:
        return {
            "sessionId": self.session_id,
            "agentVersionId": self.agent_version_id,
            "recordedProtocol": self.recorded_protocol,
            "target": self.target.to_wire(),
            "thinkSeconds": self.think_seconds,
            "tokenizer": self.tokenizer,
            "turnsRecorded": self.turns_total,
            "turns": [self.turn_wire(t) for t in self.turns],
            "totals": self.totals().to_wire(),
        }

    def provider_turn(self, turn: TurnReplay, provider: str, side: str) -> Any:
        """The cache economy's row of `turn` under `provider` (side: recorded / replayed)."""
        if turn.economy_turn is None:
            return None
        economy = self.recorded if side == "recorded" else self.replayed
        return economy[provider].turns[turn.economy_turn]

    def turn_wire(self, turn: TurnReplay) -> TurnReplayWire:
        wire: TurnReplayWire = {
            "turn": turn.turn,
            "snapshotId": turn.snapshot_id,
            "revision": turn.revision,
            "upperBound": turn.upper_bound,
            "windowId": turn.window_id,
            "provider": turn.provider,
            "recordedProtocol": turn.recorded_protocol,
            "replayedProtocol": turn.replayed_protocol,
            "sentTokens": turn.sent_tokens,
            "replayedTokens": turn.replayed_tokens,
            "requestIdentical": turn.request_identical,
            "viewIdentical": turn.view_identical,
            "usage": turn.usage.to_wire() if turn.usage else None,
            "notes": list(turn.notes),
            "skipped": turn.skipped,
            "providers": {},
        }
        for provider in SIMULATED_PROVIDERS:
            rows: dict[str, ProviderTurnWire] = {}
            for side in ("recorded", "replayed"):
                row = self.provider_turn(turn, provider, side)
                if row is not None:
                    rows[side] = {
                        "inputTokens": row.cache.input_tokens,
                        "cacheReadTokens": row.cache.cache_read_tokens,
                        "cacheWriteTokens": row.cache.cache_write_tokens,
                        "hitRatio": _ratio(row.cache.cache_read_tokens, row.cache.input_tokens),
                        "cost": row.cost,
                        "equivalentTokens": row.cost * 1_000_000,
                        "cause": row.cause,
                    }
            wire["providers"][provider] = rows
        return wire


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


@dataclass(frozen=True)
class ProviderTotals:
    """One side's sums under one provider's rules (cost: the report's relative prices, so
    `equivalent_tokens` is the cost in input tokens at the full price)."""

    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    equivalent_tokens: float = 0.0

    @property
    def hit_ratio(self) -> float:
        return _ratio(self.cache_read_tokens, self.input_tokens)

    def __add__(self, other: ProviderTotals) -> ProviderTotals:
        return ProviderTotals(
            self.input_tokens + other.input_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.equivalent_tokens + other.equivalent_tokens,
        )

    @classmethod
    def of(cls, economy: ProviderEconomy) -> ProviderTotals:
        summed = economy.totals
        return cls(
            summed.input_tokens,
            summed.cache_read_tokens,
            summed.cache_write_tokens,
            economy.equivalent_tokens,
        )

    def to_wire(self) -> ProviderTotalsWire:
        return {
            "inputTokens": self.input_tokens,
            "cacheReadTokens": self.cache_read_tokens,
            "cacheWriteTokens": self.cache_write_tokens,
            "hitRatio": self.hit_ratio,
            "equivalentTokens": self.equivalent_tokens,
        }


@dataclass(frozen=True)
class ReplayTotals:
    """Totals over one or more session replays: recorded vs replayed."""

    sessions: int
    turns: int
    skipped: int
    identical: int
    sent_tokens: int
    replayed_tokens: int
    recorded: Mapping[str, ProviderTotals]
    replayed: Mapping[str, ProviderTotals]
    usage_turns: int
    usage: RecordedUsage | None
    notes: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, replays: Sequence[SessionReplay]) -> ReplayTotals:
        done = [t for r in replays for t in r.replayed_turns]
        recorded: dict[str, ProviderTotals] = {p: ProviderTotals() for p in SIMULATED_PROVIDERS}
        replayed: dict[str, ProviderTotals] = {p: ProviderTotals() for p in SIMULATED_PROVIDERS}
        for r in replays:
            for p in SIMULATED_PROVIDERS:
                if r.recorded.turns:
                    recorded[p] = recorded[p] + ProviderTotals.of(r.recorded[p])
                    replayed[p] = replayed[p] + ProviderTotals.of(r.replayed[p])
        reported = [t.usage for t in done if t.usage is not None]
        costs = [u.cost for u in reported if u.cost is not None]
        usage = (
            RecordedUsage(
                input_tokens=sum(u.input_tokens for u in reported),
                cache_read_tokens=sum(u.cache_read_tokens for u in reported),
                cache_write_tokens=sum(u.cache_write_tokens for u in reported),
                output_tokens=sum(u.output_tokens for u in reported),
                cost=sum(costs, Decimal(0)) if costs else None,
            )
            if reported
            else None
        )
        notes: dict[str, int] = defaultdict(int)
        for t in done:
            for note in t.notes:
                notes[note] += 1
        return cls(
            sessions=len(replays),
            turns=len(done),
            skipped=sum(len(r.turns) for r in replays) - len(done),
            identical=sum(r.identical for r in replays),
            sent_tokens=sum(t.sent_tokens for t in done),
            replayed_tokens=sum(t.replayed_tokens or 0 for t in done),
            recorded=recorded,
            replayed=replayed,
            usage_turns=len(reported),
            usage=usage,
            notes=dict(notes),
        )

    def to_wire(self) -> ReplayTotalsWire:
        return {
            "sessions": self.sessions,
            "turns": self.turns,
            "skipped": self.skipped,
            "identicalRequests": self.identical,
            "sentTokens": self.sent_tokens,
            "replayedTokens": self.replayed_tokens,
            "providers": {
                p: {"recorded": self.recorded[p].to_wire(), "replayed": self.replayed[p].to_wire()}
                for p in SIMULATED_PROVIDERS
            },
            "usageTurns": self.usage_turns,
            "usage": self.usage.to_wire() if self.usage else None,
            "notes": dict(self.notes),
        }


# --------------------------------------------------------------------------- rendering


def change(before: float, after: float) -> str:
    """The relative change from `before` to `after` ("-" when there was nothing before)."""
    return f"{100 * (after - before) / before:+.1f}%" if before else "-"


def totals_rows(totals: ReplayTotals) -> list[tuple[str, str, str, str]]:
    """(measure, recorded, replayed, change) over the turns both sides cover."""
    rows = [
        (
            "request tokens, as sent / rebuilt",
            f"{totals.sent_tokens:,}",
            f"{totals.replayed_tokens:,}",
            change(totals.sent_tokens, totals.replayed_tokens),
        )
    ]
    for provider, name in PROVIDER_NAMES:
        recorded, replayed = totals.recorded[provider], totals.replayed[provider]
        rows += [
            (
                f"{name}: input tokens",
                f"{recorded.input_tokens:,}",
                f"{replayed.input_tokens:,}",
                change(recorded.input_tokens, replayed.input_tokens),
            ),
            (
                f"{name}: cache hit ratio",
                f"{100 * recorded.hit_ratio:.1f}%",
                f"{100 * replayed.hit_ratio:.1f}%",
                f"{100 * (replayed.hit_ratio - recorded.hit_ratio):+.1f} pt",
            ),
            (
                f"{name}: effective cost",
                f"{round(recorded.equivalent_tokens):,}",
                f"{round(replayed.equivalent_tokens):,}",
                change(recorded.equivalent_tokens, replayed.equivalent_tokens),
            ),
        ]
    return rows
