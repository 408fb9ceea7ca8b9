"""An external host reports a turn's provider usage: stored once, drives maintenance (§6)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from sessions_app.models import MaintenanceJob, ProjectionSnapshot
from sessions_app.store import hooks
from tests.conftest import KeyClient, SessionHandle


@pytest.fixture
def maintained(tenant, make_version):
    """An external-host unified@2 session whose version binds a maintainer (8000 tokens)."""
    app, client = tenant("usage")
    maintainer = make_version(
        app,
        name="context-maintainer",
        provider="scripted",
        model_config={"steps": [{"text": "checkpoint"}]},
        protocol="prefix",
    )
    version = make_version(app, max_input_tokens=8000, maintainer_agent=maintainer.agent)
    created = client.post("sessions/", {"agentVersionId": str(version.id)}).json()
    s = SessionHandle(app, client, KeyClient(created["sessionKey"]), created["id"], version)
    s.input("prepare the quote")
    return s


def report(s, snapshot_id: str, body: dict, client=None):
    client = client or s.client
    return client.post(s.path(f"snapshots/{snapshot_id}/usage/"), body)


def test_usage_below_the_threshold_is_stored_and_queues_nothing(maintained):
    snapshot = maintained.project()
    answer = report(maintained, snapshot["snapshotId"], {"inputTokens": 5999, "outputTokens": 7})
    assert answer.status_code == 200, answer.content
    assert answer.json() == {
        "snapshotId": snapshot["snapshotId"],
        "usage": {"inputTokens": 5999, "outputTokens": 7},
        "replayed": False,
        "maintenanceJobId": None,
    }
    stored = ProjectionSnapshot.objects.get(pk=snapshot["snapshotId"]).usage
    assert stored == {"inputTokens": 5999, "outputTokens": 7}
    assert not MaintenanceJob.objects.filter(session_id=maintained.id).exists()
    # The snapshots list shows it, as for turns of the built-in runtime.
    listed = maintained.client.get(maintained.path("snapshots/")).json()["snapshots"]
    assert listed[0]["usage"] == stored


def test_usage_over_the_threshold_queues_exactly_one_maintenance_job(
    maintained, django_capture_on_commit_callbacks, monkeypatch
):
    snapshot = maintained.project()
    body = {"inputTokens": 6000, "outputTokens": 12, "cachedInputTokens": 4000}
    enqueued: list[str] = []
    monkeypatch.setattr(hooks.maintenance_job_enqueue, "_target", enqueued.append)
    with django_capture_on_commit_callbacks(execute=True):
        answer = report(maintained, snapshot["snapshotId"], body)
    assert answer.status_code == 200, answer.content
    [job] = MaintenanceJob.objects.filter(session_id=maintained.id)
    assert (job.trigger, job.window_id, job.external) == ("input_tokens", "main", False)
    assert answer.json()["maintenanceJobId"] == str(job.id)
    # The worker task, once, after commit (the /metrics counters move after commit too).
    assert enqueued == [str(job.id)]

    # The same report again (a host retry) replays: no second job, no second task.
    with django_capture_on_commit_callbacks() as again:
        replay = report(maintained, snapshot["snapshotId"], body)
    assert replay.status_code == 200
    assert replay.json()["replayed"] is True and replay.json()["maintenanceJobId"] is None
    assert replay.json()["usage"] == body
    assert len(again) == 0
    assert MaintenanceJob.objects.filter(session_id=maintained.id).count() == 1


def test_a_different_report_for_a_reported_snapshot_is_refused(maintained):
    snapshot = maintained.project()
    first = {"inputTokens": 100, "outputTokens": 5}
    assert report(maintained, snapshot["snapshotId"], first).status_code == 200
    refused = report(maintained, snapshot["snapshotId"], {"inputTokens": 7000, "outputTokens": 5})
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "usage_already_reported"
    assert error["details"]["usage"] == first
    assert ProjectionSnapshot.objects.get(pk=snapshot["snapshotId"]).usage == first
    assert not MaintenanceJob.objects.filter(session_id=maintained.id).exists()


def test_another_sessions_snapshot_is_not_found(maintained, api_session):
    other = api_session()
    other.input("hello")
    foreign = other.project()["snapshotId"]
    body = {"inputTokens": 1, "outputTokens": 1}
    refused = report(maintained, foreign, body)
    assert refused.status_code == 404
    assert refused.json()["error"]["code"] == "not_found"
    # Nor with the application key of the session, nor a malformed id.
    assert report(maintained, foreign, body, maintained.app_client).status_code == 404
    assert report(maintained, "not-a-uuid", body).status_code == 404
    # Another session's key cannot reach this session's snapshots.
    own = maintained.project()["snapshotId"]
    assert report(maintained, own, body, other.client).status_code == 404
    assert ProjectionSnapshot.objects.get(pk=foreign).usage is None


def test_the_application_key_of_the_session_may_report(maintained):
    snapshot = maintained.project()
    body = {"inputTokens": 10, "outputTokens": 2}
    answer = report(maintained, snapshot["snapshotId"], body, maintained.app_client)
    assert answer.status_code == 200, answer.content


@pytest.mark.parametrize(
    "body",
    [
        {"inputTokens": 10},
        {"inputTokens": "10", "outputTokens": 2},
        {"inputTokens": 10.5, "outputTokens": 2},
        {"inputTokens": True, "outputTokens": 2},
        {"inputTokens": -1, "outputTokens": 2},
        {"inputTokens": 2**53, "outputTokens": 2},
        {"inputTokens": 10, "outputTokens": 2, "cachedInputTokens": None},
        {"inputTokens": 10, "outputTokens": 2, "totalTokens": 12},
        [10, 2],
    ],
)
def test_the_body_is_strict(maintained, body):
    snapshot = maintained.project()
    refused = report(maintained, snapshot["snapshotId"], body)
    assert refused.status_code == 400, refused.content
    assert ProjectionSnapshot.objects.get(pk=snapshot["snapshotId"]).usage is None


def test_the_operation_is_declared_in_the_openapi_schema(db):
    schema = APIClient().get("/api/v1/schema/", {"format": "json"}).json()
    operation = schema["paths"]["/api/v1/sessions/{session_id}/snapshots/{snapshot_id}/usage/"]
    post = operation["post"]
    ref = post["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    # contract §8.2: the body is the counts or {"usage": <the provider's usage object>}.
    report_schema = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    counts_ref, provider_ref = (form["$ref"] for form in report_schema["oneOf"])
    provider = schema["components"]["schemas"][provider_ref.rsplit("/", 1)[1]]
    assert set(provider["properties"]) == {"usage"} and provider["required"] == ["usage"]
    component = schema["components"]["schemas"][counts_ref.rsplit("/", 1)[1]]
    assert set(component["properties"]) == {
        "inputTokens",
        "outputTokens",
        "cacheReadInputTokens",
        "cachedInputTokens",
        "cacheWriteInputTokens",
    }
    assert set(component["required"]) == {"inputTokens", "outputTokens"}
    assert component["properties"]["inputTokens"]["type"] == "integer"
    assert component["properties"]["inputTokens"]["minimum"] == 0
    assert "200" in post["responses"]


# ------------------------------------------------------------ cache fields and cost (§15)

PRICES = {"input": 2.5, "cacheRead": 0.25, "cacheWrite": 3.125, "output": 10}


@pytest.fixture
def priced(api_session):
    """An external-host session whose version has prices (per million tokens)."""
    s = api_session(prices=PRICES)
    s.input("prepare the quote")
    return s


def _columns(snapshot_id: str) -> tuple:
    row = ProjectionSnapshot.objects.get(pk=snapshot_id)
    return (
        row.input_tokens,
        row.cache_read_input_tokens,
        row.cache_write_input_tokens,
        row.output_tokens,
        row.cost,
    )


def test_cache_fields_are_stored_by_kind_and_the_turn_is_priced(priced):
    snapshot = priced.project()["snapshotId"]
    body = {
        "inputTokens": 10_000,
        "outputTokens": 200,
        "cacheReadInputTokens": 8_000,
        "cacheWriteInputTokens": 1_500,
    }
    answer = report(priced, snapshot, body)
    assert answer.status_code == 200, answer.content
    assert answer.json()["usage"] == body  # kept as reported
    # (500 x 2.5 + 8000 x 0.25 + 1500 x 3.125 + 200 x 10) / 1e6
    assert _columns(snapshot) == (10_000, 8_000, 1_500, 200, Decimal("0.0099375"))


def test_cached_input_tokens_is_the_older_name_of_cache_reads(priced):
    snapshot = priced.project()["snapshotId"]
    body = {"inputTokens": 3000, "outputTokens": 10, "cachedInputTokens": 2048}
    assert report(priced, snapshot, body).status_code == 200
    # (952 x 2.5 + 2048 x 0.25 + 10 x 10) / 1e6
    assert _columns(snapshot) == (3000, 2048, 0, 10, Decimal("0.002992"))
    # Both spellings with the same value are one field, not a conflict.
    same = {**body, "cacheReadInputTokens": 2048}
    replay = report(priced, snapshot, same)
    assert replay.status_code == 200, replay.content
    assert replay.json()["replayed"] is True


def test_a_retry_may_spell_the_same_counts_either_way(priced):
    snapshot = priced.project()["snapshotId"]
    first = {"inputTokens": 3000, "outputTokens": 10, "cachedInputTokens": 2048}
    assert report(priced, snapshot, first).status_code == 200
    again = {
        "inputTokens": 3000,
        "outputTokens": 10,
        "cacheReadInputTokens": 2048,
        "cacheWriteInputTokens": 0,
    }
    replay = report(priced, snapshot, again)
    assert replay.status_code == 200 and replay.json()["replayed"] is True
    assert replay.json()["usage"] == first  # the first report stands
    changed = report(priced, snapshot, {**again, "cacheReadInputTokens": 1024})
    assert changed.status_code == 409
    assert changed.json()["error"]["code"] == "usage_already_reported"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (
            {"inputTokens": 10, "outputTokens": 2, "cacheReadInputTokens": -1},
            "cacheReadInputTokens",
        ),
        ({"inputTokens": 10, "outputTokens": 2, "cachedInputTokens": -3}, "cachedInputTokens"),
        (
            {"inputTokens": 10, "outputTokens": 2, "cacheWriteInputTokens": 1.5},
            "cacheWriteInputTokens",
        ),
        (
            {"inputTokens": 10, "outputTokens": 2, "cacheWriteInputTokens": "4"},
            "cacheWriteInputTokens",
        ),
        (
            {"inputTokens": 10, "outputTokens": 2, "cacheReadInputTokens": 11},
            "cacheReadInputTokens",
        ),
        ({"inputTokens": 10, "outputTokens": 2, "cachedInputTokens": 11}, "cachedInputTokens"),
        (
            {"inputTokens": 10, "outputTokens": 2, "cacheWriteInputTokens": 11},
            "cacheWriteInputTokens",
        ),
        (
            {
                "inputTokens": 10,
                "outputTokens": 2,
                "cacheReadInputTokens": 6,
                "cacheWriteInputTokens": 5,
            },
            "cacheWriteInputTokens",
        ),
        (
            {
                "inputTokens": 10,
                "outputTokens": 2,
                "cacheReadInputTokens": 4,
                "cachedInputTokens": 5,
            },
            "cachedInputTokens",
        ),
    ],
)
def test_bad_cache_counts_are_refused_naming_the_field(priced, body, field):
    snapshot = priced.project()["snapshotId"]
    refused = report(priced, snapshot, body)
    assert refused.status_code == 400, refused.content
    error = refused.json()["error"]
    assert error["code"] == "invalid_request"
    assert [e["field"] for e in error["details"]["errors"]] == [field]
    assert field in error["message"]
    assert _columns(snapshot) == (None, 0, 0, None, None)
    assert ProjectionSnapshot.objects.get(pk=snapshot).usage is None
