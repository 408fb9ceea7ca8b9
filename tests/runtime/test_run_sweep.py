"""A run whose worker died resumes within a lease, not after the broker's hour (issue 15 gap)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from sessions_app import tasks
from sessions_app.models import Run
from sessions_app.services.runtime import run_advance, run_sweep
from sessions_app.services.sessions import session_create


@pytest.fixture
def sent(monkeypatch, settings):
    settings.RUNTIME_AUTOSTART = False
    queued: list[str] = []
    monkeypatch.setattr(tasks.run_advance_task, "delay", queued.append)
    return queued


@pytest.fixture
def new_run(application, make_version):
    version = make_version(
        application, provider="scripted", model_config={"steps": [{"text": "done"}]}
    )

    def build(status: str, **fields) -> Run:
        session, _ = session_create(agent_version=version)
        created_ago = fields.pop("created_ago", timedelta(0))
        run = Run.objects.create(session=session, status=status, **fields)
        Run.objects.filter(pk=run.pk).update(created_at=timezone.now() - created_ago)
        return run

    return build


def test_the_sweep_requeues_runs_left_by_a_dead_worker_or_a_lost_enqueue(sent, new_run, settings):
    now = timezone.now()
    lease = timedelta(seconds=settings.RUN_LEASE_SECONDS)
    dead_worker = new_run(Run.Status.RUNNING, lease_until=now - timedelta(seconds=1))
    lost_enqueue = new_run(Run.Status.QUEUED, created_ago=lease + timedelta(seconds=5))
    # Left alone: a live worker's run, a fresh queued run, a scheduled retry, finished runs.
    new_run(Run.Status.RUNNING, lease_until=now + lease)
    new_run(Run.Status.QUEUED)
    new_run(Run.Status.QUEUED, created_ago=lease * 2, error={"code": "provider_timeout"})
    new_run(Run.Status.COMPLETED, created_ago=lease * 2)
    new_run(Run.Status.WAITING_FOR_HOST_TOOL, created_ago=lease * 2)
    new_run(Run.Status.EXTERNAL, created_ago=lease * 2)

    swept = run_sweep()
    assert sorted(swept) == sorted([str(dead_worker.id), str(lost_enqueue.id)])
    assert sorted(sent) == sorted(swept)

    # The re-delivered task takes the run over and finishes it; a second delivery is skipped.
    assert run_advance(run_id=dead_worker.id) == "completed"
    assert run_advance(run_id=dead_worker.id) == "skipped"
    assert run_sweep() == [str(lost_enqueue.id)]


def test_the_sweep_is_scheduled_and_runs_when_a_worker_starts(sent, monkeypatch, settings):
    schedule = settings.CELERY_BEAT_SCHEDULE["run-sweep"]
    assert schedule["task"] == "sessions_app.tasks.run_sweep"
    started: list[str] = []
    monkeypatch.setattr(tasks.run_sweep, "delay", lambda: started.append("run"))
    monkeypatch.setattr(tasks.maintenance_sweep, "delay", lambda: started.append("maintenance"))
    monkeypatch.setattr(tasks.snapshot_body_sweep, "delay", lambda: started.append("bodies"))
    tasks._sweep_on_start()
    assert sorted(started) == ["bodies", "maintenance", "run"]
