"""The page at `/`: what this service is and where its parts are (the admin's "View site")."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.views.decorators.http import require_safe

from sessions_app import nodes


@require_safe
def landing(request: HttpRequest) -> HttpResponse:
    """A static overview with links; no credential, no database read.

    It names no host, process or build (health/ does, for operators), only the protocol
    versions this process serves, which every API client can read from `protocols/` anyway.
    """
    protocols = [
        {"key": version.key, "status": version.status, "summary": version.summary}
        for version in nodes.carried_versions()
    ]
    return TemplateResponse(request, "landing.html", {"protocols": protocols})
