"""Periodic cold archive (contract §2.3); imported by `sessions_app.tasks` for Celery and beat.

Settings (read when the task runs; defaults in settings.py): ARCHIVE_OLDER_THAN_SECONDS,
ARCHIVE_KEEP_LAST, ARCHIVE_CHUNK_SIZE, ARCHIVE_SESSIONS_PER_SWEEP.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.conf import settings

from sessions_app.services.archive import archive_old_messages

ARCHIVE_SWEEP_TASK = "sessions_app.tasks_archive.archive_sweep"


@shared_task(
    name=ARCHIVE_SWEEP_TASK, acks_late=True, reject_on_worker_lost=True, ignore_result=True
)
def archive_sweep() -> dict[str, Any]:
    """Archive old messages of a bounded number of sessions; safe to retry or overlap.

    Every chunk moves in its own transaction under its session's row lock, so a worker that
    dies mid-sweep leaves only whole chunks behind and the next sweep carries on.
    """
    sweep = archive_old_messages(
        older_than_seconds=settings.ARCHIVE_OLDER_THAN_SECONDS,
        keep_last=settings.ARCHIVE_KEEP_LAST,
        chunk_size=settings.ARCHIVE_CHUNK_SIZE,
        limit_sessions=settings.ARCHIVE_SESSIONS_PER_SWEEP,
    )
    return {
        "sessions": sweep.sessions,
        "chunks": sweep.chunks,
        "messages": sweep.messages,
        "failed": list(sweep.failed),
    }
