"""Maintenance in a real Celery worker process on PostgreSQL + Redis, including SIGKILL."""

from __future__ import annotations

import signal
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from agents.models import AgentVersion
from sessions_app.maintenance import maintenance_execute, maintenance_request
from sessions_app.models import KVEntry, MaintenanceJob, Session
from tests.servers import purged_celery_queue, start_celery_worker, wait_for, worker_env

LEASE_SECONDS = 3

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


def start_worker(log: Path) -> subprocess.Popen:
    return start_celery_worker(
        log,
        env=worker_env(
            MAINTENANCE_LEASE_SECONDS=str(LEASE_SECONDS),
            MAINTENANCE_RETRY_BASE_SECONDS="1",
            MAINTENANCE_SWEEP_SECONDS="1",
        ),
    )


def job_lease(job_id):
    return MaintenanceJob.objects.values_list("lease_until", flat=True).get(pk=job_id)


def job_state(job_id):
    return (
        MaintenanceJob.objects.filter(pk=job_id)
        .values("status", "attempts", "pages_read", "page_count", "history", "reason")
        .first()
    )


@pytest.fixture
def purged_queue():
    with purged_celery_queue():
        yield


@pytest.mark.django_db(transaction=True)
def test_worker_killed_mid_job_then_a_new_worker_commits_once(
    with_maintainer, purged_queue, tmp_path
):
    # The first answer takes long enough to kill the worker while it "thinks".
    s = with_maintainer([{"text": "slow checkpoint", "delaySeconds": 30}])

    log = tmp_path / "worker.log"
    first = start_worker(log)
    try:
        job, created = maintenance_request(session_id=s.id, window_id="main", trigger="test")
        assert created
        wait_for(
            lambda: (
                (st := job_state(job.id))["status"] == "running"
                and st["pages_read"] == st["page_count"] > 0
            ),
            60,
            "the first worker to read every page",
        )
        # The model call (30 s) outlasts the lease many times: the live worker renews it.
        claimed_lease = job_lease(job.id)
        wait_for(
            lambda: job_lease(job.id) > claimed_lease + timedelta(seconds=1),
            2 * LEASE_SECONDS,
            "the live worker to renew its lease",
        )
        assert job_state(job.id)["attempts"] == 1
        revision_before = Session.objects.get(pk=s.id).state_revision
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        killed_at = timezone.now()
    finally:
        if first.poll() is None:
            first.kill()
    assert job_state(job.id)["status"] == "running"  # left behind by the dead worker
    # Recovery waits about one lease after the death, not for the call or a long lease.
    lease_left = job_lease(job.id) - killed_at
    assert lease_left <= timedelta(seconds=LEASE_SECONDS + 0.5), lease_left
    # The new worker's script answers at once (step 0 again: no summary was recorded).
    AgentVersion.objects.filter(agent=s.agent_version.maintainer_agent).update(
        model_config={"steps": [{"text": "checkpoint after crash"}]}
    )
    time.sleep(max(lease_left.total_seconds(), 0) + 0.5)  # let the dead worker's lease expire
    second = start_worker(log)
    try:
        state = wait_for(
            lambda: (st := job_state(job.id))["status"] in ("committed", "failed") and st,
            90,
            "the new worker to finish the job",
        )
    finally:
        second.terminate()
        second.wait(20)
    assert state["status"] == "committed", (state, log.read_text()[-3000:])
    assert state["attempts"] == 2
    attempts = MaintenanceJob.objects.get(pk=job.id).attempt_log
    assert [a["outcome"] for a in attempts] == ["lease_expired", "committed"]
    assert attempts[0]["worker"] != attempts[1]["worker"]  # two processes
    assert [e["event"] for e in state["history"]].count("committed") == 1
    entries = dict(KVEntry.objects.filter(session_id=s.id).values_list("key", "value"))
    assert entries["checkpoint/main"] == "checkpoint after crash"
    assert Session.objects.get(pk=s.id).state_revision == revision_before + 1
    # A late redelivery of the original message changes nothing.
    assert maintenance_execute(job_id=job.id).status == "skipped"
    assert Session.objects.get(pk=s.id).state_revision == revision_before + 1
