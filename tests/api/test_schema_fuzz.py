"""Schemathesis over our OpenAPI schema: whatever it sends, the API never answers 5xx."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from contextproto.wsgi import application

schema = schemathesis.openapi.from_wsgi("/api/v1/schema/", application)


@pytest.fixture
def fuzz_key(api_session):
    # The WSGI handler closes DB connections at request end; inside a test transaction that
    # would drop the test's connection (Django's test client disconnects it the same way).
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    """A session key of a live unified@2 session, so session paths reach real handlers."""
    handle = api_session(version=2)
    handle.input("hello")
    yield handle.client.key
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.mark.django_db
@schema.parametrize()
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_no_operation_answers_5xx(case, fuzz_key):
    case.call_and_validate(
        headers={"Authorization": f"Bearer {fuzz_key}"}, checks=[not_a_server_error]
    )
