"""Load a session's recorded turns into the cache economy report (economics/cache_report.py).

Read-only: the stored snapshots (each turn's view as projected: messages, sources and the
request's tools) and the raw log (error flags of tool results; the full history) are handed
to the engine, which rebuilds every turn's request for openai-chat and anthropic-messages
with prompt caching on and replays them through the cache simulator.

Timing (the simulator's TTLs need send times): by default a fixed think time of
DEFAULT_THINK_SECONDS between turns, because scripted sessions (the bench, the demo) run
their turns milliseconds apart, which no real agent does; `think_seconds=None` uses the
snapshots' recorded times instead (a real session's).

Every snapshot is one request, in the order they were stored. Tokens are counted with
`contextproto.tokens` (cl100k_base, an estimate for the priced models; its label is in the
report).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from contextproto import tokens
from contextproto.economics.cache_report import CacheEconomy, cache_economy, paced
from contextproto.economics.inputs import DEFAULT_MODELS, EconomySettings, ViewTurn
from contextproto.economics.stored_views import (
    FULL_HISTORY,
    full_history_projections,
    projection_from_wire,
    tools_from_request,
)
from contextproto.protocol.adapters import PROVIDER_ANTHROPIC_MESSAGES, PROVIDER_OPENAI_CHAT
from contextproto.protocol.messages import KIND_TOOL_RESULT, RawMessage
from contextproto.protocol.projection import Projection
from contextproto.protocol.prompt_cache import session_cache_key
from sessions_app.models import ProjectionSnapshot, Session
from sessions_app.reads import raw_log
from sessions_app.store.snapshot_bodies import views_of

# Seconds between two turns of a scripted session: a model answer plus the host's work.
# Well inside the 5-minute TTL, so only a window left for 15 turns or more loses its entries.
DEFAULT_THINK_SECONDS = 20.0
# The version's own model is simulated when it runs on that provider.
_MODEL_PROVIDERS = {"openai": PROVIDER_OPENAI_CHAT, "anthropic": PROVIDER_ANTHROPIC_MESSAGES}


@dataclass(frozen=True)
class SessionTurns:
    """A session's turns as the report replays them: its views and the full history."""

    session_id: str
    views: list[ViewTurn]
    full_history: list[ViewTurn]
    settings: EconomySettings


@dataclass(frozen=True)
class SessionEconomy:
    """The report of a session's views and, if asked for, of its full history."""

    session_id: str
    view: CacheEconomy
    full_history: CacheEconomy | None


def session_settings(session: Session) -> EconomySettings:
    """Caching on (auto, 5m), the session's OpenAI key, the version's model where it has one."""
    version = session.agent_version
    models = dict(DEFAULT_MODELS)
    provider = _MODEL_PROVIDERS.get(version.model_provider)
    if provider and version.model_name:
        models[provider] = version.model_name
    config = version.model_config if isinstance(version.model_config, dict) else {}
    return EconomySettings(
        cache_key=session_cache_key(str(session.id)),
        models=models,
        assistant_prefill=config.get("assistantPrefill") is True,
    )


def send_times(snapshots: Sequence[ProjectionSnapshot], think_seconds: float | None) -> list[float]:
    """When each turn is sent, in seconds from the first: every `think_seconds`, or (None)
    as the snapshots were recorded."""
    if think_seconds is not None:
        return paced(len(snapshots), think_seconds)
    if not snapshots:
        return []
    start = snapshots[0].created_at
    return [(s.created_at - start).total_seconds() for s in snapshots]


def recorded_view(snapshot: ProjectionSnapshot, errors: Sequence[str]) -> Projection:
    """The view `snapshot` recorded, as the report reads it (`errors`: the ids of the tool
    calls whose results are errors)."""
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


def session_turns(
    session_id: Any,
    *,
    think_seconds: float | None = DEFAULT_THINK_SECONDS,
    full_history: bool = True,
) -> SessionTurns:
    """Load every stored turn of `session_id` (and the full history's, if asked) in order.

    Three reads: the session, its snapshots, the raw log up to the last turn's bound.
    Raises Session.DoesNotExist for an unknown session.
    """
    session = Session.objects.select_related("agent_version").get(pk=session_id)
    snapshots = list(
        ProjectionSnapshot.objects.filter(session=session).order_by("created_at", "pk")
    )
    views_of(snapshots)
    last = max((s.upper_bound for s in snapshots), default=0)
    log: list[RawMessage] = (
        raw_log.log_page(session.id, window_id=None, after_index=0, limit=last) if last else []
    )
    errors = [
        m.tool_call_id for m in log if m.kind == KIND_TOOL_RESULT and m.is_error and m.tool_call_id
    ]
    sid = str(session.id)
    views: list[ViewTurn] = []
    times = send_times(snapshots, think_seconds)
    for snapshot, sent_at in zip(snapshots, times, strict=True):
        label = str(snapshot.pk)
        tools = tools_from_request(snapshot.provider, snapshot.request or {})
        views.append(
            ViewTurn(recorded_view(snapshot, errors), tools=tools, sent_at=sent_at, label=label)
        )
    naive: list[ViewTurn] = []
    if full_history:
        # The naive agent's turn: the view's system prompt and tools, every raw message.
        shown = [v for v in views if v.projection.messages]
        projections = full_history_projections(
            [(v.projection.messages[0], v.projection.upper_bound) for v in shown],
            log,
            session_id=sid,
        )
        naive = [
            ViewTurn(p, tools=v.tools, sent_at=v.sent_at, label=v.label)
            for p, v in zip(projections, shown, strict=True)
        ]
    return SessionTurns(
        session_id=sid, views=views, full_history=naive, settings=session_settings(session)
    )


def session_cache_economy(
    session_id: Any,
    *,
    think_seconds: float | None = DEFAULT_THINK_SECONDS,
    full_history: bool = True,
    view: str | None = None,
) -> SessionEconomy:
    """The cache economy of a session's views and (by default) of its full history.

    `view` names the report (default: the session's protocol, e.g. `unified@2`).
    """
    turns = session_turns(session_id, think_seconds=think_seconds, full_history=full_history)
    label = tokens.tokenizer_label()
    name = view or (turns.views[0].projection.protocol if turns.views else "")
    return SessionEconomy(
        session_id=turns.session_id,
        view=cache_economy(
            turns.views,
            tokens.count_tokens,
            view=name,
            tokenizer=label,
            settings=turns.settings,
        ),
        full_history=(
            cache_economy(
                turns.full_history,
                tokens.count_tokens,
                view=FULL_HISTORY,
                tokenizer=label,
                settings=turns.settings,
            )
            if full_history
            else None
        ),
    )
