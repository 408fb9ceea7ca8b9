"""What every reader and view returns for a session, to compare before and after a change
(an archive, a fork)."""

from __future__ import annotations

from typing import Any

from sessions_app.models import Message, Run, Session
from sessions_app.reads import raw_log
from sessions_app.services.projection import projection_build, snapshot_to_wire
from sessions_app.store.codec import raw_from_row
from tests.builders.sessions import PROVIDERS


def hot_dump(session_id: Any) -> list[dict]:
    """Every hot row as the wire shape, index order."""
    rows = Message.objects.filter(session_id=session_id).order_by("index")
    return [raw_from_row(r).to_wire() for r in rows]


def reader_dump(session_id: Any) -> dict[str, Any]:
    """What every log_* reader returns for a spread of arguments."""
    upper = Session.objects.get(pk=session_id).last_index
    everything = raw_log.log_page(session_id, window_id=None, after_index=0, limit=10_000)
    windows = sorted({m.window_id for m in everything})
    ids = [m.id for m in everything]
    dump: dict[str, Any] = {"page/all": everything}
    for w in windows:
        dump[f"window/{w}"] = raw_log.log_window(session_id, w, 0, upper)
        for after in range(0, upper + 1, 3):
            dump[f"window/{w}/{after}/{after + 7}"] = raw_log.log_window(
                session_id, w, after, after + 7
            )
            dump[f"window/{w}/{after}/limit2"] = raw_log.log_window(
                session_id, w, after, upper, limit=2
            )
            dump[f"page/{w}/{after}"] = raw_log.log_page(
                session_id, window_id=w, after_index=after, limit=3
            )
    for after in range(0, upper + 1):
        dump[f"page/all/{after}"] = raw_log.log_page(
            session_id, window_id=None, after_index=after, limit=4
        )
    for run in Run.objects.filter(session_id=session_id):
        for through in (upper, upper // 2):
            dump[f"inputs/{run.id.hex}/{through}"] = raw_log.log_run_inputs(
                session_id, run.id.hex, through
            )
    dump["ids/all"] = raw_log.log_by_ids(session_id, ids)
    dump["ids/some"] = raw_log.log_by_ids(session_id, ids[1::3])
    dump["ids/range"] = raw_log.log_by_ids(session_id, ids[2:6], index_range=(3, 6))
    dump["windows_of/all"] = raw_log.log_windows_of(session_id, list(range(0, upper + 3)))
    dump["windows_of/two"] = raw_log.log_windows_of(session_id, [2, upper])
    dump["at"] = [raw_log.log_at(session_id, i) for i in range(0, upper + 2)]
    return dump


def projections(session_id: Any) -> dict[str, dict]:
    """The current view for each provider and for every run, without the snapshot's own id."""
    views = {}
    runs = [None] + [r.id.hex for r in Run.objects.filter(session_id=session_id)]
    for provider in PROVIDERS:
        for run in runs:
            snapshot = projection_build(
                session_id=session_id, provider=provider, run_id=run, use_cache=False
            )
            wire = snapshot_to_wire(snapshot)
            del wire["snapshotId"], wire["createdAt"]
            views[f"{provider}/{run}"] = wire
    return views
