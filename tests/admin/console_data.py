"""Bulk data for the console's dashboard and search: many sessions, runs, jobs, receipts and
reported turns, spread over a month so most rows lie outside the dashboard's windows.

Used by the query-count tests (SQLite, hundreds of sessions) and by
bench/bench_console.py (PostgreSQL, 100k sessions). Rows are bulk-inserted (no service
runs per row); `created_at` is set afterwards per time bucket, since auto_now_add fields
ignore a value given at insert.
"""

from __future__ import annotations

import hashlib
import uuid
from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal

from django.utils import timezone

from sessions_app.models import MaintenanceJob, ProjectionSnapshot, Run, Session, ToolReceipt

RUN_STATUSES = (
    "completed",
    "completed",
    "running",
    "waiting_for_host_tool",
    "failed",
    "queued",
    "max_turns_reached",
    "external",
)
JOB_STATUSES = ("committed", "queued", "failed", "rejected", "running")
DAYS = 30


def bucket_of(n: int, now: datetime) -> datetime:
    """Every 10th row in the last hour, the next in the last day, the rest over DAYS days."""
    # Few distinct moments: the stamping issues one UPDATE per moment and table.
    if n % 10 == 0:
        return now - timedelta(minutes=5 + (n // 10) % 5 * 10)
    if n % 10 == 1:
        return now - timedelta(hours=2 + (n // 10) % 4 * 5)
    return now - timedelta(days=2 + n % (DAYS - 2))


def _stamp(model, ids_by_time: dict[datetime, list], **also) -> None:
    for moment, ids in ids_by_time.items():
        for start in range(0, len(ids), 5000):
            fields = {"created_at": moment, **{k: moment for k in also.get("same", ())}}
            model.objects.filter(pk__in=ids[start : start + 5000]).update(**fields)


def bulk_console_data(version, count: int, *, batch: int = 5000, tag: str = "") -> dict:
    """Create `count` sessions of `version`, each with one run and one reported turn; every
    5th with a maintenance job, every 7th with an error receipt. Returns counts by window."""
    now = timezone.now()
    tag = tag or uuid.uuid4().hex[:8]
    for offset in range(0, count, batch):
        numbers = range(offset, min(offset + batch, count))
        sessions = [
            Session(
                id=uuid.uuid4(),
                application_id=version.agent.application_id,
                agent_version=version,
                session_key_hash=hashlib.sha256(f"{tag}:{n}".encode()).hexdigest(),
                active_window="main" if n % 3 else "w1",
            )
            for n in numbers
        ]
        Session.objects.bulk_create(sessions)
        runs = [
            Run(id=uuid.uuid4(), session=s, status=RUN_STATUSES[n % len(RUN_STATUSES)], turns=1)
            for n, s in zip(numbers, sessions, strict=True)
        ]
        Run.objects.bulk_create(runs)
        for session, run in zip(sessions, runs, strict=True):
            session.current_run = run
        Session.objects.bulk_update(sessions, ["current_run"])
        snapshots = [
            ProjectionSnapshot(
                session=s,
                run=r,
                revision=0,
                upper_bound=1,
                window_id="main",
                protocol="unified@2",
                provider="external",
                input_tokens=1000,
                cache_read_input_tokens=400,
                output_tokens=100,
                cost=Decimal("0.0042"),
            )
            for s, r in zip(sessions, runs, strict=True)
        ]
        ProjectionSnapshot.objects.bulk_create(snapshots)
        jobs = [
            MaintenanceJob(
                session=s, window_id="main", status=JOB_STATUSES[(n // 5) % len(JOB_STATUSES)]
            )
            for n, s in zip(numbers, sessions, strict=True)
            if n % 5 == 0
        ]
        MaintenanceJob.objects.bulk_create(jobs)
        receipts = [
            ToolReceipt(
                session=s,
                tool_call_id=f"call_{n}",
                tool_name="lookup",
                result={"success": False, "error": {"code": "host_tool_failed"}},
                success=False,
                state_revision=0,
                result_message_id=uuid.uuid4(),
            )
            for n, s in zip(numbers, sessions, strict=True)
            if n % 7 == 0
        ]
        ToolReceipt.objects.bulk_create(receipts)

        by_time: dict[str, dict[datetime, list]] = defaultdict(lambda: defaultdict(list))
        for n, s, r, snap in zip(numbers, sessions, runs, snapshots, strict=True):
            moment = bucket_of(n, now)
            by_time["session"][moment].append(s.pk)
            by_time["run"][moment].append(r.pk)
            by_time["snapshot"][moment].append(snap.pk)
        jobs_by_session = {j.session_id: j.pk for j in jobs}
        receipts_by_session = {r.session_id: r.pk for r in receipts}
        for n, s in zip(numbers, sessions, strict=True):
            moment = bucket_of(n, now)
            if s.pk in jobs_by_session:
                by_time["job"][moment].append(jobs_by_session[s.pk])
            if s.pk in receipts_by_session:
                by_time["receipt"][moment].append(receipts_by_session[s.pk])
        _stamp(Session, by_time["session"])
        _stamp(ProjectionSnapshot, by_time["snapshot"])
        _stamp(ToolReceipt, by_time["receipt"])
        _stamp(MaintenanceJob, by_time["job"], same=("updated_at",))
        for moment, ids in by_time["run"].items():
            Run.objects.filter(pk__in=ids).update(created_at=moment)
            Run.objects.filter(pk__in=ids, status__in=["failed", "completed"]).update(
                finished_at=moment
            )
    return {"sessions": count}
