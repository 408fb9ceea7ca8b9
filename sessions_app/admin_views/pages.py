"""The session browser's pages, mounted by SessionAdmin.get_urls under `<session_id>/browse/`.

Each page issues a fixed number of queries whatever the session's size: the raw log is
paged by MessageIndex (keyset, never OFFSET or COUNT(*)), per-window counts come from one
grouped query each, and the secondary tables (WindowRecord, FoldRecord) bound the rest.
A snapshot's pages read that snapshot (and its neighbour) plus one page of the raw log.

Pages 404 for a session outside the user's Applications (the SessionAdmin queryset is
scoped) and 403 without the view permission on sessions.

The pages live by group (`overview`, `log_pages`, `snapshot_pages`, `state_pages`) on the
base in `browser`; SessionBrowser mounts them all, and the other page groups (timeline,
replay, search) use it for the session check and the rendering.
"""

from __future__ import annotations

from sessions_app.admin_views.browser import BrowserPages, Route
from sessions_app.admin_views.log_pages import LogPages
from sessions_app.admin_views.overview import OverviewPages
from sessions_app.admin_views.snapshot_pages import SnapshotPages
from sessions_app.admin_views.state_pages import StatePages

# In URL order, the browser's tabs.
PAGE_GROUPS: tuple[type[BrowserPages], ...] = (OverviewPages, LogPages, SnapshotPages, StatePages)


class SessionBrowser(BrowserPages):
    """All the browser's pages, mounted by SessionAdmin.get_urls under `<session_id>/browse/`."""

    def routes(self) -> list[Route]:
        return [route for group in PAGE_GROUPS for route in group(self.model_admin).routes()]
