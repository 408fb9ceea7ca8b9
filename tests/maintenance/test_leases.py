"""Leases of built-in maintenance jobs: renewed while a worker runs, fenced by a token (contract
§6)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from sessions_app import maintenance, providers, tasks
from sessions_app.maintenance import LeaseLost, worker
from sessions_app.models import MaintenanceJob, Session
from tests.maintenance.test_builtin_jobs import kv, queue


def revision(s) -> int:
    return Session.objects.get(pk=s.id).state_revision


def expire_lease(job: MaintenanceJob) -> None:
    """Let the holder's lease run out, as if its worker had stalled or died."""
    MaintenanceJob.objects.filter(pk=job.pk).update(
        lease_until=timezone.now() - timedelta(seconds=1)
    )


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_lease_is_renewed_while_a_slow_maintainer_thinks(with_maintainer, settings):
    settings.MAINTENANCE_LEASE_SECONDS = 1
    s = with_maintainer([{"text": "slow checkpoint", "delaySeconds": 3}])
    job = queue(s)
    outcome = {}

    def first_worker() -> None:
        try:
            outcome["first"] = maintenance.maintenance_execute(job_id=job.id)
        finally:
            connection.close()

    worker = threading.Thread(target=first_worker)
    worker.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            row = MaintenanceJob.objects.get(pk=job.pk)
            if row.status == "running" and row.pages_read == row.page_count > 0:
                break  # the first worker waits for the model now
            time.sleep(0.05)
        else:
            raise AssertionError("the first worker never reached the model call")
        # The model call takes three leases: a second worker must never get the job.
        seen_leases = set()
        while worker.is_alive():
            row = MaintenanceJob.objects.get(pk=job.pk)
            if row.status != "running":
                break
            assert row.lease_until > timezone.now() - timedelta(seconds=0.3), "lease lapsed"
            seen_leases.add(row.lease_until)
            assert maintenance.maintenance_execute(job_id=job.id).status == "skipped"
            time.sleep(0.2)
    finally:
        worker.join(20)
    assert outcome["first"].status == "committed", outcome
    assert len(seen_leases) >= 3  # renewed, not merely long
    job.refresh_from_db()
    assert job.attempts == 1 and job.lease_token is None and job.lease_until is None
    assert [a["outcome"] for a in job.attempt_log] == ["committed"]
    assert kv(s.id)["checkpoint/main"] == "slow checkpoint"


def test_a_worker_that_lost_its_lease_leaves_the_job_to_the_new_owner(with_maintainer, monkeypatch):
    s = with_maintainer([{"text": "checkpoint"}])
    job = queue(s)

    real = providers.provider_for
    calls = {"n": 0}
    taken_over = {}

    def provider_for(name, config):
        provider = real(name, config)
        original = provider.complete

        def complete(request, **kwargs):
            calls["n"] += 1
            if calls["n"] == 1:
                # The first worker stalls past its lease; a second one takes over and commits.
                expire_lease(job)
                taken_over["outcome"] = maintenance.maintenance_execute(job_id=job.id)
            return original(request, **kwargs)

        provider.complete = complete
        return provider

    monkeypatch.setattr(providers, "provider_for", provider_for)
    before = revision(s)
    first = maintenance.maintenance_execute(job_id=job.id)
    assert taken_over["outcome"].status == "committed"
    assert first.status == "lease_lost", first
    job.refresh_from_db()
    # The stale worker overwrote nothing: the new owner's outcome and the count stand.
    assert job.status == "committed" and job.attempts == 2
    assert [e["event"] for e in job.history].count("committed") == 1
    assert revision(s) == before + 1
    attempts = job.attempt_log
    assert [(a["attempt"], a["outcome"]) for a in attempts] == [
        (1, "lease_expired"),
        (2, "committed"),
    ]
    assert all(a["worker"] and a["startedAt"] and a["endedAt"] for a in attempts)
    # A late redelivery of either message does nothing.
    assert maintenance.maintenance_execute(job_id=job.id).status == "skipped"
    assert revision(s) == before + 1


def test_a_stale_worker_cannot_renew_write_or_commit_after_a_takeover(with_maintainer):
    s = with_maintainer([{"text": "unused"}])
    job = queue(s)
    stale = worker._claim(job.id)
    plan = maintenance.maintenance_plan(job=stale)
    for n in range(plan.page_count):
        maintenance.maintenance_page(job=stale, page=n)
    expire_lease(job)
    owner = worker._claim(job.id)
    assert owner is not None and owner.lease_token != stale.lease_token
    before = revision(s)
    # Same revision, same hash: only the lease fence stands between it and a second commit.
    with pytest.raises(LeaseLost) as refused:
        maintenance.maintenance_commit(job=stale, checkpoint="stale checkpoint")
    assert refused.value.code == "maintenance_job_finished" and refused.value.status == 409
    assert "checkpoint/main" not in kv(s.id) and revision(s) == before
    assert not maintenance.maintenance_lease_renew(job_id=job.id, token=stale.lease_token)
    with pytest.raises(LeaseLost):
        maintenance.maintenance_page(job=stale, page=0)
    job.refresh_from_db()
    assert job.status == "running" and job.lease_token == owner.lease_token
    assert job.attempts == 2
    assert [a["outcome"] for a in job.attempt_log] == ["lease_expired", "running"]
    assert maintenance.maintenance_lease_renew(job_id=job.id, token=owner.lease_token)


def test_the_sweeper_hands_a_dead_workers_job_on_after_its_lease(
    with_maintainer, settings, monkeypatch
):
    settings.MAINTENANCE_LEASE_SECONDS = 60
    s = with_maintainer([{"text": "x"}])
    job = queue(s)
    worker._claim(job.id)  # the worker dies right after claiming

    sent = []
    monkeypatch.setattr(tasks.maintenance_job_run, "delay", sent.append)
    assert maintenance.maintenance_sweep() == [] and sent == []
    expire_lease(job)
    assert maintenance.maintenance_sweep() == [str(job.id)] and sent == [str(job.id)]
