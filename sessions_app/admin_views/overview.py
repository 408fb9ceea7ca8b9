"""The session browser's overview and windows pages: the session at a glance (active
window, revision, task memory, runs, usage, forks) and its windows with their counts."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.db.models import Max, Q
from django.http import HttpRequest
from django.template.response import TemplateResponse

from contextproto.protocol.state import (
    KEY_ACTIVE_WINDOW,
    KEY_CURRENT_WINDOW_ENTRY,
    KEY_TASK_MEMORY,
    checkpoint_key,
    covered_key,
    window_key,
)
from sessions_app.admin_views import presenters, turns
from sessions_app.admin_views.browser import BrowserPages, Route
from sessions_app.admin_views.common import SNAPSHOT_HEAVY_FIELDS, pretty, url
from sessions_app.admin_views.reads import chart_data, record_counts, windows_table
from sessions_app.models import (
    ArchiveChunk,
    GatewayConversation,
    GatewayExchange,
    MaintenanceJob,
    ProjectionSnapshot,
    Run,
    Session,
)
from sessions_app.reads.raw_log import kv_values
from sessions_app.reads.usage import run_usage, session_side_usage, session_usage

FORKS_LISTED = 20
CHILDREN_LISTED = 50
SIDE_LISTED = 10


class OverviewPages(BrowserPages):
    """Overview and windows of one session."""

    def routes(self) -> list[Route]:
        return [
            ("", self.overview, "overview"),
            ("windows/", self.windows, "windows"),
        ]

    def overview(self, request: HttpRequest, session_id: UUID) -> TemplateResponse:
        session = self.session_for(request, session_id)
        active = session.active_window
        kv = kv_values(
            session.id,
            [
                KEY_ACTIVE_WINDOW,
                KEY_TASK_MEMORY,
                KEY_CURRENT_WINDOW_ENTRY,
                window_key(active),
                checkpoint_key(active),
                covered_key(active),
            ],
        )
        runs = list(Run.objects.filter(session=session).order_by("-created_at")[:20])
        window_count, fold_count = record_counts(session)
        by_run = run_usage([run.id for run in runs], session.agent_version.prices)
        snapshots = list(
            ProjectionSnapshot.objects.filter(session=session)
            .defer(*SNAPSHOT_HEAVY_FIELDS)
            .order_by("-created_at", "-pk")[:5]
        )
        jobs = list(
            MaintenanceJob.objects.filter(
                session=session, status__in=MaintenanceJob.ACTIVE_STATUSES
            ).order_by("created_at")
        )
        gateway = _gateway_context(session) if session.via_gateway else {}
        forks = list(
            Session.objects.filter(forked_from=session)
            .order_by("-created_at", "-pk")
            .only("id", "forked_through_index", "forked_revision", "created_at")[:FORKS_LISTED]
        )
        return self.render(
            request,
            session,
            "overview",
            "Session overview",
            forked_from=_fork_origin(session),
            forks=[(fork, url("overview", fork.pk)) for fork in forks],
            forks_listed=FORKS_LISTED,
            active_window=active,
            window_record=kv.get(window_key(active)) or {},
            window_record_json=pretty(kv.get(window_key(active)) or {}),
            checkpoint=str(kv.get(checkpoint_key(active)) or ""),
            covered_through=int(kv.get(covered_key(active)) or 0),
            task_memory=str(kv.get(KEY_TASK_MEMORY) or ""),
            window_entry=pretty(kv[KEY_CURRENT_WINDOW_ENTRY])
            if KEY_CURRENT_WINDOW_ENTRY in kv
            else None,
            runs=[(run, by_run.get(run.id)) for run in runs],
            gateway_run=next((run for run in runs if run.via_gateway), None),
            gateway_api=presenters.client_api_title(
                next((run.client_api for run in runs if run.via_gateway), "")
            ),
            usage=session_usage(session),
            window_count=window_count,
            fold_count=fold_count,
            snapshots=snapshots,
            active_jobs=jobs,
            chart=presenters.chart(session, chart_data(session)),
            inputs_json=pretty(session.inputs),
            **gateway,
            **turns.live_context(
                turns.run_is_live(
                    session.current_run,
                    latest_projection=snapshots[0].created_at if snapshots else None,
                )
            ),
        )

    def windows(self, request: HttpRequest, session_id: UUID) -> TemplateResponse:
        session = self.session_for(request, session_id)
        rows = windows_table(session)
        archived = ArchiveChunk.objects.filter(session=session).aggregate(b=Max("last_index"))
        return self.render(
            request,
            session,
            "windows",
            "Windows",
            rows=rows,
            archived_through=archived["b"] or 0,
            messages_url=url("messages", session),
            folds_url=url("folds", session),
        )


def _gateway_context(session: Session) -> dict[str, Any]:
    """What a gateway session's overview adds (SPEC §19.1): the conversation id that names it
    and its parent (a sub-agent's session), its sub-agents' child sessions, and its side
    requests priced apart. Three queries, none growing with the session."""
    rows = list(
        GatewayConversation.objects.filter(Q(session=session) | Q(parent=session))
        .order_by("created_at", "pk")
        .values("conversation_id", "agent_id", "session_id", "parent_id")[: CHILDREN_LISTED + 1]
    )
    own = next((r for r in rows if r["session_id"] == session.pk), None)
    children = [r for r in rows if r["parent_id"] == session.pk and r["session_id"] != session.pk]
    side = list(
        GatewayExchange.objects.filter(session=session, side=True)
        .order_by("-created_at")
        .values("created_at", "input_tokens", "output_tokens", "cost", "user_agent")[:SIDE_LISTED]
    )
    return {
        "conversation": own,
        "conversation_parent_url": url("overview", own["parent_id"])
        if own and own["parent_id"] is not None
        else None,
        "child_sessions": [(r, url("overview", r["session_id"])) for r in children],
        "side_exchanges": side,
        "side_usage": session_side_usage(session) if side else None,
    }


def _fork_origin(session: Session) -> dict[str, Any] | None:
    """Where a forked session came from, with links into the original (no query)."""
    if session.forked_from_id is None:
        return None
    bound = int(session.forked_through_index or 0)
    return {
        "session_id": session.forked_from_id,
        "through_index": bound,
        "revision": session.forked_revision,
        "url": url("overview", session.forked_from_id),
        "messages_url": url("messages", session.forked_from_id) + f"?before={bound + 1}",
        "state_url": url("kv", session.forked_from_id) + f"?revision={session.forked_revision}",
    }
