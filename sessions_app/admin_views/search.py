"""Console search (issue 27): sessions by id prefix and filters; text within one session.

Mounted by SessionAdmin.get_urls: `search/` (sessions) and `<session_id>/browse/search/`
(the session browser's Search tab). A parameter the page cannot use answers 400 with the
form and a message naming the field and what to fix, never a 500. Reads are in
sessions_app.reads.search; both pages issue a fixed number of queries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast
from uuid import UUID

from django import forms
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import path

from agents.models import Agent, AgentVersion, Application
from contextproto.admin_site import scope_to_member
from sessions_app.admin_views.browser import BrowserPages
from sessions_app.admin_views.common import int_param, query, url
from sessions_app.admin_views.reads import keyset_by_time
from sessions_app.reads.search import (
    QUERY_MAX_CHARS,
    STATUS_CHOICES,
    SearchInputError,
    SessionFilters,
    check_text_query,
    id_prefix_range,
    message_search,
    session_search,
)

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

SESSIONS_PER_PAGE = 50
CHOICES_LISTED = 500  # the filter drop-downs list at most this many rows each


class SessionSearchForm(forms.Form):
    id = forms.CharField(
        required=False, max_length=36, label="Id prefix", help_text="hex digits, dashes allowed"
    )
    application = forms.TypedChoiceField(required=False, coerce=UUID, empty_value=None)
    agent = forms.TypedChoiceField(required=False, coerce=UUID, empty_value=None)
    version = forms.TypedChoiceField(required=False, coerce=UUID, empty_value=None)
    status = forms.ChoiceField(
        required=False, choices=[("", "any"), *STATUS_CHOICES], label="Current run"
    )
    created_from = forms.DateField(required=False, label="Started from", help_text="YYYY-MM-DD")
    created_to = forms.DateField(required=False, label="to (inclusive)", help_text="YYYY-MM-DD")
    window = forms.CharField(required=False, max_length=64, label="Active window")

    def __init__(self, data: Any, *, request: HttpRequest) -> None:
        super().__init__(data)
        # Three bounded queries, each scoped to the user's Applications.
        apps = scope_to_member(Application.objects.order_by("name"), request, "")
        agents = scope_to_member(
            Agent.objects.select_related("application").order_by("application__name", "name"),
            request,
            "application",
        )
        versions = scope_to_member(
            AgentVersion.objects.select_related("agent").order_by("agent__name", "-number"),
            request,
            "agent__application",
        )
        cast(forms.ChoiceField, self.fields["application"]).choices = [("", "any")] + [
            (str(a.pk), a.name) for a in apps[:CHOICES_LISTED]
        ]
        cast(forms.ChoiceField, self.fields["agent"]).choices = [("", "any")] + [
            (str(a.pk), f"{a.application.name} / {a.name}") for a in agents[:CHOICES_LISTED]
        ]
        cast(forms.ChoiceField, self.fields["version"]).choices = [("", "any")] + [
            (str(v.pk), f"{v.agent.name} v{v.number}") for v in versions[:CHOICES_LISTED]
        ]

    def clean_id(self) -> str:
        raw = self.cleaned_data["id"]
        if raw.strip():
            try:
                id_prefix_range(raw)
            except SearchInputError as exc:
                raise forms.ValidationError(exc.message) from exc
        return raw.strip()

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        start, end = cleaned.get("created_from"), cleaned.get("created_to")
        if start and end and start > end:
            self.add_error("created_to", "The end date is before the start date.")
        return cleaned

    def filters(self) -> SessionFilters:
        data = self.cleaned_data
        return SessionFilters(
            id_prefix=data["id"],
            application=data["application"],
            agent=data["agent"],
            version=data["version"],
            status=data["status"],
            created_from=data["created_from"],
            created_to=data["created_to"],
            active_window=data["window"].strip(),
        )


class SearchPages:
    """Session search and the in-session message search (see the module docstring)."""

    def __init__(self, model_admin: ModelAdmin) -> None:
        self.model_admin = model_admin
        self.admin_site = model_admin.admin_site
        self.browser = BrowserPages(model_admin)

    def get_urls(self) -> list:
        view = self.admin_site.admin_view
        return [
            path("search/", view(self.sessions), name="sessions_app_session_search"),
            path(
                "<uuid:session_id>/browse/search/",
                view(self.messages),
                name="sessions_app_session_browse_search",
            ),
        ]

    def sessions(self, request: HttpRequest) -> TemplateResponse:
        if not self.model_admin.has_view_permission(request):
            raise PermissionDenied
        form = SessionSearchForm(request.GET, request=request)
        rows: list[Any] = []
        cursor = None
        if form.is_valid():
            found = session_search(self.model_admin.get_queryset(request), form.filters())
            rows, cursor = keyset_by_time(found, request.GET.get("before", ""), SESSIONS_PER_PAGE)
        response = TemplateResponse(
            request,
            "admin/sessions_app/search.html",
            {
                **self.admin_site.each_context(request),
                "opts": self.model_admin.opts,
                "title": "Search sessions",
                "form": form,
                "rows": [
                    {"session": s, "url": url("overview", s), "search_url": url("search", s)}
                    for s in rows
                ],
                "next_url": query(request, before=cursor) if cursor else None,
                "first_url": query(request, before=None) if request.GET.get("before") else None,
                "per_page": SESSIONS_PER_PAGE,
            },
        )
        if form.errors:
            response.status_code = 400
        return response

    def messages(self, request: HttpRequest, session_id: UUID) -> TemplateResponse:
        session = self.browser.session_for(request, session_id)
        raw = request.GET.get("q", "")
        error = None
        page = None
        if raw:
            try:
                text = check_text_query(raw)
            except SearchInputError as exc:
                error = exc.message
            else:
                before = int_param(request, "before")
                page = message_search(session, text, before=before)
        response = self.browser.render(
            request,
            session,
            "search",
            "Search messages",
            q=raw[: QUERY_MAX_CHARS * 2],  # echoed back, not the whole of an overlong query
            query_max=QUERY_MAX_CHARS,
            error=error,
            page=page,
            hits=[
                {
                    "hit": hit,
                    "message_url": url("message", session, hit.message.pk),
                    "log_url": url("messages", session) + f"?after={max(hit.message.index - 1, 0)}",
                    "first_view_url": url("snapshot", session, hit.first_view)
                    if hit.first_view
                    else None,
                    "latest_view_url": url("snapshot", session, hit.latest_view)
                    if hit.latest_view and hit.latest_view != hit.first_view
                    else None,
                }
                for hit in (page.hits if page else [])
            ],
            next_url=query(request, before=page.next_before)
            if page and page.next_before is not None
            else None,
            first_url=query(request, before=None) if request.GET.get("before") else None,
        )
        if error:
            response.status_code = 400
        return response
