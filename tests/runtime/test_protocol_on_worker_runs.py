"""A run whose protocol version this worker does not carry fails at once, loudly (contract §3)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import override_settings

from sessions_app.models import Message, Run
from sessions_app.services.runs import run_start
from sessions_app.services.runtime import run_advance
from sessions_app.services.sessions import session_create


def test_a_run_for_a_version_this_worker_lacks_fails_with_protocol_unknown_on_worker(
    application, make_version, client
):
    version = make_version(
        application,
        version=3,
        provider="scripted",
        model_config={"steps": [{"text": "never asked"}]},
    )
    session, _ = session_create(agent_version=version)
    run, _ = run_start(session_id=session.id, content="please quote")
    with override_settings(NODE_HIDE_PROTOCOLS=("unified@3",)):
        assert run_advance(run_id=run.id) == "failed"
    run.refresh_from_db()
    assert run.status == "failed" and run.turns == 0 and run.lease_until is None
    assert run.error["code"] == "protocol_unknown_on_worker"
    assert run.error["message"].startswith("unified@3 is not in this worker's catalog")
    assert "retries" not in run.error  # not re-queued
    assert list(Message.objects.filter(session=session).values_list("kind", flat=True)) == ["input"]
    assert run_advance(run_id=run.id) == "skipped"  # a redelivery does nothing
    # The operator sees the error on the session overview.
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    page = client.get(f"/admin/sessions_app/session/{session.id}/browse/").content.decode()
    assert "protocol_unknown_on_worker" in page


def test_the_same_run_advances_on_a_worker_carrying_the_version(application, make_version):
    version = make_version(
        application, version=3, provider="scripted", model_config={"steps": [{"text": "done"}]}
    )
    session, _ = session_create(agent_version=version)
    run, _ = run_start(session_id=session.id, content="please quote")
    assert run_advance(run_id=run.id) == "completed"
    assert Run.objects.get(pk=run.pk).error is None
