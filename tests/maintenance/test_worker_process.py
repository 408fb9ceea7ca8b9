"""Maintenance in a real Celery worker process on PostgreSQL + Redis, including SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from sessions_app.models import KVEntry, MaintenanceJob, Session

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


def worker_env() -> dict[str, str]:
    db = connection.settings_dict
    env = dict(os.environ)
    env.update(
        DATABASE_URL=f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/"
        f"{db['NAME']}",
        REDIS_URL=settings.REDIS_URL,
        NODE_ROLE="worker",
        MAINTENANCE_LEASE_SECONDS="3",
        MAINTENANCE_RETRY_BASE_SECONDS="1",
        MAINTENANCE_SWEEP_SECONDS="1",
    )
    return env


def start_worker(log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "contextproto",
            "worker",
            "-P",
            "solo",
            "-Q",
            "contextproto",
            "--without-mingle",
            "--without-gossip",
            "-l",
            "info",
        ],
        cwd=ROOT,
        env=worker_env(),
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def job_state(job_id):
    return (
        MaintenanceJob.objects.filter(pk=job_id)
        .values("status", "attempts", "pages_read", "page_count", "history", "reason")
        .first()
    )


@pytest.fixture
def purged_queue():
    from contextproto.celery import app

    app.control.purge()
    yield
    app.control.purge()


@pytest.mark.django_db(transaction=True)
def test_worker_killed_mid_job_then_a_new_worker_commits_once(
    with_maintainer, purged_queue, tmp_path
):
    # The first answer takes long enough to kill the worker while it "thinks".
    s = with_maintainer([{"text": "slow checkpoint", "delaySeconds": 30}])
    from sessions_app.services.maintenance import maintenance_request

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
        revision_before = Session.objects.get(pk=s.id).state_revision
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
    assert job_state(job.id)["status"] == "running"  # left behind by the dead worker
    # The new worker's script answers at once (step 0 again: no summary was recorded).
    from agents.models import AgentVersion

    AgentVersion.objects.filter(agent=s.agent_version.maintainer_agent).update(
        model_config={"steps": [{"text": "checkpoint after crash"}]}
    )
    time.sleep(3.5)  # let the dead worker's lease expire
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
    assert [e["event"] for e in state["history"]].count("committed") == 1
    entries = dict(KVEntry.objects.filter(session_id=s.id).values_list("key", "value"))
    assert entries["checkpoint/main"] == "checkpoint after crash"
    assert Session.objects.get(pk=s.id).state_revision == revision_before + 1
    # A late redelivery of the original message changes nothing.
    from sessions_app.services.maintenance import maintenance_execute

    assert maintenance_execute(job_id=job.id).status == "skipped"
    assert Session.objects.get(pk=s.id).state_revision == revision_before + 1
