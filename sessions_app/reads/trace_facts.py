"""What a trace says about a session and a turn (contract §22), read from rows.

Reads only, for the paths that record spans (the turns endpoint, MCP, maintenance, the
gateway and the runtime): the session's facts every span carries, a snapshot's usage, and
what the protocol did to its view. Call them only when `telemetry.enabled()`: with tracing
off none of these reads happens.
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any
from uuid import UUID

from agents.models import AgentVersion
from contextproto import telemetry
from contextproto.economics.view_effect import (
    ViewEffect,
    checkpoint_position,
    replaced_ids,
    view_effect,
)
from contextproto.protocol.tokens import message_tokens
from contextproto.telemetry import SessionFacts
from contextproto.telemetry.genai import provider_name
from contextproto.usage import TokenUsage
from sessions_app.models import ProjectionSnapshot, Session
from sessions_app.reads import raw_log


def session_facts(session: Session) -> SessionFacts:
    """The facts of a session whose version (and its agent) are loaded or loadable."""
    version = session.agent_version
    return SessionFacts(
        session_id=str(session.id),
        agent_name=version.agent.name,
        agent_id=str(version.agent_id),
        agent_version_id=str(version.id),
        agent_version=version.number,
        protocol_id=version.context_protocol_id,
        protocol_version=version.context_protocol_version,
        provider=provider_name(version.model_provider),
        model=version.model_name or None,
    )


def session_facts_of(session_id: UUID | str) -> SessionFacts | None:
    """The facts of a session by id (one query); None with tracing off (no query then)."""
    if not telemetry.enabled():
        return None
    return session_facts(Session.objects.select_related("agent_version__agent").get(pk=session_id))


def maintainer_facts(
    session: Session, maintainer: AgentVersion, *, window_id: str
) -> SessionFacts | None:
    """The facts of a maintenance job's model calls: the session's, the maintainer agent's
    name and version (None with tracing off)."""
    if not telemetry.enabled():
        return None
    facts = session_facts(session)
    return replace(
        facts,
        agent_name=maintainer.agent.name,
        agent_id=str(maintainer.agent_id),
        agent_version_id=str(maintainer.id),
        agent_version=maintainer.number,
        provider=provider_name(maintainer.model_provider),
        model=maintainer.model_name or None,
        window_id=window_id,
    )


def turn_facts(facts: SessionFacts, snapshot: ProjectionSnapshot) -> SessionFacts:
    """The session's facts at one turn: its snapshot, window and run, and for a host's model
    the vendor its view was adapted to."""
    at = facts.at(
        snapshot_id=str(snapshot.id),
        window_id=snapshot.window_id,
        run_id=str(snapshot.run_id) if snapshot.run_id is not None else None,
    )
    if at.provider == "_OTHER":
        return replace(at, provider=provider_name(None, snapshot.provider))
    return at


def snapshot_usage(snapshot: ProjectionSnapshot) -> tuple[TokenUsage | None, Decimal | None]:
    """The turn's recorded tokens by kind and cost; (None, None) before its usage is reported."""
    if snapshot.input_tokens is None:
        return None, None
    tokens = TokenUsage(
        input_tokens=snapshot.input_tokens,
        output_tokens=snapshot.output_tokens or 0,
        cache_read_input_tokens=snapshot.cache_read_input_tokens,
        cache_write_input_tokens=snapshot.cache_write_input_tokens,
    )
    return tokens, snapshot.cost


def snapshot_effect(snapshot: ProjectionSnapshot) -> ViewEffect:
    """What the protocol did to the snapshot's view (`economics.view_effect`).

    Reads the view's body, the raw messages behind its folds and masked stubs (their
    tokens: `tokens_saved`) and a count of the window's messages through the bound
    (`covered`): bounded by the view's own range, plus one index count.
    """
    messages: list[dict[str, Any]] = snapshot.messages or []
    sources: list[dict[str, Any]] = snapshot.sources or []
    wanted = replaced_ids(sources)
    raw = raw_log.log_by_ids(snapshot.session_id, wanted) if wanted else []
    return view_effect(
        messages,
        sources,
        upper_bound=snapshot.upper_bound,
        window_id=snapshot.window_id,
        # A view that states "nothing is covered" (C = 0) needs no count.
        window_messages=None
        if checkpoint_position(messages) == 0
        else raw_log.log_window_count(
            snapshot.session_id, snapshot.window_id, 0, snapshot.upper_bound
        ),
        raw_tokens={m.id: message_tokens(m) for m in raw},
    )
