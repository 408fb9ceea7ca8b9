"""The session browser's snapshot pages: the list, one snapshot beside its raw log (the
context viewer), the diff with the previous turn, and forking a session at a snapshot."""

from __future__ import annotations

from uuid import UUID

from django.contrib import messages as flash
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from contextproto.errors import ApplicationError
from sessions_app.admin_views import context as ctx
from sessions_app.admin_views import turns
from sessions_app.admin_views.browser import BrowserPages, Route
from sessions_app.admin_views.common import (
    SNAPSHOT_HEAVY_FIELDS,
    int_param,
    limit_param,
    pretty,
    query,
    url,
)
from sessions_app.admin_views.diff import snapshot_diff
from sessions_app.admin_views.reads import keyset_by_time, neighbours, raw_pane, view_range_of
from sessions_app.models import ProjectionSnapshot, Session
from sessions_app.services.fork import session_fork

RAW_PANE_SIZE = 60


class SnapshotPages(BrowserPages):
    """Snapshots of one session."""

    def routes(self) -> list[Route]:
        return [
            ("snapshots/", self.snapshots, "snapshots"),
            ("snapshots/<uuid:snapshot_id>/", self.snapshot_detail, "snapshot"),
            ("snapshots/<uuid:snapshot_id>/diff/", self.snapshot_diff, "snapshot_diff"),
            ("snapshots/<uuid:snapshot_id>/fork/", self.snapshot_fork, "snapshot_fork"),
        ]

    def snapshots(self, request: HttpRequest, session_id: UUID) -> TemplateResponse:
        session = self.session_for(request, session_id)
        found, cursor = keyset_by_time(
            ProjectionSnapshot.objects.filter(session=session).defer(*SNAPSHOT_HEAVY_FIELDS),
            request.GET.get("before", ""),
            limit_param(request, 50),
        )
        return self.render(
            request,
            session,
            "snapshots",
            "Projection snapshots",
            rows=turns.snapshot_rows(session, found),
            next_url=query(request, before=cursor) if cursor else None,
            first_url=query(request, before=None) if request.GET.get("before") else None,
        )

    def _snapshot(self, session: Session, snapshot_id: UUID) -> ProjectionSnapshot:
        snapshot = ProjectionSnapshot.objects.filter(session=session, pk=snapshot_id).first()
        if snapshot is None:
            raise Http404("No such snapshot in this session.")
        return snapshot

    def snapshot_detail(
        self, request: HttpRequest, session_id: UUID, snapshot_id: UUID
    ) -> TemplateResponse:
        """The context viewer: the turn's view beside the raw log, with its token breakdown."""
        session = self.session_for(request, session_id)
        snapshot = self._snapshot(session, snapshot_id)
        previous, following = neighbours(session, snapshot)
        breakdown = ctx.snapshot_breakdown(snapshot)
        index = ctx.view_index(snapshot)
        only_window = request.GET.get("raw_window") == "1"
        limit = limit_param(request, RAW_PANE_SIZE, name="raw_limit")
        view_range = view_range_of(session, snapshot, index)
        after, before = int_param(request, "raw_after"), int_param(request, "raw_before")
        # By default the pane opens on the range the view was built from, from its start.
        in_range = after is None and before is None and not only_window
        found, earlier, later, from_start = raw_pane(
            session,
            snapshot,
            after=view_range.first - 1 if in_range else after,
            before=before,
            window=snapshot.window_id if only_window else None,
            limit=limit,
        )

        def locate(message_index: int) -> str:
            target = query(
                request, raw_after=max(message_index - 1, 0), raw_before=None, raw_window=None
            )
            return f"{target}#r{message_index}"

        raw = ctx.raw_rows(found, index, detail_url=lambda m: url("message", session, m.id))
        return self.render(
            request,
            session,
            "snapshot",
            "Context viewer: the model's view at one turn",
            snapshot=snapshot,
            breakdown=breakdown,
            estimate_label=ctx.ESTIMATE_LABEL,
            view_rows=ctx.view_rows(
                snapshot,
                breakdown,
                message_url=lambda i: url("message", session, i),
                fold_url=lambda f: url("fold", session, f),
                locate=locate,
            ),
            covered=index.covered,
            raw_rows=raw,
            raw_statuses=[
                (status, ctx.STATUS_BADGE[status], ctx.STATUS_HELP[status], n)
                for status, n in view_range.counts.items()
            ],
            view_range=view_range,
            in_range=in_range,
            range_url=None
            if in_range
            else query(request, raw_after=None, raw_before=None, raw_window=None),
            tail_url=query(
                request, raw_before=snapshot.upper_bound + 1, raw_after=None, raw_window=None
            ),
            only_window=only_window,
            raw_first=found[0].index if found else None,
            raw_last=found[-1].index if found else None,
            earlier_url=query(request, raw_before=earlier, raw_after=None) if earlier else None,
            later_url=query(request, raw_after=later, raw_before=None) if later else None,
            start_url=query(request, raw_after=None, raw_before=None) if from_start else None,
            window_toggle_url=query(
                request, raw_window=None if only_window else "1", raw_after=None, raw_before=None
            ),
            previous=previous,
            following=following,
            previous_url=url("snapshot", session, previous.pk) if previous else None,
            following_url=url("snapshot", session, following.pk) if following else None,
            diff_url=url("snapshot_diff", session, snapshot.pk) if previous else None,
            kv_url=url("kv", session),
            state_url=url("kv", session) + f"?revision={snapshot.revision}",
            fork_url=url("snapshot_fork", session, snapshot.pk),
            can_fork=self.may_fork(request),
            request_json=pretty(snapshot.request),
            body_storage=_storage(snapshot),
            usage_json=pretty(snapshot.usage) if snapshot.usage is not None else None,
            options_json=pretty(snapshot.options),
            notes_json=pretty(snapshot.notes) if snapshot.notes else None,
        )

    def snapshot_diff(
        self, request: HttpRequest, session_id: UUID, snapshot_id: UUID
    ) -> TemplateResponse:
        """What changed in the model's view since the session's turn before this one."""
        session = self.session_for(request, session_id)
        snapshot = self._snapshot(session, snapshot_id)
        previous, following = neighbours(session, snapshot)
        diff = None
        if previous is not None:
            previous = ProjectionSnapshot.objects.get(pk=previous.pk)
            diff = snapshot_diff(previous, snapshot)
        return self.render(
            request,
            session,
            "snapshot_diff",
            "What changed since the turn before",
            snapshot=snapshot,
            previous=previous,
            diff=diff,
            estimate_label=ctx.ESTIMATE_LABEL,
            snapshot_url=url("snapshot", session, snapshot.pk),
            previous_url=url("snapshot", session, previous.pk) if previous else None,
            earlier_diff_url=url("snapshot_diff", session, previous.pk) if previous else None,
            later_diff_url=url("snapshot_diff", session, following.pk) if following else None,
        )

    def may_fork(self, request: HttpRequest) -> bool:
        """Forking creates a session: staff who may add sessions (in their Applications)."""
        return request.user.has_perm(f"{self.model_admin.opts.app_label}.add_session")

    def snapshot_fork(self, request: HttpRequest, session_id: UUID, snapshot_id: UUID):
        """POST: fork the session at this turn (the fork service); open the new session."""
        return require_POST(self._snapshot_fork)(request, session_id, snapshot_id)

    def _snapshot_fork(
        self, request: HttpRequest, session_id: UUID, snapshot_id: UUID
    ) -> HttpResponseRedirect:
        session = self.session_for(request, session_id)
        snapshot = self._snapshot(session, snapshot_id)
        if not self.may_fork(request):
            raise PermissionDenied
        try:
            fork, _key = session_fork(session=session, snapshot_id=snapshot.pk)
        except ApplicationError as exc:
            flash.error(request, f"Not forked: {exc.message}")
            return HttpResponseRedirect(url("snapshot", session, snapshot.pk))
        self.model_admin.log_addition(
            request, fork, f"Forked from session {session.pk} at snapshot {snapshot.pk}."
        )
        # The session key is not shown here (admin messages are stored in the browser
        # session); the application key issues one with session-key/rotate/.
        flash.success(
            request,
            format_html(
                "This session is a fork of {} through #{} at revision {}. Its session key "
                "was not shown: issue one with POST sessions/{}/session-key/rotate/ "
                "(application key).",
                session.pk,
                fork.forked_through_index,
                fork.forked_revision,
                fork.pk,
            ),
        )
        return HttpResponseRedirect(url("overview", fork))


def _storage(snapshot: ProjectionSnapshot) -> str:
    """How a stored body is kept, in words."""
    kept = f"{snapshot.body_bytes:,} bytes stored" if snapshot.body_bytes is not None else ""
    if snapshot.view_bytes:
        kept += f" for {snapshot.view_bytes:,} bytes of JSON"
    if snapshot.body_encoding == ProjectionSnapshot.BodyEncoding.DELTA:
        return f"a delta, {snapshot.body_depth} after its keyframe; {kept}"
    if snapshot.body_state == ProjectionSnapshot.BodyState.PENDING:
        return "not written yet (the turn stores it with its answer); shown rebuilt"
    return f"whole; {kept}" if kept else "whole"
