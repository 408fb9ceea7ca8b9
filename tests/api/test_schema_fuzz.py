"""Schemathesis over our OpenAPI schema: whatever it sends, the API never answers 5xx, and
every answer has a documented status, content type and shape (errors included: `4XX`/`5XX`
state the one error shape)."""

from __future__ import annotations

import os

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from contextproto.wsgi import application

schema = schemathesis.openapi.from_wsgi("/api/v1/schema/", application)


@pytest.fixture
def fuzz_key(api_session):
    handle = api_session(version=2)
    handle.input("hello")
    return handle.client.key


# transaction=True: the WSGI handler closes DB connections after each request, which a test
# wrapped in one transaction would not survive.
@pytest.mark.django_db(transaction=True)
@schema.parametrize()
@settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "15")),
    derandomize=os.environ.get("FUZZ_RANDOM") != "1",
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_no_operation_answers_5xx_or_off_its_schema(case, fuzz_key):
    case.call_and_validate(
        headers={"Authorization": f"Bearer {fuzz_key}"},
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )
