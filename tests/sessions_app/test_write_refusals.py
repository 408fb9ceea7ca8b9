"""Refusals of the write services come before anything is written (issue 17: the former guards)."""

from __future__ import annotations

import pytest

from contextproto.errors import ApplicationError
from sessions_app import maintenance
from sessions_app.models import ClientWrite, MaintenanceJob, Message, Run
from sessions_app.services import runs


def test_an_api_maintenance_request_without_a_bound_maintainer_is_refused(session):
    with pytest.raises(ApplicationError) as refused:
        maintenance.maintenance_request(session_id=session.id, window_id="main", trigger="api")
    assert (refused.value.code, refused.value.status) == ("maintainer_not_bound", 400)
    assert not MaintenanceJob.objects.filter(session=session).exists()


def test_other_triggers_do_not_need_a_bound_maintainer(session):
    job, created = maintenance.maintenance_request(
        session_id=session.id, window_id="main", trigger="external", external=True
    )
    assert created and job.trigger == "external"


def test_bad_input_content_is_refused_before_the_client_message_id_is_looked_up(session):
    first, replayed = runs.run_start_once(
        session_id=session.id, content="hello", client_message_id="c-1"
    )
    assert not replayed
    with pytest.raises(ApplicationError) as refused:
        # The id is taken by another write: the bad body answers content_invalid, not 409.
        runs.run_start_once(session_id=session.id, content=[], client_message_id="c-1")
    assert (refused.value.code, refused.value.status) == ("content_invalid", 400)
    assert Message.objects.filter(session=session).count() == first.index
    assert Run.objects.filter(session=session).count() == 1
    assert ClientWrite.objects.filter(session=session).count() == 1


def test_a_retried_input_is_replayed(session):
    first, _ = runs.run_start_once(session_id=session.id, content="hi", client_message_id="c-2")
    again, replayed = runs.run_start_once(
        session_id=session.id, content="hi", client_message_id="c-2"
    )
    assert replayed and again.index == first.index
