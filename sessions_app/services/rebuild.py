"""Rebuild a recorded turn's view from what the turn read (contract §10, §4.6a).

Every recorded turn (a projection snapshot) froze its revision R, upper bound U, run and
window. Its view is rebuilt by the one view builder (`contextproto/protocol/view.py`) over a
`HistorySource`: the state at R from the KV history (so the folds are those of R, not
today's fold table) and the raw messages through U (archived ones through the merged
reader), under the session's published version, and adapted for the snapshot's wire format
exactly as `projection_build` adapts it. Replay (sessions_app/replay.py) does so under
another protocol version; `snapshot_rebuild` does so for a body retention dropped.

What a view depended on beyond state, log and version (docs/decisions.md "Replay"):
* `TOOL_RESULT_PREVIEW_CHARS` as it was: `build_inputs.toolResultPreviewChars` of the
  snapshot; older snapshots get the current setting, and the turn says so.
* unified@4's `maintenancePending`: `build_inputs.maintenancePending`, or on older unified@4
  snapshots the flag their state message states; a view that never stated it (unified@1-3,
  replayed under unified@4) gets it from the job table (a job of the window created before
  the turn and not finished by then), labelled an estimate.
* a gateway request's forwarded fields: `build_inputs.requestParameters`.
* host tools, system prompt, model config, prompt-cache setting, limits: the published
  version, which never changes; the OpenAI cache key: the session id's.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings

from agents.models import AgentVersion
from agents.selectors import protocol_of, tools_for
from contextproto.protocol import catalog, view
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.messages import (
    DERIVED_STATE,
    KIND_INPUT,
    KIND_TOOL_RESULT,
    Fold,
    RawMessage,
)
from contextproto.protocol.parameters import Parameters
from contextproto.protocol.state import FOLD_PREFIX, KEY_ACTIVE_WINDOW
from contextproto.protocol.view_plan import ReadPlan
from sessions_app.models import KVHistory, MaintenanceJob, ProjectionSnapshot, Session
from sessions_app.reads import raw_log
from sessions_app.reads.history import kv_history_through
from sessions_app.services.projection import (
    view_recipe,
    wire_recipe,
)
from sessions_app.store.snapshot_bodies import request_hash
from sessions_app.store.snapshot_view import REBUILT, SnapshotView

PRESSURE_ESTIMATED = (
    "maintenancePending estimated from the maintenance jobs' times (this view never stated it)"
)


# --------------------------------------------------------------------------- sources


class History:
    """The session's KV history through a revision, answering "the state at R" in memory.

    Per key the newest row with revision <= R, unless it records a removal: the same rule
    as `reads.history.kv_at`, over rows read once.
    """

    def __init__(self, rows: Iterable[KVHistory]) -> None:
        self.revisions: dict[str, list[int]] = defaultdict(list)
        self.rows: dict[str, list[KVHistory]] = defaultdict(list)
        for row in rows:  # by key, then revision
            self.revisions[row.key].append(row.revision)
            self.rows[row.key].append(row)
        # A fold record is written once (context_fold_create): its window never changes, so
        # a turn looks only at its window's folds.
        self.fold_keys: dict[str, list[str]] = defaultdict(list)
        for key in sorted(k for k in self.rows if k.startswith(FOLD_PREFIX)):
            first = self.rows[key][0].value
            if isinstance(first, dict):
                self.fold_keys[str(first.get("windowId"))].append(key)

    def value(self, key: str, revision: int) -> tuple[bool, Any]:
        at = bisect_right(self.revisions.get(key, []), revision)
        if at == 0:
            return False, None
        row = self.rows[key][at - 1]
        return (False, None) if row.deleted else (True, row.value)

    def at(self, revision: int, keys: Iterable[str]) -> dict[str, Any]:
        state = {}
        for key in keys:
            present, value = self.value(key, revision)
            if present:
                state[key] = value
        return state

    def folds(self, revision: int, window_id: str, after_index: int) -> list[Fold]:
        """The window's folds at R whose first index is above `after_index`."""
        found = []
        for key in self.fold_keys.get(window_id, []):
            present, value = self.value(key, revision)
            if (
                present
                and isinstance(value, dict)
                and value.get("windowId") == window_id
                and int(value.get("firstIndex", 0)) > after_index
            ):
                found.append(Fold.from_kv(key.removeprefix(FOLD_PREFIX), value))
        return sorted(found, key=lambda f: f.first_index)


def _errored(messages: Iterable[RawMessage]) -> list[str]:
    return [
        m.tool_call_id
        for m in messages
        if m.kind == KIND_TOOL_RESULT and m.is_error and m.tool_call_id
    ]


class LogReads:
    """The raw log read as one turn needs it (hot and cold merged): a single rebuild."""

    def __init__(self, session_id: Any) -> None:
        self.session_id = session_id
        self.errors: list[str] = []

    def window(self, window_id: str, after_index: int, through_index: int) -> list[RawMessage]:
        return raw_log.log_window(self.session_id, window_id, after_index, through_index)

    def run_inputs(self, run_id: str | None, through_index: int) -> list[RawMessage]:
        if run_id is None:
            return []
        return raw_log.log_run_inputs(self.session_id, run_id, through_index)


class Log:
    """The raw log through the highest bound, by window and by input run, in index order."""

    def __init__(self, messages: Sequence[RawMessage]) -> None:
        self.windows: dict[str, list[RawMessage]] = defaultdict(list)
        self.inputs: dict[str, list[RawMessage]] = defaultdict(list)
        for message in sorted(messages, key=lambda m: m.index):
            self.windows[message.window_id].append(message)
            if message.kind == KIND_INPUT and message.input_run:
                self.inputs[message.input_run].append(message)
        self.window_index = {w: [m.index for m in ms] for w, ms in self.windows.items()}
        self.errors = _errored(messages)

    def window(self, window_id: str, after_index: int, through_index: int) -> list[RawMessage]:
        indices = self.window_index.get(window_id, [])
        lo, hi = bisect_right(indices, after_index), bisect_right(indices, through_index)
        return self.windows[window_id][lo:hi]

    def run_inputs(self, run_id: str | None, through_index: int) -> list[RawMessage]:
        if run_id is None:
            return []
        found = self.inputs.get(run_id, [])
        return found[: bisect_right([m.index for m in found], through_index)]


@dataclass(frozen=True)
class HistorySource:
    """A view's state at revision R and its rows from the log (`view.ViewSource`)."""

    history: History
    log: Log | LogReads
    revision: int

    def kv(self, keys: Sequence[str]) -> dict[str, Any]:
        return self.history.at(self.revision, keys)

    def folds(self, window_id: str, after_index: int) -> list[Fold]:
        return self.history.folds(self.revision, window_id, after_index)

    def rows(self, reads: ReadPlan) -> tuple[list[RawMessage], list[RawMessage]]:
        return (
            self.log.window(reads.window_id, reads.after_index, reads.through_index),
            self.log.run_inputs(reads.run_id, reads.through_index),
        )


# --------------------------------------------------------------------------- build inputs


@dataclass(frozen=True)
class Job:
    window_id: str
    created_at: datetime
    finished_at: datetime | None


def jobs_of(session: Session) -> list[Job]:
    """The session's maintenance jobs' windows and times (for estimated pending flags)."""
    return [
        Job(*row)
        for row in MaintenanceJob.objects.filter(session=session).values_list(
            "window_id", "created_at", "finished_at"
        )
    ]


def _pending_by_jobs(jobs: Sequence[Job], window_id: str, at: datetime) -> bool:
    return any(
        j.window_id == window_id
        and j.created_at <= at
        and (j.finished_at is None or j.finished_at > at)
        for j in jobs
    )


def _pending_stated(messages: Sequence[Mapping[str, Any]]) -> bool | None:
    """`contextPressure.maintenancePending` as a recorded view states it, if it does (a
    unified@4 snapshot written before the flag was recorded in its build inputs)."""
    for message in messages:
        if message.get("kind") != DERIVED_STATE:
            continue
        _, _, body = str(message.get("content", "")).partition("\n")
        try:
            pressure = json.loads(body).get("contextPressure")
        except (ValueError, AttributeError):
            return None
        value = pressure.get("maintenancePending") if isinstance(pressure, dict) else None
        return value if isinstance(value, bool) else None
    return None


def _preview_chars(recorded: Mapping[str, Any], notes: list[str]) -> int:
    """The preview limit the view was built with; today's setting (noted) if not recorded."""
    preview = recorded.get("toolResultPreviewChars")
    if isinstance(preview, int):
        return preview
    notes.append(
        f"toolResultPreviewChars assumed {settings.TOOL_RESULT_PREVIEW_CHARS} (the current "
        "setting; not recorded on this snapshot)"
    )
    return settings.TOOL_RESULT_PREVIEW_CHARS


# --------------------------------------------------------------------------- building


@dataclass
class RebuildContext:
    """What every rebuilt turn of one session shares. `protocol` / `options`: the target to
    rebuild under; None: each turn's recorded protocol and options."""

    session: Session
    history: History
    log: Log | LogReads
    jobs: list[Job] | None
    protocol: catalog.ProtocolVersion | None = None
    options: Mapping[str, Any] | None = None
    tools: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def version(self) -> AgentVersion:
        return self.session.agent_version

    def tools_of(self, protocol: catalog.ProtocolVersion) -> list[dict[str, Any]]:
        if protocol.key not in self.tools:
            self.tools[protocol.key] = tools_for(self.version, protocol)
        return self.tools[protocol.key]

    def pending(
        self,
        snapshot: ProjectionSnapshot,
        window_id: str,
        recorded: Mapping[str, Any],
        notes: list[str],
        *,
        recorded_view: bool,
    ) -> bool:
        """unified@4's maintenancePending at the turn: recorded, else stated by the recorded
        view, else estimated from the job table (noted)."""
        stated = recorded.get("maintenancePending")
        if not isinstance(stated, bool) and recorded_view:
            stated = _pending_stated(snapshot.messages or [])
        if isinstance(stated, bool):
            return stated
        notes.append(PRESSURE_ESTIMATED)
        return _pending_by_jobs(self.jobs or [], window_id, snapshot.created_at)


@dataclass(frozen=True)
class Built:
    view: view.View
    request: dict[str, Any]


def build_turn(
    ctx: RebuildContext,
    snapshot: ProjectionSnapshot,
    notes: list[str],
    *,
    recorded_view: bool = True,
) -> Built | str:
    """The turn's view and request rebuilt under the context's target (or as recorded), or
    why it cannot be. `recorded_view=False`: never read the recorded body (it is what is
    being rebuilt)."""
    if snapshot.revision < ctx.session.kv_history_from:
        return (
            f"revision_not_recorded: the KV history of this session begins at revision "
            f"{ctx.session.kv_history_from}, after this turn's revision {snapshot.revision}"
        )
    if ctx.protocol is not None:
        protocol, options = ctx.protocol, dict(ctx.options or {})
    else:
        found = catalog.by_key(snapshot.protocol)
        if found is None:
            return f"protocol_unknown: {snapshot.protocol} is not in this catalog"
        protocol, options = found, dict(snapshot.options or {})
    recorded = snapshot.build_inputs if isinstance(snapshot.build_inputs, dict) else {}
    source = HistorySource(ctx.history, ctx.log, snapshot.revision)
    plan = view.view_plan(
        protocol,
        active_window=source.kv([KEY_ACTIVE_WINDOW]).get(KEY_ACTIVE_WINDOW),
        run_id=snapshot.run_id.hex if snapshot.run_id else None,
        upper_bound=snapshot.upper_bound,
        revision=snapshot.revision,
    )
    recipe = view_recipe(
        ctx.session,
        protocol,
        options=options,
        preview_chars=_preview_chars(recorded, notes),
        tools=ctx.tools_of(protocol),
    )
    if plan.window_id != snapshot.window_id:
        notes.append(
            f"window {plan.window_id} at revision {snapshot.revision}, the turn recorded "
            f"{snapshot.window_id}"
        )
    pending = protocol.layout.shows_context_pressure and ctx.pending(
        snapshot, plan.window_id, recorded, notes, recorded_view=recorded_view
    )
    forwarded = recorded.get("requestParameters")
    # The gateway request's forwarded fields went with the view (recorded at the turn).
    parameters = Parameters.from_json(forwarded) if isinstance(forwarded, dict) else None
    try:
        built = view.assemble(
            view.freeze(plan, source), source, recipe, maintenance_pending=pending
        )
        adapted = view.request_for(built, wire_recipe(ctx.session, snapshot.provider), parameters)
    except ProtocolError as exc:
        return f"{exc.code}: {exc.message}"
    refusal = built.capacity_refusal()
    if refusal is not None:
        # The runtime would have refused this turn; it is still priced, so both sides
        # cover the same turns, and the row says so.
        notes.append(f"would be refused: {refusal.code} ({refusal.message})")
    return Built(built, adapted.body)


def snapshot_rebuild(snapshot: ProjectionSnapshot) -> SnapshotView:
    """Rebuild a snapshot's body from the state at its R and the log through its U, as
    `projection_build` built it, without reading its stored body (contract §4.6a): for a body
    dropped by retention or never written. Installed as `hooks.snapshot_rebuild`.

    Reads the session, the KV history through R and the turn's rows (hot and cold). Says
    whether the rebuilt request hashes to the value the turn recorded; a turn that cannot be
    rebuilt (its revision is older than the KV history, its protocol left the catalog) gives
    a view with no body and the reason in `problem`.
    """
    session = (
        Session.objects.select_related("agent_version")
        .prefetch_related("agent_version__tools")
        .get(pk=snapshot.session_id)
    )
    recorded = protocol_of(session.agent_version)
    ctx = RebuildContext(
        session=session,
        history=History(kv_history_through(session.id, snapshot.revision)),
        log=LogReads(session.id),
        jobs=jobs_of(session) if recorded.layout.shows_context_pressure else None,
    )
    notes: list[str] = []
    built = build_turn(ctx, snapshot, notes, recorded_view=False)
    if isinstance(built, str):
        return SnapshotView(body={}, origin=REBUILT, problem=built)
    wire = built.view.projection.to_wire()
    body = {"messages": wire["messages"], "sources": wire["sources"], "request": built.request}
    matches = (
        request_hash(built.request) == snapshot.request_hash if snapshot.request_hash else None
    )
    return SnapshotView(body=body, origin=REBUILT, hash_matches=matches, notes=tuple(notes))
