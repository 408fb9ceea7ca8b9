"""What the external maintainer endpoints accept (issue 23, items 5 and 14).

`throughIndex` is a JSON integer: DRF's IntegerField took "3" (and 3.0) as 3. Job ids in
paths are accepted only as the API issues them.
"""

from __future__ import annotations

import pytest

from sessions_app.models import MaintenanceJob
from tests.api.test_agents_api import GOOD_VERSION, new_agent, new_version
from tests.api.test_canonical_ids import foreign_spellings
from tests.maintenance.test_external_maintainer import long_session, plan


@pytest.mark.parametrize("through", ["3", " 3", "3.0", 3.0, True, False, [3], {"n": 3}])
def test_through_index_must_be_a_json_integer(api_session, through):
    s = long_session(api_session, interactions=4)
    response = s.client.post(s.path("windows/main/maintenance/plan/"), {"throughIndex": through})
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["details"]["errors"][0]["field"] == "throughIndex"
    assert "JSON integer" in error["message"]
    assert not MaintenanceJob.objects.filter(session_id=s.id).exists()  # nothing written


def test_an_integer_through_index_still_plans(api_session):
    s = long_session(api_session, interactions=4)
    whole = plan(s)
    MaintenanceJob.objects.filter(id=whole["jobId"]).update(status="expired")
    assert plan(s, throughIndex=whole["throughIndex"])["throughIndex"] == whole["throughIndex"]


def test_job_paths_resolve_only_the_api_spellings(api_session):
    s = long_session(api_session, interactions=4)
    job = plan(s)
    base = "windows/main/maintenance/"
    for name, spelled in foreign_spellings(job["jobId"]).items():
        response = s.client.get(s.path(f"{base}{spelled}/pages/0/"))
        assert response.status_code == 404, (name, response.content)
        assert response.json()["error"]["code"] == "not_found"
        committed = s.client.post(s.path(f"{base}{spelled}/commit/"), {"checkpoint": "x"})
        assert committed.status_code == 404, name
    assert s.client.get(s.path(f"{base}{job['jobId'].upper()}/pages/0/")).status_code == 200
    assert MaintenanceJob.objects.get(id=job["jobId"]).status != "committed"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("contextProtocolVersion", "3"),
        ("contextProtocolVersion", 3.0),
        ("contextProtocolVersion", True),
        ("maxTurnsPerRun", "12"),
        ("maxTurnsPerRun", False),
        ("model.maxInputTokens", "8000"),
        ("model.maxInputTokens", 8000.0),
    ],
)
def test_integer_fields_of_agent_versions_take_json_integers_only(tenant, field, value):
    _, client = tenant()
    agent_id = new_agent(client)
    if field.startswith("model."):
        body = {"model": {**GOOD_VERSION["model"], field.removeprefix("model."): value}}
    else:
        body = {field: value}
    response = client.post(f"agents/{agent_id}/versions/", {**GOOD_VERSION, **body})
    assert response.status_code == 400, response.content
    assert response.json()["error"]["details"]["errors"][0]["field"] == field
    draft = new_version(client, agent_id)
    patched = client.patch(f"agent-versions/{draft['id']}/", body)
    assert patched.status_code == 400, patched.content
    assert patched.json()["error"]["details"]["errors"][0]["field"] == field


def test_token_counts_of_a_usage_report_take_json_integers_only(api_session):
    s = api_session()
    s.input("hi")
    snapshot = s.project()["snapshotId"]
    for wrong in ("10", 10.0, True):
        response = s.client.post(
            s.path(f"snapshots/{snapshot}/usage/"), {"inputTokens": wrong, "outputTokens": 1}
        )
        assert response.status_code == 400, (wrong, response.content)
        assert response.json()["error"]["details"]["errors"][0]["field"] == "inputTokens"
