"""Replay a session's recorded turns under another protocol version (what-if; contract §10).

Every recorded turn (a projection snapshot) froze its revision R, upper bound U, run and
window. A replay rebuilds that turn's view from what the turn itself read: the state at R
(the KV history, so the folds are those of R, not today's fold table), the raw messages
through U (archived ones through the merged reader) and the session's published version,
under a target protocol version and options of the same protocol id (unified@N <-> unified@M;
prefix@2 only to prefix@2). The view is adapted for the snapshot's wire format exactly as
`projection_build` adapts it, and every turn is also rebuilt for openai-chat and
anthropic-messages with prompt caching on and priced by the cache economy report's pure API
(`contextproto/economics/cache_report.py`), beside the same report over the recorded views and
the provider usage the turn reported. No model is called; nothing is written. What a replay
answers (its turns, totals and wire shapes) and how its totals are shown are in
sessions_app/replay_report.py; each turn's view is built by sessions_app/services/rebuild.py.

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
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from agents.models import AgentVersion
from agents.selectors import effective_options, protocol_of
from contextproto import tokens
from contextproto.economics.cache_report import cache_economy
from contextproto.economics.inputs import ViewTurn
from contextproto.economics.stored_views import tools_from_request
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
from sessions_app.cache_economy import (
    DEFAULT_THINK_SECONDS,
    recorded_view,
    send_times,
    session_settings,
)
from sessions_app.models import ProjectionSnapshot, Session
from sessions_app.reads import raw_log
from sessions_app.reads.history import kv_history_through
from sessions_app.replay_report import (
    RecordedUsage,
    ReplayTarget,
    SessionReplay,
    TurnReplay,
)
from sessions_app.services.rebuild import (
    History,
    Log,
    RebuildContext,
    build_turn,
    jobs_of,
)
from sessions_app.store.snapshot_bodies import views_of

# Request keys the adapters add since contract §4.5 asked for one tool call per answer. A request
# recorded before then lacks them: it is compared without them, and the turn says so.
ONE_CALL_KEYS = ("parallel_tool_calls", "tool_choice")
ONE_CALL_NOT_RECORDED = (
    "recorded before requests asked for one tool call per answer: compared without "
    "parallel_tool_calls / tool_choice"
)


# --------------------------------------------------------------------------- the target


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
    times = send_times([s for s, _ in done], think_seconds)
    recorded_turns, replayed_turns = [], []
    for (snapshot, r), sent_at in zip(done, times, strict=True):
        label = str(snapshot.pk)
        recorded_turns.append(
            ViewTurn(
                recorded_view(snapshot, log.errors),
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
    "agent_version_sessions",
    "replay_target",
    "session_replay",
]
