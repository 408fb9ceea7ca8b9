"""Admin pages "replay under…" (contract §10): a session's recorded turns, or the newest sessions
of an AgentVersion, rebuilt under another protocol version and options (sessions_app/replay.py).

Mounted by SessionAdmin.get_urls. The form is a GET (a replay writes nothing); the page runs
the replay once the form is submitted and shows the per-turn table and the totals, recorded
beside replayed. Queries do not grow with the number of turns (the replay reads each kind of
row once); the turns shown are capped (the newest MAX_TURNS), and so are the sessions.

Sessions are those the user may view (the SessionAdmin queryset is scoped to the user's
Applications): another Application's session or version is a 404, and the view permission
on sessions is required (403).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest
from django.template.response import TemplateResponse
from django.urls import path, reverse

from agents.models import AgentVersion
from agents.selectors import protocol_of
from contextproto.admin_site import scope_to_member
from contextproto.errors import ApplicationError
from contextproto.protocol import catalog
from sessions_app.admin_views.browser import BrowserPages
from sessions_app.admin_views.common import url
from sessions_app.cache_economy import DEFAULT_THINK_SECONDS
from sessions_app.replay import replay_target, session_replay
from sessions_app.replay_report import (
    PROVIDER_NAMES,
    ReplayTarget,
    ReplayTotals,
    SessionReplay,
    totals_rows,
)

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

MAX_TURNS = 300  # the newest turns of a session a page replays
MAX_SESSIONS = 20  # the newest sessions of a version a page replays
DEFAULT_SESSIONS = 5
ESTIMATES = (
    "Estimates: tokens counted with {tokenizer}; every turn rebuilt for openai-chat and "
    "anthropic-messages with prompt caching on, {timing}; effective cost in input-token "
    "equivalents (uncached 1, cache read 0.1, cache write 1.25 on Anthropic, no write charge "
    "on OpenAI). No model was called and nothing was written."
)


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "0%"


def turn_rows(replay: SessionReplay) -> tuple[list[dict[str, Any]], list[tuple[int, str, int]]]:
    """The per-turn table's rows (the turn, its request as sent and rebuilt, each provider,
    its notes by number) and the notes' legend: (number, note, turns)."""
    rows = []
    numbers: dict[str, int] = {}
    counts: dict[str, int] = {}
    for turn in replay.turns:
        refs = []
        for note in turn.notes:
            refs.append(numbers.setdefault(note, len(numbers) + 1))
            counts[note] = counts.get(note, 0) + 1
        providers = []
        for provider, name in PROVIDER_NAMES:
            recorded = replay.provider_turn(turn, provider, "recorded")
            replayed = replay.provider_turn(turn, provider, "replayed")
            if recorded is None or replayed is None:
                providers.append({"name": name, "shown": False})
                continue
            providers.append(
                {
                    "name": name,
                    "shown": True,
                    "recorded_hit": _pct(
                        recorded.cache.cache_read_tokens, recorded.cache.input_tokens
                    ),
                    "replayed_hit": _pct(
                        replayed.cache.cache_read_tokens, replayed.cache.input_tokens
                    ),
                    "recorded_cost": round(recorded.cost * 1_000_000),
                    "replayed_cost": round(replayed.cost * 1_000_000),
                    "cause": replayed.cause or "",
                }
            )
        rows.append({"turn": turn, "providers": providers, "notes": refs})
    return rows, [(number, note, counts[note]) for note, number in numbers.items()]


def _number(request: HttpRequest, name: str, default: float, low: float, high: float) -> float:
    """A number from the query string, kept within [low, high]; junk gives `default`."""
    try:
        value = float(request.GET.get(name, "") or default)
    except ValueError:
        return default
    return min(max(value, low), high) if value == value else default  # NaN -> default


class ReplayPages:
    """The "replay under…" pages of a session and of an AgentVersion."""

    def __init__(self, model_admin: ModelAdmin) -> None:
        self.model_admin = model_admin
        self.admin_site = model_admin.admin_site
        self.browser = BrowserPages(model_admin)

    def get_urls(self) -> list:
        view = self.admin_site.admin_view
        return [
            path(
                "<uuid:session_id>/browse/replay/",
                view(self.session_page),
                name="sessions_app_session_replay",
            ),
            path(
                "agent-versions/<uuid:version_id>/replay/",
                view(self.version_page),
                name="sessions_app_agentversion_replay",
            ),
        ]

    # ------------------------------------------------------------ the form

    def _form(self, request: HttpRequest, version: AgentVersion) -> dict[str, Any]:
        """The form's values and choices, and the target if it was submitted and is valid."""
        recorded = protocol_of(version)
        protocol = request.GET.get("protocol", "")
        options_text = request.GET.get("options", "").strip()
        form: dict[str, Any] = {
            "submitted": "replay" in request.GET,
            "protocol": protocol,
            "options": options_text,
            "think": _number(request, "think", DEFAULT_THINK_SECONDS, 0, 86_400),
            "choices": [
                (v.key, v.status)
                for v in catalog.all_versions()
                if v.protocol_id == recorded.protocol_id
            ],
            "recorded": recorded.key,
            "protocol_id": recorded.protocol_id,
            "target": None,
            "target_options": None,
            "error": None,
            "errors": [],
        }
        if not form["submitted"]:
            return form
        options: object = None
        if options_text:
            try:
                options = json.loads(options_text)
            except ValueError as exc:
                form["error"] = f"Options are not JSON: {exc}."
                return form
        try:
            target = replay_target(version, protocol=protocol or None, options=options)
        except ApplicationError as exc:
            form["error"] = exc.message
            form["errors"] = exc.details.get("errors") or []
            return form
        form["target"] = target
        if target.options is not None:
            form["target_options"] = json.dumps(dict(target.options), ensure_ascii=False)
        return form

    def _replay(self, session_id: Any, target: ReplayTarget, think: float) -> SessionReplay:
        return session_replay(
            session_id=session_id, target=target, think_seconds=think, last_turns=MAX_TURNS
        )

    def _estimates(self, replays: list[SessionReplay], think: float) -> str:
        tokenizer = replays[0].tokenizer if replays else ""
        return ESTIMATES.format(tokenizer=tokenizer, timing=f"a turn every {think:g} s")

    # ------------------------------------------------------------ the pages

    def session_page(self, request: HttpRequest, session_id: UUID) -> TemplateResponse:
        """One session's turns replayed under the submitted target."""
        session = self.browser.session_for(request, session_id)
        form = self._form(request, session.agent_version)
        replay = None
        rows: list[dict[str, Any]] = []
        legend: list[tuple[int, str, int]] = []
        if form["target"] is not None:
            replay = self._replay(session.pk, form["target"], form["think"])
            rows, legend = turn_rows(replay)
        return self.browser.render(
            request,
            session,
            "replay",
            "Replay under another protocol version",
            form=form,
            replay=replay,
            rows=rows,
            legend=legend,
            totals=totals_rows(replay.totals()) if replay else [],
            sums=replay.totals() if replay else None,
            estimates=self._estimates([replay], form["think"]) if replay else "",
            max_turns=MAX_TURNS,
        )

    def version_page(self, request: HttpRequest, version_id: UUID) -> TemplateResponse:
        """The newest sessions of an AgentVersion replayed under the submitted target."""
        if not self.model_admin.has_view_permission(request):
            raise PermissionDenied
        version = (
            scope_to_member(
                AgentVersion.objects.select_related("agent"), request, "agent__application"
            )
            .filter(pk=version_id)
            .first()
        )
        if version is None:
            raise Http404("No such agent version.")
        form = self._form(request, version)
        count = int(_number(request, "sessions", DEFAULT_SESSIONS, 1, MAX_SESSIONS))
        form["sessions"] = count
        sessions = list(
            self.model_admin.get_queryset(request)
            .filter(agent_version=version)
            .order_by("-created_at", "-pk")
            .only("id", "created_at")[:count]
        )
        replays = []
        if form["target"] is not None:
            replays = [self._replay(s.pk, form["target"], form["think"]) for s in sessions]
        return TemplateResponse(
            request,
            "admin/sessions_app/replay_version.html",
            {
                **self.admin_site.each_context(request),
                "opts": self.model_admin.opts,
                "title": f"Replay the sessions of {version} under another protocol version",
                "version": version,
                "version_url": reverse("admin:agents_agentversion_change", args=[version.pk]),
                "form": form,
                "sessions": sessions,
                "max_sessions": MAX_SESSIONS,
                "max_turns": MAX_TURNS,
                "replays": [
                    {
                        "replay": r,
                        "rows": rows,
                        "legend": legend,
                        "totals": totals_rows(r.totals()),
                        "sums": r.totals(),
                        "session_url": url("overview", r.session_id),
                    }
                    for r in replays
                    for rows, legend in [turn_rows(r)]
                ],
                "all_totals": totals_rows(ReplayTotals.of(replays)) if replays else [],
                "all_sums": ReplayTotals.of(replays) if replays else None,
                "estimates": self._estimates(replays, form["think"]) if replays else "",
            },
        )
