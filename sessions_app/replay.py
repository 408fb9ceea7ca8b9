"""Replay a session's recorded turns under another protocol version (what-if; SPEC §17).

Every recorded turn (a projection snapshot) froze its revision R, upper bound U, run and
window. A replay rebuilds that turn's view from what the turn itself read: the state at R
(the KV history, so the folds are those of R, not today's fold table), the raw messages
through U (archived ones through the merged reader) and the session's published version,
under a target protocol version and options of the same protocol id (unified@N <-> unified@M;
prefix@2 only to prefix@2). The view is adapted for the snapshot's wire format exactly as
`projection_build` adapts it, and every turn is also rebuilt for openai-chat and
anthropic-messages with prompt caching on and priced by the cache economy report's pure API
(`contextproto/economics/cache_report.py`), beside the same report over the recorded views and
the provider usage the turn reported. No model is called; nothing is written.

Without a target each turn is rebuilt under its own recorded protocol and options, which
must reproduce the recorded request byte for byte (tests/sessions_app/test_replay.py).

What a view depended on beyond state, log and version (docs/decisions.md "Replay"):
* `TOOL_RESULT_PREVIEW_CHARS` as it was: `build_inputs.toolResultPreviewChars` of the
  snapshot; older snapshots get the current setting, and the turn says so.
* unified@4's `maintenancePending`: `build_inputs.maintenancePending`, or on older unified@4
  snapshots the flag their state message states; a view that never stated it (unified@1-3,
  replayed under unified@4) gets it from the job table (a job of the window created before
  the turn and not finished by then), labelled an estimate.
* host tools, system prompt, model config, prompt-cache setting, limits: the published
  version, which never changes; the OpenAI cache key: the session id's.
* the adapters as they are now: a request recorded before they asked for one tool call per
  answer lacks `parallel_tool_calls` / `tool_choice` and is compared without them (noted);
  one recorded before they showed the text beside a call differs (the view did not change,
  the request did) and says so by being not identical.

Reads are bounded whatever the number of turns: the session, its snapshots, the KV history
through the highest R, the raw log through the highest U (plus the cold chunks it spans), the
maintenance jobs when a target shows context pressure; the state at each R and each turn's
rows are then picked in memory.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from agents.models import AgentVersion
from agents.selectors import effective_options, protocol_of
from contextproto import tokens
from contextproto.economics.cache_report import CacheEconomy, ProviderEconomy, cache_economy, paced
from contextproto.economics.inputs import ViewTurn
from contextproto.economics.linearise import SIMULATED_PROVIDERS
from contextproto.economics.stored_views import projection_from_wire, tools_from_request
from contextproto.errors import (
    INVALID_REQUEST,
    PROTOCOL_UNKNOWN,
    REPLAY_OPTIONS_INVALID,
    REPLAY_PROTOCOL_INCOMPATIBLE,
    ApplicationError,
    NotFound,
)
from contextproto.ids import parse_uuid
from contextproto.protocol import catalog
from contextproto.protocol import projection as engine
from contextproto.protocol.options import validate_options
from sessions_app.cache_economy import DEFAULT_THINK_SECONDS, session_settings
from sessions_app.models import ProjectionSnapshot, Session
from sessions_app.reads import raw_log
from sessions_app.reads.history import kv_history_through
from sessions_app.replay_wire import (
    ProviderTotalsWire,
    ProviderTurnWire,
    RecordedUsageWire,
    ReplayTargetWire,
    ReplayTotalsWire,
    SessionReplayWire,
    TurnReplayWire,
)
from sessions_app.services.rebuild import (
    History,
    Log,
    RebuildContext,
    build_turn,
    jobs_of,
)
from sessions_app.store.snapshot_bodies import views_of

AS_RECORDED = "as recorded"
PRESSURE_ESTIMATED = (
    "maintenancePending estimated from the maintenance jobs' times (this view never stated it)"
)
# Request keys the adapters add since SPEC §4.5 asked for one tool call per answer. A request
# recorded before then lacks them: it is compared without them, and the turn says so.
ONE_CALL_KEYS = ("parallel_tool_calls", "tool_choice")
ONE_CALL_NOT_RECORDED = (
    "recorded before requests asked for one tool call per answer: compared without "
    "parallel_tool_calls / tool_choice"
)


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


def _parse_protocol(text: str) -> catalog.ProtocolVersion:
    found = catalog.by_key(text)
    if found is None:
        known = ", ".join(v.key for v in catalog.all_versions())
        raise ApplicationError(
            PROTOCOL_UNKNOWN,
            f"{text!r} is not a protocol version of the catalog; use id@version, one of {known}.",
            {"field": "protocol", "protocol": text, "available": known.split(", ")},
        )
    return found


def replay_target(
    version: AgentVersion, *, protocol: str | None = None, options: object = None
) -> ReplayTarget:
    """The target of a replay of `version`'s sessions, checked like a publish.

    `protocol` (`id@version`) must keep state the way the version's does: the same protocol
    id (400 `replay_protocol_incompatible`; an unknown one: 400 `protocol_unknown`).
    `options` are validated against the target's schema like publish options, every problem
    listed (400 `replay_options_invalid`); None means the version's own options when the
    target is its protocol, else the target's defaults. Neither given: each turn as recorded.
    """
    if protocol is None and options is None:
        return ReplayTarget()
    recorded = protocol_of(version)
    target = _parse_protocol(protocol) if protocol is not None else recorded
    if target.protocol_id != recorded.protocol_id:
        raise ApplicationError(
            REPLAY_PROTOCOL_INCOMPATIBLE,
            f"{recorded.key} sessions cannot be replayed under {target.key}: "
            f"{recorded.protocol_id} and {target.protocol_id} keep their state differently. "
            f"Choose a {recorded.protocol_id}@N version.",
            {
                "field": "protocol",
                "recorded": recorded.key,
                "target": target.key,
                "compatible": [
                    v.key for v in catalog.all_versions() if v.protocol_id == recorded.protocol_id
                ],
            },
        )
    if options is None:
        options = effective_options(version, recorded) if target.key == recorded.key else {}
    checked = validate_options(target.protocol_id, target.version, options)
    if not checked.valid:
        errors = [
            {
                "field": f"options.{e['option']}" if e.get("option") else "options",
                "code": e["code"],
                "message": e["message"],
            }
            for e in checked.errors
        ]
        raise ApplicationError(
            REPLAY_OPTIONS_INVALID,
            f"The options are not valid for {target.key}: {len(errors)} problem(s); "
            + " ".join(e["message"] for e in errors),
            {"errors": errors},
        )
    return ReplayTarget(protocol=target, options=checked.normalized)


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class RecordedUsage:
    """What the provider reported for the turn (SPEC §15), with the cost at the version's
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


def _json_text(value: Any) -> str:
    # One serialization for "byte for byte": the stored body is this JSON (CompressedJSONField).
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _usage_of(snapshot: ProjectionSnapshot) -> RecordedUsage | None:
    if snapshot.input_tokens is None:
        return None
    return RecordedUsage(
        input_tokens=snapshot.input_tokens,
        cache_read_tokens=snapshot.cache_read_input_tokens,
        cache_write_tokens=snapshot.cache_write_input_tokens,
        output_tokens=snapshot.output_tokens or 0,
        cost=snapshot.cost,
    )


# --------------------------------------------------------------------------- rebuilding


@dataclass(frozen=True)
class _Rebuilt:
    turn: TurnReplay
    projection: engine.Projection | None = None
    tools: tuple[dict[str, Any], ...] = ()


def _comparable(replayed: Mapping[str, Any], recorded: Mapping[str, Any], notes: list[str]) -> str:
    """The rebuilt request's JSON to compare with the recorded one: without the one-call keys
    when the recorded request predates them (noted)."""
    missing = [k for k in ONE_CALL_KEYS if k in replayed and k not in recorded]
    if not missing:
        return _json_text(replayed)
    notes.append(ONE_CALL_NOT_RECORDED)
    return _json_text({k: v for k, v in replayed.items() if k not in missing})


def _rebuild(ctx: RebuildContext, snapshot: ProjectionSnapshot, number: int) -> _Rebuilt:
    """Rebuild one recorded turn under the context's target (or as recorded)."""
    sent = _json_text(snapshot.request or {})
    # TurnReplay's fields every outcome shares (Any: one keyword set for several shapes).
    base: dict[str, Any] = {
        "turn": number,
        "snapshot_id": str(snapshot.pk),
        "revision": snapshot.revision,
        "upper_bound": snapshot.upper_bound,
        "window_id": snapshot.window_id,
        "provider": snapshot.provider,
        "recorded_protocol": snapshot.protocol,
        "sent_tokens": tokens.count_tokens(sent),
        "usage": _usage_of(snapshot),
    }

    def skipped(reason: str) -> _Rebuilt:
        return _Rebuilt(
            TurnReplay(
                **base,
                replayed_protocol=None,
                replayed_tokens=None,
                request_identical=None,
                view_identical=None,
                skipped=reason,
            )
        )

    notes: list[str] = []
    built = build_turn(ctx, snapshot, notes)
    if isinstance(built, str):
        return skipped(built)
    projection, request, tools = built.view.projection, built.request, built.view.tools
    replayed = _json_text(request)
    identical = _comparable(request, snapshot.request or {}, notes) == sent
    wire = projection.to_wire()
    view_identical = _json_text([wire["messages"], wire["sources"]]) == _json_text(
        [snapshot.messages or [], snapshot.sources or []]
    )
    return _Rebuilt(
        TurnReplay(
            **base,
            replayed_protocol=projection.protocol,
            replayed_tokens=tokens.count_tokens(replayed),
            request_identical=identical,
            view_identical=view_identical,
            notes=tuple(notes),
            request=request,
        ),
        projection=projection,
        tools=tuple(tools),
    )


def _recorded_view(snapshot: ProjectionSnapshot, errors: Sequence[str]) -> engine.Projection:
    """The recorded view as the cache economy report reads it (sessions_app/cache_economy)."""
    return projection_from_wire(
        snapshot.messages or [],
        snapshot.sources or [],
        window_id=snapshot.window_id,
        revision=snapshot.revision,
        upper_bound=snapshot.upper_bound,
        run_id=snapshot.run_id.hex if snapshot.run_id else None,
        protocol=snapshot.protocol,
        options=snapshot.options or {},
        error_tool_call_ids=errors,
    )


def _send_times(snapshots: Sequence[ProjectionSnapshot], think: float | None) -> list[float]:
    if think is not None:
        return paced(len(snapshots), think)
    if not snapshots:
        return []
    start = snapshots[0].created_at
    return [(s.created_at - start).total_seconds() for s in snapshots]


def session_replay(
    *,
    session_id: Any,
    target: ReplayTarget | None = None,
    protocol: str | None = None,
    options: object = None,
    think_seconds: float | None = DEFAULT_THINK_SECONDS,
    last_turns: int | None = None,
) -> SessionReplay:
    """Rebuild every recorded turn of a session under a target; write nothing.

    Give `target` (from `replay_target`) or `protocol` / `options` to check here; neither:
    each turn as recorded. `think_seconds`: the time between turns the cache TTLs assume
    (None: the snapshots' recorded times). `last_turns`: only the newest N turns (the cache
    starts cold at the first of them). Raises NotFound (404) for an unknown session and the
    refusals of `replay_target`; `invalid_request` for a negative think time or turn count.
    A turn that cannot be rebuilt (its revision is older than the KV history, the engine
    refuses it) is listed with the reason and left out of both sides' totals.
    """
    if think_seconds is not None and not think_seconds >= 0:
        raise ApplicationError(
            INVALID_REQUEST,
            f"thinkSeconds must be a number of seconds >= 0, got {think_seconds}.",
            {"field": "thinkSeconds"},
        )
    if last_turns is not None and last_turns < 1:
        raise ApplicationError(
            INVALID_REQUEST,
            f"The number of turns must be at least 1, got {last_turns}.",
            {"field": "lastTurns"},
        )
    session = (
        Session.objects.select_related("agent_version")
        .prefetch_related("agent_version__tools")
        .filter(pk=parse_uuid(session_id, "Session"))
        .first()
    )
    if session is None:
        raise NotFound("Session", {"sessionId": str(session_id)})
    version = session.agent_version
    if target is None:
        target = replay_target(version, protocol=protocol, options=options)
    rows = ProjectionSnapshot.objects.filter(session=session).order_by("-created_at", "-pk")
    total = rows.count() if last_turns is not None else None
    snapshots = list(rows[:last_turns] if last_turns is not None else rows)[::-1]
    views_of(snapshots)
    top_revision = max((s.revision for s in snapshots), default=0)
    top_bound = max((s.upper_bound for s in snapshots), default=0)
    history = History(kv_history_through(session.id, top_revision) if snapshots else [])
    log = Log(
        raw_log.log_page(session.id, window_id=None, after_index=0, limit=top_bound)
        if top_bound
        else []
    )
    shown = target.protocol or protocol_of(version)
    economy = session_settings(session)
    ctx = RebuildContext(
        session=session,
        history=history,
        log=log,
        jobs=jobs_of(session) if shown.layout.shows_context_pressure and snapshots else None,
        protocol=target.protocol,
        options=target.options,
    )
    rebuilt = [_rebuild(ctx, s, n) for n, s in enumerate(snapshots, start=1)]
    done = [(s, r) for s, r in zip(snapshots, rebuilt, strict=True) if r.projection is not None]
    times = _send_times([s for s, _ in done], think_seconds)
    recorded_turns, replayed_turns = [], []
    for (snapshot, r), sent_at in zip(done, times, strict=True):
        label = str(snapshot.pk)
        recorded_turns.append(
            ViewTurn(
                _recorded_view(snapshot, log.errors),
                tools=tools_from_request(snapshot.provider, snapshot.request or {}),
                sent_at=sent_at,
                label=label,
            )
        )
        assert r.projection is not None
        replayed_turns.append(ViewTurn(r.projection, tools=r.tools, sent_at=sent_at, label=label))
    label = tokens.tokenizer_label()
    turns = []
    position = 0
    for r in rebuilt:
        if r.projection is not None:
            turns.append(replace(r.turn, economy_turn=position))
            position += 1
        else:
            turns.append(r.turn)
    return SessionReplay(
        session_id=str(session.id),
        agent_version_id=str(version.id),
        recorded_protocol=version.protocol_key,
        target=target,
        think_seconds=think_seconds,
        tokenizer=label,
        turns=tuple(turns),
        recorded=cache_economy(
            recorded_turns,
            tokens.count_tokens,
            view=f"{version.protocol_key} (recorded)",
            tokenizer=label,
            settings=economy,
        ),
        replayed=cache_economy(
            replayed_turns,
            tokens.count_tokens,
            view=f"{target.label} (replayed)",
            tokenizer=label,
            settings=economy,
        ),
        turns_total=total if total is not None else len(snapshots),
    )


def agent_version_sessions(
    *, agent_version_id: Any, last: int
) -> tuple[AgentVersion, list[Session]]:
    """An AgentVersion and its newest `last` sessions, newest first.

    Raises NotFound (404) for an unknown version, `invalid_request` for `last` below 1.
    """
    if last < 1:
        raise ApplicationError(
            INVALID_REQUEST,
            f"The number of sessions must be at least 1, got {last}.",
            {"field": "last"},
        )
    version = (
        AgentVersion.objects.select_related("agent")
        .filter(pk=parse_uuid(agent_version_id, "AgentVersion"))
        .first()
    )
    if version is None:
        raise NotFound("AgentVersion", {"agentVersionId": str(agent_version_id)})
    sessions = Session.objects.filter(agent_version=version).order_by("-created_at", "-pk")
    return version, list(sessions[:last])


__all__ = [
    "AS_RECORDED",
    "ReplayTarget",
    "ReplayTotals",
    "SessionReplay",
    "TurnReplay",
    "agent_version_sessions",
    "replay_target",
    "session_replay",
]
