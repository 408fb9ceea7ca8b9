"""The run timeline page: a run's turns, model calls and dispatches (reads in `turns`)."""

from __future__ import annotations

from uuid import UUID

from django.http import Http404, HttpRequest
from django.template.response import TemplateResponse

from sessions_app.admin_views.browser import BrowserPages, Route
from sessions_app.admin_views.common import limit_param, query, url
from sessions_app.admin_views.turns import (
    TIMELINE_MESSAGES,
    TIMELINE_TURNS,
    latest_projection_at,
    live_context,
    run_is_live,
    run_timeline,
    timeline_cost,
    timeline_cursor,
)
from sessions_app.models import Run


class TimelinePages(BrowserPages):
    """The run timeline page, mounted beside the session browser's other pages."""

    def routes(self) -> list[Route]:
        return [("runs/<uuid:run_id>/", self.run_timeline, "run")]

    def run_timeline(
        self, request: HttpRequest, session_id: UUID, run_id: UUID
    ) -> TemplateResponse:
        session = self.session_for(request, session_id)
        run = Run.objects.filter(session=session, pk=run_id).first()
        if run is None:
            raise Http404("No such run in this session.")
        timeline = run_timeline(
            session,
            run,
            after=timeline_cursor(request),
            limit=limit_param(request, TIMELINE_TURNS),
        )
        return self.render(
            request,
            session,
            "run_timeline",
            f"Run {run.id.hex}",
            tab="overview",
            timeline=timeline,
            cost=timeline_cost(timeline),
            message_cap=TIMELINE_MESSAGES,
            messages_url=url("messages", session) + f"?run={run.id.hex}",
            next_url=query(request, after=timeline.next_cursor) if timeline.next_cursor else None,
            first_url=query(request, after=None) if request.GET.get("after") else None,
            **live_context(run_is_live(run, latest_projection=latest_projection_at(session))),
        )
