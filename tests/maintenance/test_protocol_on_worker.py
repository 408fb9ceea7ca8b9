"""A worker asked to run a job for a protocol version it does not carry fails it at once (§12)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import override_settings

from agents.models import AgentVersion
from sessions_app import maintenance
from sessions_app.models import KVEntry, MaintenanceJob


def queue(s) -> MaintenanceJob:
    job, created = maintenance.maintenance_request(
        session_id=s.id, window_id="main", trigger="test", external=True
    )
    assert created
    # Built-in execution of a job row; `external=True` only keeps the request from enqueuing.
    MaintenanceJob.objects.filter(pk=job.pk).update(external=False)
    return job


@pytest.mark.parametrize(
    ("hidden", "version", "missing"),
    [
        (("unified@2",), 2, "unified@2"),  # hidden from this worker (NODE_HIDE_PROTOCOLS)
        ((), 9, "unified@9"),  # in no catalog at all (a newer node planned it)
    ],
)
def test_a_job_for_a_version_this_worker_lacks_fails_at_once_without_a_retry(
    with_maintainer, client, hidden, version, missing
):
    s = with_maintainer([{"text": "a checkpoint that must never be written"}])
    AgentVersion.objects.filter(pk=s.agent_version.pk).update(context_protocol_version=version)
    job = queue(s)
    with override_settings(NODE_HIDE_PROTOCOLS=hidden):
        outcome = maintenance.maintenance_execute(job_id=job.id)
    assert outcome.status == "failed" and outcome.retry_in is None
    job.refresh_from_db()
    assert job.status == "failed" and job.finished_at is not None
    assert job.reason.startswith(
        f"protocol_unknown_on_worker: {missing} is not in this worker's catalog (fingerprint "
    )
    assert job.attempts == 1 and job.not_before is None and job.lease_token is None
    [attempt] = job.attempt_log
    assert attempt["outcome"] == "failed" and attempt["reason"] == job.reason
    assert job.summary_calls == 0 and job.frozen_revision is None  # nothing planned or asked
    assert "checkpoint/main" not in set(
        KVEntry.objects.filter(session_id=s.id).values_list("key", flat=True)
    )
    # A redelivery of the task does not run it again.
    assert maintenance.maintenance_execute(job_id=job.id).status == "skipped"
    # The operator sees the reason in the session browser.
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    page = client.get(f"/admin/sessions_app/session/{s.id}/browse/maintenance/")
    assert page.status_code == 200
    assert f"protocol_unknown_on_worker: {missing} is not in this worker" in page.content.decode()


def test_a_worker_carrying_the_version_still_commits(with_maintainer):
    s = with_maintainer([{"text": "Quote under way."}])
    with override_settings(NODE_HIDE_PROTOCOLS=("unified@3",)):
        assert maintenance.maintenance_execute(job_id=queue(s).id).status == "committed"
