"""Build, adapt and store the model's view of one turn (contract §4).

The state (revision R, upper bound U, KV, folds) is frozen under the session row lock, so it
is one consistent snapshot; messages with index <= U are immutable, so they are read after.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict, overload
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from agents.models import AgentVersion
from agents.selectors import effective_options, protocol_of, tools_for
from contextproto import metrics
from contextproto.errors import (
    PROVIDER_UNKNOWN,
    RUN_NOT_FOUND,
    ApplicationError,
)
from contextproto.ids import canonical_uuid
from contextproto.protocol import adapters, catalog, view
from contextproto.protocol.adapters import WireFormat
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.messages import Fold, ModelMessageWire, RawMessage, SourceWire
from contextproto.protocol.parameters import Parameters
from contextproto.protocol.prompt_cache import PromptCache, session_cache_key
from contextproto.protocol.view_plan import ReadPlan
from sessions_app.models import MaintenanceJob, ProjectionSnapshot, Run, Session
from sessions_app.reads import hot_sql, view_cache
from sessions_app.store.body_writer import snapshot_create, snapshot_row_create
from sessions_app.store.state import session_lock


class LiveSource:
    """A view's state and rows from the live database (`view.ViewSource`): call `kv` and
    `folds` under the session lock; `rows` (at or below the frozen bound, immutable) after."""

    def __init__(self, session_id: UUID) -> None:
        self.session_id = session_id

    def kv(self, keys: Sequence[str]) -> dict[str, Any]:
        return hot_sql.kv_values(self.session_id, keys)

    def folds(self, window_id: str, after_index: int) -> list[Fold]:
        return hot_sql.folds_of_window_above(self.session_id, window_id, after_index)

    def rows(self, reads: ReadPlan) -> tuple[list[RawMessage], list[RawMessage]]:
        """The rows this process read before for the window and the new ones, in one
        statement while nothing in range is archived, else the readers that merge the cold
        archive (sessions_app/reads/view_cache.py)."""
        return view_cache.view_rows(
            self.session_id, reads.window_id, reads.after_index, reads.through_index, reads.run_id
        )


def view_recipe(
    session: Session,
    protocol: catalog.ProtocolVersion,
    *,
    options: Mapping[str, Any] | None = None,
    preview_chars: int | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> view.ViewRecipe:
    """What the session's published version fixes about a view of `protocol`: its options
    (the version's own unless a replay names others), prompt, tools and limits. A replay
    passes the tools it already listed for `protocol`."""
    version = session.agent_version
    return view.ViewRecipe(
        options=effective_options(version, protocol) if options is None else options,
        tools=tools_for(version, protocol) if tools is None else tools,
        system_prompt=version.system_prompt,
        session_id=str(session.id),
        session_inputs=session.inputs,
        tool_result_preview_chars=(
            settings.TOOL_RESULT_PREVIEW_CHARS if preview_chars is None else preview_chars
        ),
        max_input_tokens=version.max_input_tokens or None,
        trigger_tokens=trigger_tokens(version),
    )


def wire_recipe(session: Session, provider: str) -> view.WireRecipe:
    """How the session's view travels to `provider`, as its version's model config says."""
    version = session.agent_version
    config = version.model_config if isinstance(version.model_config, dict) else {}
    return view.WireRecipe(
        provider=provider,
        max_tokens_key=max_tokens_key(version),
        # A model config may say the model accepts an assistant prefill (docs/decisions.md).
        assistant_prefill=config.get("assistantPrefill") is True,
        prompt_cache=PromptCache.from_config(version.prompt_cache),
        cache_key=session_cache_key(str(session.id)),
    )


@metrics.timed(metrics.PROJECTION_SECONDS)
def projection_build(
    *,
    session_id: UUID | str,
    provider: str = WireFormat.NEUTRAL,
    run_id: str | None = None,
    use_cache: bool = True,
    parameters: Parameters | None = None,
    locked: Session | None = None,
    body_later: bool = False,
) -> ProjectionSnapshot:
    """Freeze the turn, project, adapt for `provider` and store the snapshot.

    `body_later`: store the row only (its view in memory); the caller writes the body in a
    later commit of its turn (`body_pending`, then `body_store`), and until then every reader
    rebuilds it (a turn that commits before and after its model call).

    `locked`: the session, locked by the caller inside its transaction (a gateway request
    builds its first view in the commit that writes its input), which the caller rolls back
    whole on a refusal; else it is locked here.

    A gateway request's forwarded fields (`parameters`) are merged into the request, and
    recorded in the snapshot's build inputs; such a view is never served from the cache.

    Refuses with `provider_unknown`, `run_not_found` or the engine's pairing error (400),
    and with 422 `context_capacity_exceeded` when the protected part alone is above the
    version's `maxInputTokens` (contract §6); a refusal stores nothing.
    Query count does not depend on the session's size.

    A view with context pressure (unified@4) also states whether a maintenance job of the
    window is pending, which can change without a new revision or message: the cache serves
    such a view only while that flag still holds (docs/decisions.md).
    """
    forwarded = parameters.to_json() if parameters is not None else {}
    if provider not in adapters.PROVIDERS:
        raise ApplicationError(
            PROVIDER_UNKNOWN,
            f"provider must be one of {', '.join(adapters.PROVIDERS)}.",
            {"provider": provider},
        )
    # A caller that holds the lock rolls its whole transaction back on a refusal: no
    # savepoint (two round trips) for a part that cannot fail alone.
    with transaction.atomic(savepoint=locked is None):
        session = locked if locked is not None else session_lock(session_id)
        protocol = protocol_of(session.agent_version)
        run_uuid = _run_for(session, run_id)
        plan = view.view_plan(
            protocol,
            active_window=session.active_window,
            run_id=run_uuid.hex if run_uuid else None,
            upper_bound=session.last_index,
            revision=session.state_revision,
        )
        pressure = protocol.layout.shows_context_pressure
        pending = _maintenance_pending(session, plan.window_id) if pressure else False
        if use_cache and not forwarded:
            cached = _cached_view(session, run_uuid, protocol, provider, pending=pending)
            if cached is not None:
                return cached
        source = LiveSource(session.id)
        frozen = view.freeze(plan, source)
    try:
        recipe, travel = view_recipe(session, protocol), wire_recipe(session, provider)
        built, adapted = view.build(
            frozen, source, recipe, travel, parameters, maintenance_pending=pending
        )
    except ProtocolError as exc:
        raise ApplicationError.from_protocol(exc) from exc
    projection = built.projection
    wire = projection.to_wire()
    # What the view depended on beyond the state at R, the raw log and the published
    # (immutable) version, so a replay can rebuild it exactly (sessions_app/services/rebuild.py).
    build_inputs: dict[str, Any] = {"toolResultPreviewChars": settings.TOOL_RESULT_PREVIEW_CHARS}
    if pressure:
        build_inputs["maintenancePending"] = pending
    if forwarded:
        build_inputs["requestParameters"] = forwarded
    return (snapshot_row_create if body_later else snapshot_create)(
        session=session,
        run_id=run_uuid,
        revision=plan.revision,
        upper_bound=plan.upper_bound,
        window_id=projection.window_id,
        protocol=protocol.key,
        options=projection.options,
        provider=provider,
        body={"messages": wire["messages"], "sources": wire["sources"], "request": adapted.body},
        notes=list(adapted.notes),
        build_inputs=build_inputs,
    )


def _cached_view(
    session: Session,
    run_uuid: UUID | None,
    protocol: catalog.ProtocolVersion,
    provider: str,
    *,
    pending: bool,
) -> ProjectionSnapshot | None:
    """The stored view of this turn (same R, U, run, wire format and protocol), if any; for
    a context-pressure layout only one that states the same `maintenancePending`."""
    candidates = ProjectionSnapshot.objects.filter(
        # the same run, or none (run_id=None is IS NULL, spelled so for the stubs)
        Q(run_id=run_uuid) if run_uuid is not None else Q(run_id__isnull=True),
        session=session,
        revision=session.state_revision,
        upper_bound=session.last_index,
        provider=provider,
        protocol=protocol.key,
    )
    if not protocol.layout.shows_context_pressure:
        return candidates.first()
    cached = candidates.order_by("-created_at").first()
    if cached is None:
        return None
    inputs = cached.build_inputs if isinstance(cached.build_inputs, dict) else {}
    # A job was queued or finished since (or the view predates the recorded flag): build anew.
    return cached if inputs.get("maintenancePending") is pending else None


def trigger_tokens(version: AgentVersion) -> int | None:
    """The fewest reported input tokens that queue maintenance (contract §6), or None."""
    if not version.max_input_tokens or not version.maintenance_trigger_ratio:
        return None
    return math.ceil(version.maintenance_trigger_ratio * version.max_input_tokens)


def _maintenance_pending(session: Session, window_id: str) -> bool:
    return MaintenanceJob.objects.filter(
        session=session, window_id=window_id, status__in=MaintenanceJob.ACTIVE_STATUSES
    ).exists()


def max_tokens_key(version: AgentVersion) -> str:
    """The OpenAI field that caps an answer: `max_completion_tokens`, or `max_tokens` for older
    compatible servers (model config `maxTokensParam`)."""
    config = version.model_config
    key = config.get("maxTokensParam") if isinstance(config, dict) else None
    return key if key in ("max_tokens", "max_completion_tokens") else "max_completion_tokens"


def _run_for(session: Session, run_id: str | None) -> UUID | None:
    """The RunId the view is built for: `run_id` if it names a run of the session, else the
    session's current run (no row read: only the id is needed)."""
    if run_id is None:
        return session.current_run_id
    run_uuid = canonical_uuid(run_id)
    if run_uuid is not None and run_uuid == session.current_run_id:
        return run_uuid  # the session's own current run: no read needed
    if run_uuid is None or not Run.objects.filter(session=session, id=run_uuid).exists():
        raise ApplicationError(RUN_NOT_FOUND, "runId is not a RunId of this session.")
    return run_uuid


class SnapshotWire(TypedDict):
    """A stored view as the API lists it (contract §12.1): `sources[i]` belongs to `messages[i]`."""

    snapshotId: str
    revision: int
    upperBound: int
    runId: str | None
    windowId: str
    protocol: str
    provider: str
    messages: list[ModelMessageWire]
    sources: list[SourceWire]
    request: dict[str, Any]
    notes: list[str]
    usage: dict[str, Any] | None
    createdAt: str


class _RebuiltBody(TypedDict, total=False):
    bodyHashMatches: bool | None  # only on a rebuilt body
    bodyProblem: str  # only on a body that could not be rebuilt


class SnapshotDetailWire(SnapshotWire, _RebuiltBody):
    """One snapshot with how its body was obtained (contract §4.6a)."""

    body: str  # "stored" or "rebuilt"


@overload
def snapshot_to_wire(
    snapshot: ProjectionSnapshot, *, provenance: Literal[False] = False
) -> SnapshotWire: ...
@overload
def snapshot_to_wire(
    snapshot: ProjectionSnapshot, *, provenance: Literal[True]
) -> SnapshotDetailWire: ...
def snapshot_to_wire(
    snapshot: ProjectionSnapshot, *, provenance: bool = False
) -> SnapshotWire | SnapshotDetailWire:
    """The API's Snapshot shape; `provenance` adds how the body was obtained (contract §4.6a):
    `body` "stored" or "rebuilt", and for a rebuilt one `bodyHashMatches` (and, when it
    could not be rebuilt, `bodyProblem`)."""
    view = snapshot.view
    wire: SnapshotWire = {
        "snapshotId": str(snapshot.id),
        "revision": snapshot.revision,
        "upperBound": snapshot.upper_bound,
        "runId": snapshot.run_id.hex if snapshot.run_id else None,
        "windowId": snapshot.window_id,
        "protocol": snapshot.protocol,
        "provider": snapshot.provider,
        "messages": snapshot.messages,
        "sources": snapshot.sources,
        "request": snapshot.request,
        "notes": snapshot.notes,
        "usage": snapshot.usage,
        "createdAt": snapshot.created_at.isoformat(),
    }
    if not provenance:
        return wire
    rebuilt: _RebuiltBody = {}
    if view.rebuilt:
        rebuilt["bodyHashMatches"] = view.hash_matches
        if view.problem is not None:
            rebuilt["bodyProblem"] = view.problem
    return {**wire, "body": view.origin, **rebuilt}
