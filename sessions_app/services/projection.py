"""Build, adapt and store the model's view of one turn (SPEC §4).

The state (revision R, upper bound U, KV, folds) is frozen under the session row lock, so it
is one consistent snapshot; messages with index <= U are immutable, so they are read after.
"""

from __future__ import annotations

import json
import math
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from agents.models import AgentVersion
from agents.selectors import effective_options, protocol_of
from contextproto import metrics
from contextproto.errors import (
    CONTEXT_CAPACITY_EXCEEDED,
    PROVIDER_UNKNOWN,
    RUN_NOT_FOUND,
    ApplicationError,
)
from contextproto.ids import canonical_uuid
from contextproto.protocol import adapters, catalog
from contextproto.protocol import projection as engine
from contextproto.protocol.adapters import WireFormat
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.gateway import state as client_state
from contextproto.protocol.gateway.upstream import with_parameters
from contextproto.protocol.gateway.wire import Parameters
from contextproto.protocol.messages import (
    DERIVED_HEADER,
    DERIVED_RAW,
    DERIVED_STATE,
    DERIVED_SYSTEM,
    RawMessage,
)
from contextproto.protocol.prompt_cache import PromptCache, session_cache_key
from contextproto.protocol.state import MAIN_WINDOW, covered_key
from sessions_app.models import MaintenanceJob, ProjectionSnapshot, Run, Session
from sessions_app.providers.base import canonical_json, estimate_tokens
from sessions_app.reads import hot_sql, view_cache
from sessions_app.store.snapshot_bodies import snapshot_create
from sessions_app.store.state import session_lock

# The estimator of estimated usage (providers.base): characters / 4 of the canonical JSON.
CAPACITY_ESTIMATOR = "chars/4"


def tools_for(version: AgentVersion, protocol: catalog.ProtocolVersion) -> list[dict[str, Any]]:
    """Protocol tool schemas of the version's protocol, then the version's host tools by name.

    The order is fixed (a many-to-many read has none): tools are the start of every
    provider request, so a reordering would re-bill the whole prompt cache (SPEC §15).
    Sorted in Python, so a prefetched relation costs no query.
    """
    return list(protocol.tools.values()) + _host_tools(version)


# Host tools of published (and archived) versions, which never change: a version's tools
# cannot be rebound once published, and a tool a published version binds cannot be edited
# (409 tool_in_use). Bounded like any per-process cache.
_FROZEN_TOOLS: dict[UUID, list[dict[str, Any]]] = {}
FROZEN_TOOLS_MAX = 1024


def _host_tools(version: AgentVersion) -> list[dict[str, Any]]:
    frozen = version.status != AgentVersion.Status.DRAFT
    if frozen and version.pk in _FROZEN_TOOLS:
        return [dict(t) for t in _FROZEN_TOOLS[version.pk]]
    host = [
        {"name": t.name, "description": t.description, "inputSchema": t.input_schema}
        for t in sorted(version.tools.all(), key=lambda t: t.name)
    ]
    if frozen:
        if len(_FROZEN_TOOLS) >= FROZEN_TOOLS_MAX:
            _FROZEN_TOOLS.clear()
        _FROZEN_TOOLS[version.pk] = host
    return [dict(t) for t in host]


def client_tool_values(session_id: UUID, kv: dict[str, Any]) -> dict[str, Any]:
    """`kv` (holding `gateway/tools`) with the definitions of the tools it names: one more
    read, only for a session a gateway client declared tools on."""
    names = client_state.tool_names(kv)
    if not names:
        return kv
    return {**kv, **hot_sql.kv_values(session_id, [client_state.tool_key(n) for n in names])}


@metrics.timed(metrics.PROJECTION_SECONDS)
def projection_build(
    *,
    session_id: UUID | str,
    provider: str = WireFormat.NEUTRAL,
    run_id: str | None = None,
    use_cache: bool = True,
    parameters: Parameters | None = None,
) -> ProjectionSnapshot:
    """Freeze the turn, project, adapt for `provider` and store the snapshot.

    A gateway request's forwarded fields (`parameters`) are merged into the request, and
    recorded in the snapshot's build inputs; such a view is never served from the cache.

    Refuses with `provider_unknown`, `run_not_found` or the engine's pairing error (400),
    and with 422 `context_capacity_exceeded` when the protected part alone is above the
    version's `maxInputTokens` (SPEC §6); a refusal stores nothing.
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
    with transaction.atomic():
        session = session_lock(session_id)
        version = session.agent_version
        protocol = protocol_of(version)
        run_uuid = _run_for(session, run_id)
        run_hex = run_uuid.hex if run_uuid else None
        upper_bound = session.last_index
        window_id = session.active_window if protocol.windowed else MAIN_WINDOW
        pressure = engine.shows_context_pressure(protocol.protocol_id, protocol.version)
        pending = _maintenance_pending(session, window_id) if pressure else False
        if use_cache and not forwarded:
            candidates = ProjectionSnapshot.objects.filter(
                # the same run, or none (run_id=None is IS NULL, spelled so for the stubs)
                Q(run_id=run_uuid) if run_uuid is not None else Q(run_id__isnull=True),
                session=session,
                revision=session.state_revision,
                upper_bound=upper_bound,
                provider=provider,
                protocol=protocol.key,
            )
            if pressure:
                cached = candidates.order_by("-created_at").first()
                if cached is not None and _pending_shown(cached) != pending:
                    cached = None  # a job was queued or finished since: build the view anew
            else:
                cached = candidates.first()
            if cached is not None:
                return cached
        keys = list(engine.kv_keys_for_view(protocol.protocol_id, window_id))
        if covered_key(window_id) not in keys:
            keys.append(covered_key(window_id))
        kv = client_tool_values(session.id, hot_sql.kv_values(session.id, keys))
        covered = int(kv.get(covered_key(window_id), 0) or 0)
        plan = engine.plan_reads(
            protocol_id=protocol.protocol_id,
            active_window=window_id,
            covered_through=covered,
            run_id=run_hex,
            upper_bound=upper_bound,
        )
        folds = (
            hot_sql.folds_of_window_above(session.id, plan.folds_window, plan.folds_after_index)
            if plan.folds_window
            else []
        )
        revision = session.state_revision
    window_messages, run_inputs = _view_rows(session.id, plan)
    tools = client_state.merged_tools(tools_for(version, protocol), client_state.client_tools(kv))
    try:
        projection = engine.project(
            engine.ProjectionInput(
                protocol_id=protocol.protocol_id,
                version=protocol.version,
                options=effective_options(version, protocol),
                system_prompt=version.system_prompt,
                protocol_prompt=protocol.prompt,
                session_id=str(session.id),
                session_inputs=session.inputs,
                run_id=run_hex,
                upper_bound=upper_bound,
                revision=revision,
                kv=kv,
                window_messages=window_messages,
                run_inputs=run_inputs,
                folds=folds,
                tool_result_preview_chars=settings.TOOL_RESULT_PREVIEW_CHARS,
                max_input_tokens=version.max_input_tokens or None,
                trigger_tokens=trigger_tokens(version),
                maintenance_pending=pending,
                tool_tokens=estimate_tokens(canonical_json(tools)) if tools else 0,
            )
        )
        capacity_check(version, projection, run_inputs, tools)
        adapted = adapters.adapt(
            projection,
            provider,
            tools,
            assistant_prefill=_assistant_prefill(version),
            prompt_cache=PromptCache.from_config(version.prompt_cache),
            cache_key=session_cache_key(str(session.id)),
        )
    except ProtocolError as exc:
        raise ApplicationError.from_protocol(exc) from exc
    request = adapted.body
    if parameters is not None and forwarded:
        request = with_parameters(
            request, provider, parameters, max_tokens_key=max_tokens_key(version)
        )
    wire = projection.to_wire()
    # What the view depended on beyond the state at R, the raw log and the published
    # (immutable) version, so a replay can rebuild it exactly (sessions_app/replay.py).
    build_inputs: dict[str, Any] = {"toolResultPreviewChars": settings.TOOL_RESULT_PREVIEW_CHARS}
    if pressure:
        build_inputs["maintenancePending"] = pending
    if forwarded:
        build_inputs["requestParameters"] = forwarded
    return snapshot_create(
        session=session,
        run_id=run_uuid,
        revision=revision,
        upper_bound=upper_bound,
        window_id=projection.window_id,
        protocol=protocol.key,
        options=projection.options,
        provider=provider,
        body={"messages": wire["messages"], "sources": wire["sources"], "request": request},
        notes=list(adapted.notes),
        build_inputs=build_inputs,
    )


def trigger_tokens(version: AgentVersion) -> int | None:
    """The fewest reported input tokens that queue maintenance (SPEC §6), or None."""
    if not version.max_input_tokens or not version.maintenance_trigger_ratio:
        return None
    return math.ceil(version.maintenance_trigger_ratio * version.max_input_tokens)


def _maintenance_pending(session: Session, window_id: str) -> bool:
    return MaintenanceJob.objects.filter(
        session=session, window_id=window_id, status__in=MaintenanceJob.ACTIVE_STATUSES
    ).exists()


def _pending_shown(snapshot: ProjectionSnapshot) -> bool | None:
    """`contextPressure.maintenancePending` as a stored view states it (None if it does not)."""
    for message in snapshot.messages or []:
        if message.get("kind") != DERIVED_STATE:
            continue
        _, _, body = str(message.get("content", "")).partition("\n")
        try:
            pressure = json.loads(body).get("contextPressure")
        except (ValueError, AttributeError):
            return None
        return pressure.get("maintenancePending") if isinstance(pressure, dict) else None
    return None


def capacity_check(
    version: AgentVersion,
    projection: engine.Projection,
    run_inputs: list[RawMessage],
    tools: list[dict[str, Any]],
) -> None:
    """Refuse (422 `context_capacity_exceeded`) a view whose protected part exceeds the limit.

    The protected part is what neither folds nor compression can shrink: the system prompt,
    the context header (inputs, task memory, window record, checkpoint), this run's inputs
    and the tool schemas. Each is measured as it is projected, with the estimator of
    estimated usage, so the sizes in the error add up to the total compared. unified@4 moved
    the window's working memory and outcomes from the header into the state message, so
    there the state message counts as header.
    """
    protocol_id, _, number = projection.protocol.partition("@")
    state_is_header = engine.shows_context_pressure(protocol_id, int(number))
    limit = version.max_input_tokens
    if not limit:
        return
    protected = {m.id for m in run_inputs}
    sizes = {"system": 0, "header": 0, "runInputs": 0}
    for message, source in zip(projection.messages, projection.sources, strict=True):
        if source.derived_type == DERIVED_SYSTEM:
            part = "system"
        elif source.derived_type == DERIVED_HEADER or (
            state_is_header and source.derived_type == DERIVED_STATE
        ):
            part = "header"
        elif source.derived_type == DERIVED_RAW and protected.intersection(source.message_ids):
            part = "runInputs"
        else:
            continue
        sizes[part] += estimate_tokens(canonical_json(message.content))
    sizes["toolSchemas"] = estimate_tokens(canonical_json(tools)) if tools else 0
    total = sum(sizes.values())
    if total <= limit:
        return
    raise ApplicationError(
        CONTEXT_CAPACITY_EXCEEDED,
        f"The part of the view that folds and compression cannot shrink needs about {total} "
        f"tokens (system {sizes['system']}, header {sizes['header']}, this run's inputs "
        f"{sizes['runInputs']}, tool schemas {sizes['toolSchemas']}; {CAPACITY_ESTIMATOR} "
        f"estimate), above maxInputTokens {limit}. Send a shorter input, shorten the task "
        "memory or the system prompt, or use a model with a larger window.",
        {**sizes, "total": total, "limit": limit, "estimator": CAPACITY_ESTIMATOR},
    )


def max_tokens_key(version: AgentVersion) -> str:
    """The OpenAI field that caps an answer: `max_completion_tokens`, or `max_tokens` for older
    compatible servers (model config `maxTokensParam`)."""
    config = version.model_config
    key = config.get("maxTokensParam") if isinstance(config, dict) else None
    return key if key in ("max_tokens", "max_completion_tokens") else "max_completion_tokens"


def _assistant_prefill(version: AgentVersion) -> bool:
    # A model config may say the model accepts an assistant prefill (docs/decisions.md).
    config = version.model_config
    return isinstance(config, dict) and config.get("assistantPrefill") is True


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


def _view_rows(
    session_id: UUID, plan: engine.ReadPlan
) -> tuple[list[RawMessage], list[RawMessage]]:
    """The window's rows and the run's inputs: the rows this process read before for the
    window and the new ones, in one statement while nothing in range is archived, else the
    readers that merge the cold archive (sessions_app/reads/view_cache.py)."""
    return view_cache.view_rows(
        session_id, plan.window_id, plan.after_index, plan.through_index, plan.run_id
    )


def snapshot_to_wire(snapshot: ProjectionSnapshot, *, provenance: bool = False) -> dict[str, Any]:
    """The API's Snapshot shape; `provenance` adds how the body was obtained (SPEC §20):
    `body` "stored" or "rebuilt", and for a rebuilt one `bodyHashMatches` (and, when it
    could not be rebuilt, `bodyProblem`)."""
    view = snapshot.view
    wire = {
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
    if provenance:
        wire["body"] = view.origin
        if view.rebuilt:
            wire["bodyHashMatches"] = view.hash_matches
            if view.problem is not None:
                wire["bodyProblem"] = view.problem
    return wire
