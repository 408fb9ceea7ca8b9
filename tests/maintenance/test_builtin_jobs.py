"""Built-in maintenance jobs run by the service with the bound maintainer model (contract §6)."""

from __future__ import annotations

import pytest

from sessions_app import maintenance, providers
from sessions_app.models import KVEntry, MaintenanceJob, Session
from sessions_app.store.state import kv_commit


def kv(session_id) -> dict:
    return dict(KVEntry.objects.filter(session_id=session_id).values_list("key", "value"))


def queue(s) -> MaintenanceJob:
    job, created = maintenance.maintenance_request(
        session_id=s.id, window_id="main", trigger="test", external=True
    )
    assert created
    # Built-in execution of a job row; `external=True` only keeps the request from enqueuing.
    MaintenanceJob.objects.filter(pk=job.pk).update(external=False)
    return job


def test_a_job_commits_the_maintainers_checkpoint(with_maintainer):
    s = with_maintainer([{"text": "Quote under way; budget 5000; lookups done."}])
    job = queue(s)
    outcome = maintenance.maintenance_execute(job_id=job.id)
    assert outcome.status == "committed", outcome
    job.refresh_from_db()
    assert job.status == "committed" and job.attempts == 1
    assert job.pages_read == job.page_count >= 2
    assert job.summarizer_usage["calls"] == 1
    assert job.tokens_before > 0 and job.tokens_after > 0
    state = kv(s.id)
    assert state["checkpoint/main"] == "Quote under way; budget 5000; lookups done."
    assert state["coveredThrough/main"] == job.through_index


def test_an_overlong_answer_gets_one_shorter_retry(with_maintainer):
    s = with_maintainer([{"text": "x" * 3500}, {"text": "short checkpoint"}])
    job = queue(s)
    assert maintenance.maintenance_execute(job_id=job.id).status == "committed"
    job.refresh_from_db()
    assert job.summarizer_usage["calls"] == 2
    assert kv(s.id)["checkpoint/main"] == "short checkpoint"


def test_two_overlong_answers_fail_the_job_with_its_reason(with_maintainer):
    s = with_maintainer([{"text": "x" * 3500}, {"text": "y" * 3500}])
    job = queue(s)
    assert maintenance.maintenance_execute(job_id=job.id).status == "failed"
    job.refresh_from_db()
    assert job.status == "failed" and "checkpoint_too_long" in job.reason
    assert "checkpoint/main" not in kv(s.id)


@pytest.mark.parametrize(
    ("step", "reason"),
    [
        ({"text": "   \n"}, "checkpoint_empty"),
        ({"toolCalls": [{"name": "lookup", "arguments": {}}]}, "tool call instead"),
    ],
)
def test_an_empty_or_non_text_answer_is_never_committed(with_maintainer, step, reason):
    s = with_maintainer([step])
    job = queue(s)
    assert maintenance.maintenance_execute(job_id=job.id).status == "failed"
    job.refresh_from_db()
    assert reason in job.reason
    assert "checkpoint/main" not in kv(s.id)


def test_a_state_change_during_summarising_requeues_then_commits(with_maintainer, monkeypatch):
    s = with_maintainer([{"text": "first try"}, {"text": "second try"}])
    job = queue(s)

    real = providers.provider_for
    calls = {"n": 0}

    def provider_for(name, config):
        provider = real(name, config)
        original = provider.complete

        def complete(request, **kwargs):
            calls["n"] += 1
            if calls["n"] == 1:  # the agent writes state while the maintainer is thinking
                kv_commit(session_id=s.id, writes={"taskMemory": "changed meanwhile"})
            return original(request, **kwargs)

        provider.complete = complete
        return provider

    monkeypatch.setattr(providers, "provider_for", provider_for)
    first = maintenance.maintenance_execute(job_id=job.id)
    assert first.status == "queued" and first.retry_in is not None
    job.refresh_from_db()
    assert job.status == "queued" and "revision moved" in job.reason
    assert "checkpoint/main" not in kv(s.id)
    second = maintenance.maintenance_execute(job_id=job.id)
    assert second.status == "committed"
    assert kv(s.id)["checkpoint/main"] == "second try"
    job.refresh_from_db()
    assert job.attempts == 2


def test_a_duplicate_delivery_of_a_finished_job_does_nothing(with_maintainer):
    s = with_maintainer([{"text": "done"}])
    job = queue(s)
    maintenance.maintenance_execute(job_id=job.id)
    revision = kv_commit(session_id=s.id, writes={})
    assert maintenance.maintenance_execute(job_id=job.id).status == "skipped"
    assert kv_commit(session_id=s.id, writes={}) == revision


def test_attempts_are_bounded(with_maintainer, settings):
    settings.MAINTENANCE_MAX_ATTEMPTS = 1
    s = with_maintainer([{"text": "never"}])
    job = queue(s)
    MaintenanceJob.objects.filter(pk=job.pk).update(attempts=1)
    assert maintenance.maintenance_execute(job_id=job.id).status == "skipped"
    job.refresh_from_db()
    assert job.status == "failed" and "gave up after 1 attempts" in job.reason


def test_only_one_active_job_per_window(with_maintainer):
    s = with_maintainer([{"text": "x"}])
    first, created = maintenance.maintenance_request(
        session_id=s.id, window_id="main", trigger="a", external=True
    )
    second, created_again = maintenance.maintenance_request(
        session_id=s.id, window_id="main", trigger="b", external=True
    )
    assert created and not created_again and first.id == second.id


def test_input_tokens_over_the_threshold_queue_exactly_one_job(with_maintainer):
    s = with_maintainer([{"text": "x"}], interactions=1)
    session = Session.objects.get(id=s.id)
    # maxInputTokens 4000, ratio 0.75: 2999 is below, 3000 reaches it.
    assert maintenance.maintenance_trigger_after_turn(session=session, input_tokens=2999) is None
    job = maintenance.maintenance_trigger_after_turn(session=session, input_tokens=3000)
    assert job is not None and job.trigger == "input_tokens"
    assert maintenance.maintenance_trigger_after_turn(session=session, input_tokens=3600) is None
    assert MaintenanceJob.objects.filter(session_id=s.id).count() == 1
