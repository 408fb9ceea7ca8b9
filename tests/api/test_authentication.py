"""Every 401 names its challenge: `WWW-Authenticate: Bearer realm="api"` (RFC 9110)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

CHALLENGE = 'Bearer realm="api"'


@pytest.mark.parametrize(
    "header",
    [None, "Bearer cpa_unknown", "Basic dXNlcjpwdw==", "Bearer "],
    ids=["no-header", "unknown-key", "other-scheme", "empty-key"],
)
def test_a_401_carries_the_bearer_challenge(db, header):
    client = APIClient()
    if header is not None:
        client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/api/v1/api-keys/")
    assert response.status_code == 401, response.content
    assert response.json()["error"]["code"] == "not_authenticated"
    assert response["WWW-Authenticate"] == CHALLENGE


def test_other_refusals_carry_no_challenge(tenant):
    _, client = tenant()
    response = client.get("sessions/00000000-0000-0000-0000-000000000000/")
    assert response.status_code == 404
    assert "WWW-Authenticate" not in response
