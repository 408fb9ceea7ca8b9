"""The session browser: custom admin pages inside one session (docs/architecture.md: Admin).

`pages` holds SessionBrowser (mounted by SessionAdmin.get_urls), which mounts one module
per page group, each on the base in `browser` (the session check, tabs, rendering):
`overview` (overview, windows), `log_pages` (messages, folds), `snapshot_pages` (snapshots,
diff, fork), `state_pages` (KV, receipts, maintenance). `reads` holds the bounded read-only
selectors they use (returning data), `presenters` shapes their rows for the templates (links,
pretty JSON, the chart), `context` the context viewer (a turn's view beside its raw log, the
token breakdown), `diff` the diff of two consecutive turns, `timeline` the run timeline page
with `turns` its reads (a run's turns, the snapshot list's answers, whether a page refreshes
live), and `common` URL and text helpers. The names below are what other modules import from
here.
"""

from sessions_app.admin_views.common import (
    SNAPSHOT_HEAVY_FIELDS,
    content_text,
    pretty,
    preview,
    url,
)
from sessions_app.admin_views.pages import SessionBrowser
from sessions_app.admin_views.timeline import TimelinePages

__all__ = [
    "SNAPSHOT_HEAVY_FIELDS",
    "SessionBrowser",
    "TimelinePages",
    "content_text",
    "pretty",
    "preview",
    "url",
]
