"""Two real workers with different catalogs on PostgreSQL + Redis (contract §3).

Worker A carries the whole catalog; worker B hides unified@3 (NODE_HIDE_PROTOCOLS). Each
consumes its own queue, so a job goes to the worker the test picks.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from agents.models import AgentVersion
from contextproto.protocol import catalog
from sessions_app.maintenance import maintenance_request
from sessions_app.models import MaintenanceJob
from sessions_app.tasks import maintenance_job_run
from tests.servers import purged_celery_queue, start_celery_worker, wait_for, worker_env

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


def start_worker(queue: str, log: Path, **extra_env: str) -> subprocess.Popen:
    return start_celery_worker(
        log, env=worker_env(**extra_env), queue=queue, extra=("-n", f"{queue}@%h")
    )


def health() -> dict:
    response = APIClient().get("/api/v1/health/")
    assert response.status_code == 200, response.content
    return response.json()


def pids(body: dict) -> set[int]:
    return {n["pid"] for n in body["nodes"]}


def built_in_job(session_id) -> MaintenanceJob:
    job, created = maintenance_request(
        session_id=session_id, window_id="main", trigger="test", external=True
    )
    assert created
    # Built-in execution, sent by the test to the queue it picks (external only kept the
    # request from enqueuing on the default queue).
    MaintenanceJob.objects.filter(pk=job.pk).update(external=False)
    return job


def finished(job_id) -> MaintenanceJob | None:
    job = MaintenanceJob.objects.get(pk=job_id)
    return job if job.status in ("committed", "failed", "rejected") else None


@pytest.fixture
def purged_queue():
    # The workers' start-up sweep lands on the default queue.
    with purged_celery_queue():
        yield


@pytest.mark.django_db(transaction=True)
def test_workers_with_different_catalogs_show_skew_and_the_lacking_one_fails_the_job(
    with_maintainer, purged_queue, tmp_path
):
    s = with_maintainer([{"text": "checkpoint by the worker carrying unified@3"}])
    AgentVersion.objects.filter(pk=s.agent_version.pk).update(context_protocol_version=3)
    tag = uuid.uuid4().hex[:8]
    queue_a, queue_b = f"skew-a-{tag}", f"skew-b-{tag}"
    log = tmp_path / "workers.log"
    full = start_worker(queue_a, log)
    lacking = start_worker(queue_b, log, NODE_HIDE_PROTOCOLS="unified@3")
    try:
        body = wait_for(
            lambda: {full.pid, lacking.pid} <= pids(b := health()) and b,
            30,
            "both workers to register",
        )
        assert body["skew"] is True
        groups = {g["catalogFingerprint"]: g for g in body["fingerprints"]}
        hidden = catalog.fingerprint_of(v for v in catalog.all_versions() if v.key != "unified@3")
        host = socket.gethostname()
        assert f"worker {host}:{lacking.pid}" in groups[hidden]["nodes"]
        assert groups[hidden]["protocols"] == ["prefix@2", "unified@1", "unified@2", "unified@4"]
        assert f"worker {host}:{full.pid}" in groups[catalog.fingerprint()]["nodes"]
        assert f"api {host}:{os.getpid()}" in groups[catalog.fingerprint()]["nodes"]

        # Routed to the worker lacking unified@3: failed at once, not after a lease.
        job = built_in_job(s.id)
        sent = time.monotonic()
        maintenance_job_run.apply_async((str(job.id),), queue=queue_b)
        job = wait_for(lambda: finished(job.id), 15, "the lacking worker to end the job")
        assert time.monotonic() - sent < 15 < settings.MAINTENANCE_LEASE_SECONDS
        assert job.status == "failed", (job.reason, log.read_text()[-3000:])
        assert job.reason.startswith(
            "protocol_unknown_on_worker: unified@3 is not in this worker's catalog "
            f"(fingerprint {hidden[:12]}"
        )
        assert job.attempts == 1 and job.not_before is None
        [attempt] = job.attempt_log
        assert attempt["worker"] == f"{host}:{lacking.pid}" and attempt["outcome"] == "failed"
        time.sleep(1)  # no re-queue: the job stays failed after one attempt
        assert MaintenanceJob.objects.get(pk=job.id).attempts == 1

        # The same request routed to the worker carrying unified@3 commits.
        job = built_in_job(s.id)
        maintenance_job_run.apply_async((str(job.id),), queue=queue_a)
        job = wait_for(lambda: finished(job.id), 20, "the full worker to end the job")
        assert job.status == "committed", (job.reason, log.read_text()[-3000:])
        assert job.attempt_log[0]["worker"] == f"{host}:{full.pid}"
    finally:
        for worker in (full, lacking):
            worker.terminate()
        for worker in (full, lacking):
            try:
                worker.wait(15)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait(5)
    # A worker that shuts down cleanly leaves the registry at once, not after its TTL.
    assert not {full.pid, lacking.pid} & pids(health())
