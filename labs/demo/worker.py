"""The demo's worker (`manage.py demo`): maintenance jobs run through the Celery task body, one
turn after they were queued, so the demo's figures repeat."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from contextproto.celery import app
from sessions_app.models import MaintenanceJob
from sessions_app.tasks import maintenance_job_run


@contextmanager
def worker_queue() -> Iterator[None]:
    """Queue Celery tasks instead of running them inline, so the demo can play the worker.

    Without REDIS_URL, Celery runs every task eagerly inside the enqueuing call; the demo
    wants maintenance to happen beside the agent's turns, as a worker would.
    """
    previous = app.conf.task_always_eager
    app.conf.task_always_eager = False
    # The demo prints its own line per job; the worker's log line would repeat it.
    jobs_log = logging.getLogger("contextproto.jobs")
    level = jobs_log.level
    jobs_log.setLevel(logging.WARNING)
    try:
        yield
    finally:
        app.conf.task_always_eager = previous
        jobs_log.setLevel(level)


@dataclass
class Worker:
    """Runs a session's queued maintenance jobs through the Celery task body, one turn late."""

    write: Any
    due: list[str] = field(default_factory=list)
    committed: list[dict[str, Any]] = field(default_factory=list)

    def _queued(self, session_id: Any) -> list[str]:
        return [
            str(pk)
            for pk in MaintenanceJob.objects.filter(
                session_id=session_id, external=False, status=MaintenanceJob.Status.QUEUED
            )
            .order_by("created_at")
            .values_list("pk", flat=True)
        ]

    def tick(self, session_id: Any, turn: int) -> None:
        """After a turn: run the jobs queued before it; the newer ones wait one turn."""
        due, self.due = self.due, [j for j in self._queued(session_id) if j not in self.due]
        for job_id in due:
            self._run(job_id, turn)

    def drain(self, session_id: Any, turn: int) -> None:
        for job_id in self.due + [j for j in self._queued(session_id) if j not in self.due]:
            self._run(job_id, turn)
        self.due = []

    def _run(self, job_id: str, turn: int) -> None:
        outcome = maintenance_job_run.apply(args=(job_id,)).get()
        job = MaintenanceJob.objects.get(pk=job_id)
        if outcome == MaintenanceJob.Status.COMMITTED:
            self.committed.append({"turn": turn, "job": job})
            self.write(
                f"    worker: checkpoint of {job.window_id} committed, covers "
                f"#{(job.from_index or 0) + 1}-#{job.through_index} "
                f"({job.tokens_before or 0:,} -> {job.tokens_after or 0:,} tokens, est.; "
                f"trigger: {job.trigger})"
            )
        else:
            self.write(f"    worker: maintenance of {job.window_id} {outcome}: {job.reason}")
