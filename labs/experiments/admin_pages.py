"""Admin pages listing experiment runs (docs/architecture.md: Labs): the per-group table and links
into the
session browser for every run's session and snapshots.

Reports are files (report.json under the reports root), not rows: an experiment adds no
table and no migration, and a report copied from another machine can be read the same way
(its links work when the sessions are in this database). A report spans the experiment's
own Application, so only superusers see these pages.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest
from django.template.response import TemplateResponse
from django.urls import path, reverse

from labs.experiments.report import REPORT_JSON
from labs.experiments.setup import reports_root
from sessions_app.admin_views import url

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

MAX_LISTED = 200
# A report directory's name: no separators, no "..": the name never leaves the root.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")


def _load(directory: Path) -> dict[str, Any] | None:
    try:
        report = json.loads((directory / REPORT_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) and "groups" in report else None


class ExperimentPages:
    """Mounted by SessionAdmin.get_urls under `experiments/`."""

    def __init__(self, model_admin: ModelAdmin) -> None:
        self.model_admin = model_admin
        self.admin_site = model_admin.admin_site

    def get_urls(self) -> list:
        view = self.admin_site.admin_view
        return [
            path("experiments/", view(self.index), name="sessions_app_experiments"),
            path("experiments/<str:name>/", view(self.detail), name="sessions_app_experiment"),
        ]

    def _render(
        self, request: HttpRequest, template: str, title: str, **context: Any
    ) -> TemplateResponse:
        return TemplateResponse(
            request,
            f"admin/sessions_app/experiments/{template}.html",
            {
                **self.admin_site.each_context(request),
                "opts": self.model_admin.opts,
                "title": title,
                "root": str(reports_root()),
                **context,
            },
        )

    def index(self, request: HttpRequest) -> TemplateResponse:
        """Every report under the reports root, newest first."""
        if not request.user.is_superuser:
            raise PermissionDenied
        root = reports_root()
        found = [d for d in root.iterdir() if d.is_dir()] if root.is_dir() else []
        # Directory names start with the UTC time, so name order is time order.
        directories = sorted(
            (d for d in found if NAME.match(d.name)), key=lambda d: d.name, reverse=True
        )[:MAX_LISTED]
        rows = []
        for directory in directories:
            report = _load(directory)
            if report is None:
                continue
            rows.append(
                {
                    "name": directory.name,
                    "link": reverse("admin:sessions_app_experiment", args=[directory.name]),
                    "report": report,
                    "outcomes": [(g["id"], g["outcome"]) for g in report["groups"]],
                }
            )
        return self._render(request, "index", "Experiment runs", rows=rows)

    def detail(self, request: HttpRequest, name: str) -> TemplateResponse:
        """One report: the per-group table, comparability, and every run with its links."""
        if not request.user.is_superuser:
            raise PermissionDenied
        report = _load(reports_root() / name) if NAME.match(name) else None
        if report is None:
            raise Http404("No such experiment report.")
        stage_ids = [s["id"] for s in report["stages"]]
        groups = []
        for group in report["groups"]:
            by_stage = {s["id"]: s for s in group["stages"]}
            runs = []
            for stage in group["stages"]:
                for session in stage["sessions"]:
                    for run in session["runs"]:
                        runs.append(self._run_row(stage["id"], session, run))
            groups.append(
                {
                    "group": group,
                    "verdicts": [by_stage.get(s, {}).get("verdict", "-") for s in stage_ids],
                    "runs": runs,
                }
            )
        return self._render(
            request,
            "detail",
            f"Experiment {report['plan']['name']}",
            name=name,
            report=report,
            stage_ids=stage_ids,
            groups=groups,
            index_link=reverse("admin:sessions_app_experiments"),
        )

    def _run_row(self, stage_id: str, session: dict[str, Any], run: dict[str, Any]) -> dict:
        session_id = session["sessionId"]
        checks = [c for c in run.get("checks", []) if c["status"] in ("pass", "fail", "info")]
        return {
            "stage": stage_id,
            "repetition": session["repetition"],
            "run": run,
            "checks": checks,
            "session_id": session_id,
            "session_link": url("overview", session_id),
            "snapshots_link": url("snapshots", session_id),
            "snapshots": [
                (snapshot_id, url("snapshot", session_id, snapshot_id))
                for snapshot_id in run.get("snapshotIds", [])
            ],
        }
