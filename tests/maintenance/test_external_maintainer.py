"""External maintainer API: plan / page / commit fenced by the frozen revision (contract §6,
§12.1)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from sessions_app.maintenance import maintenance_execute, maintenance_sweep
from sessions_app.models import KVEntry, MaintenanceJob, Session
from tests.maintenance.conftest import MAX_INPUT_TOKENS


def kv(session_id) -> dict:
    return dict(KVEntry.objects.filter(session_id=session_id).values_list("key", "value"))


def long_session(api_session, *, interactions: int = 12, **kwargs):
    s = api_session(
        version=2, options={"pageSize": 10}, max_input_tokens=MAX_INPUT_TOKENS, **kwargs
    )
    s.input("prepare the quote; budget 5000")
    for n in range(interactions):
        s.host_tool_work(f"lookup{n}", "x" * 400)
    return s


def plan(s, **body):
    response = s.client.post(s.path("windows/main/maintenance/plan/"), body)
    assert response.status_code == 201, response.content
    return response.json()


def page(s, job, n):
    return s.client.get(s.path(f"windows/main/maintenance/{job['jobId']}/pages/{n}/"))


def commit(s, job, text):
    return s.client.post(
        s.path(f"windows/main/maintenance/{job['jobId']}/commit/"), {"checkpoint": text}
    )


def test_plan_pages_and_commit(api_session):
    s = long_session(api_session)
    job = plan(s)
    assert job["fromIndex"] == 1 and job["throughIndex"] > 1
    assert job["previousCheckpoint"] == ""
    assert len(job["sourceHash"]) == 64
    seen = []
    for n in range(job["pageCount"]):
        body = page(s, job, n).json()
        assert body["page"] == n and body["pageCount"] == job["pageCount"]
        seen += [m["index"] for m in body["messages"]]
    assert seen == list(range(1, job["throughIndex"] + 1))
    done = commit(s, job, "Quote in progress; budget 5000; lookups 0-5 done.")
    assert done.status_code == 200, done.content
    assert done.json()["coveredThrough"] == job["throughIndex"]
    state = kv(s.id)
    assert state["coveredThrough/main"] == job["throughIndex"]
    assert state["checkpoint/main"].startswith("Quote in progress")
    assert MaintenanceJob.objects.get(id=job["jobId"]).status == "committed"


def test_revision_change_between_pages_rejects_the_next_page(api_session):
    s = long_session(api_session)
    job = plan(s)
    assert job["pageCount"] >= 2
    assert page(s, job, 0).status_code == 200
    s.tool("context_task_memory_set", memory="moved")  # any committed KV change
    refused = page(s, job, 1)
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "maintenance_state_changed"
    refused = commit(s, job, "too late")
    assert refused.status_code == 409
    assert "checkpoint/main" not in kv(s.id)
    assert "revision moved" in MaintenanceJob.objects.get(id=job["jobId"]).reason
    # Re-plan at the new revision and commit.
    again = plan(s)
    assert again["frozenRevision"] > job["frozenRevision"]
    for n in range(again["pageCount"]):
        assert page(s, again, n).status_code == 200
    assert commit(s, again, "checkpoint").status_code == 200


def test_revision_change_after_the_last_page_rejects_the_commit(api_session):
    s = long_session(api_session)
    job = plan(s)
    for n in range(job["pageCount"]):
        assert page(s, job, n).status_code == 200
    before = kv(s.id)
    s.tool("context_task_memory_set", memory="moved")
    refused = commit(s, job, "checkpoint")
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "maintenance_state_changed"
    after = kv(s.id)
    assert after.get("coveredThrough/main") == before.get("coveredThrough/main")
    assert "checkpoint/main" not in after


def test_a_replanned_job_that_commits_forgets_the_earlier_rejection(api_session):
    s = long_session(api_session)
    job = plan(s)
    for n in range(job["pageCount"]):
        assert page(s, job, n).status_code == 200
    s.tool("context_task_memory_set", memory="moved")
    assert commit(s, job, "checkpoint").status_code == 409
    again = s.client.post(s.path("windows/main/maintenance/plan/"), {})
    assert again.status_code in (200, 201), again.content
    job = again.json()
    for n in range(job["pageCount"]):
        assert page(s, job, n).status_code == 200
    assert commit(s, job, "checkpoint").status_code == 200
    listed = s.client.get(s.path("maintenance/")).json()
    committed = next(j for j in listed["jobs"] if j["jobId"] == job["jobId"])
    assert committed["status"] == "committed"
    assert "revision moved" not in (committed.get("reason") or "")
    twice = commit(s, job, "checkpoint")
    assert twice.status_code == 409
    assert twice.json()["error"]["code"] == "maintenance_job_finished"
    assert "revision moved" not in twice.json()["error"]["message"]


def test_overlong_and_empty_checkpoints_are_refused(api_session):
    s = long_session(api_session)
    job = plan(s)
    too_long = commit(s, job, "x" * 3001)  # unified@2 default limit is 3000
    assert too_long.status_code == 400
    assert too_long.json()["error"]["code"] == "checkpoint_too_long"
    empty = commit(s, job, "   ")
    assert empty.json()["error"]["code"] == "checkpoint_empty"
    assert "checkpoint/main" not in kv(s.id)


def test_invalid_through_index_is_a_boundary_error(api_session):
    s = long_session(api_session)
    response = s.client.post(s.path("windows/main/maintenance/plan/"), {"throughIndex": 2})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "maintenance_boundary_invalid"
    assert response.json()["error"]["details"]["nearestValidBoundary"] is not None


@pytest.mark.parametrize("through", [0, -1, -(2**70)])
def test_a_through_index_of_zero_or_below_is_a_boundary_error_too(api_session, through):
    s = long_session(api_session)
    response = s.client.post(s.path("windows/main/maintenance/plan/"), {"throughIndex": through})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "maintenance_boundary_invalid"


def test_after_commit_covered_folds_are_compressed_but_readable(api_session):
    s = long_session(api_session, interactions=4)
    folded = s.tool(
        "context_fold_create",
        fromIndex=2,
        throughIndex=5,
        summary="lookups 0-1",
        expectedWindowId="main",
    )
    assert folded["success"], folded
    for n in range(10):
        s.host_tool_work(f"more{n}", "y" * 400)
    job = plan(s)
    assert job["throughIndex"] >= 5
    for n in range(job["pageCount"]):
        body = page(s, job, n).json()
        # Raw text, never the fold summary in place of it.
        assert all(m["kind"] != "context_fold" for m in body["messages"])
    assert commit(s, job, "early lookups done").status_code == 200
    listed = s.tool("context_fold_list")
    assert listed["folds"][0]["compressed"] is True
    view = s.project()
    assert all(src["foldId"] != folded["foldId"] for src in view["sources"])
    # The current run's input (#1) is covered but still in the view.
    raw_indices = [src["firstIndex"] for src in view["sources"] if src["derivedType"] == "raw"]
    assert 1 in raw_indices
    header = next(m for m in view["messages"] if m["kind"] == "context_header")
    assert "early lookups done" in header["content"]
    read = s.tool("context_fold_read", foldId=folded["foldId"])
    assert read["success"] and '"index":2' in read["text"]


def test_covered_through_never_moves_back(api_session):
    s = long_session(api_session)
    job = plan(s)
    assert commit(s, job, "first").status_code == 200
    response = s.client.post(
        s.path("windows/main/maintenance/plan/"), {"throughIndex": job["throughIndex"] - 1}
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "maintenance_boundary_invalid"
    assert kv(s.id)["coveredThrough/main"] == job["throughIndex"]


# ---------------------------------------------------------------- refused and abandoned plans


def request_maintenance(s, capture) -> tuple[dict, int]:
    """POST maintenance/ as the token trigger would; return (body, worker tasks enqueued)."""
    with capture() as enqueued:
        response = s.client.post(s.path("windows/main/maintenance/"))
    assert response.status_code == 202, response.content
    return response.json(), len(enqueued)


@pytest.mark.parametrize(
    ("body", "interactions", "code"),
    [
        ({"throughIndex": 2}, 12, "maintenance_boundary_invalid"),
        ({}, 1, "maintenance_nothing_to_compress"),
    ],
)
def test_a_refused_plan_leaves_no_job_that_blocks_the_bound_maintainer(
    with_maintainer, django_capture_on_commit_callbacks, body, interactions, code
):
    s = with_maintainer([{"text": "checkpoint by the bound maintainer"}], interactions=interactions)
    refused = s.client.post(s.path("windows/main/maintenance/plan/"), body)
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == code
    assert not MaintenanceJob.objects.filter(session_id=s.id).exists()
    for n in range(12 - interactions):  # the conversation goes on until maintenance is due
        s.host_tool_work(f"later{n}", "x" * 400)
    queued, enqueued = request_maintenance(s, django_capture_on_commit_callbacks)
    assert queued["status"] == "queued" and enqueued == 1
    job = MaintenanceJob.objects.get(id=queued["jobId"])
    assert not job.external and job.trigger == "api"
    assert maintenance_execute(job_id=job.id).status == "committed"
    assert kv(s.id)["checkpoint/main"] == "checkpoint by the bound maintainer"


def test_a_refused_replan_keeps_the_external_job_and_its_valid_plan(api_session):
    s = long_session(api_session)
    job = plan(s)
    refused = s.client.post(s.path("windows/main/maintenance/plan/"), {"throughIndex": 2})
    assert refused.status_code == 400
    stored = MaintenanceJob.objects.get(id=job["jobId"])
    assert stored.status == "queued" and "maintenance_boundary_invalid" in stored.reason
    for n in range(job["pageCount"]):
        assert page(s, job, n).status_code == 200
    assert commit(s, job, "checkpoint").status_code == 200


def test_an_abandoned_external_job_expires_and_no_longer_blocks(
    with_maintainer, django_capture_on_commit_callbacks, settings
):
    settings.MAINTENANCE_EXTERNAL_JOB_TTL_SECONDS = 600
    s = with_maintainer([{"text": "checkpoint by the bound maintainer"}])
    abandoned = plan(s)
    assert page(s, abandoned, 0).status_code == 200
    # Within its TTL the external job is the window's one active job.
    busy, enqueued = request_maintenance(s, django_capture_on_commit_callbacks)
    assert busy["jobId"] == abandoned["jobId"] and enqueued == 0
    # Its maintainer sends nothing more for longer than the TTL.
    MaintenanceJob.objects.filter(id=abandoned["jobId"]).update(
        updated_at=timezone.now() - timedelta(seconds=601)
    )
    queued, enqueued = request_maintenance(s, django_capture_on_commit_callbacks)
    assert queued["jobId"] != abandoned["jobId"] and enqueued == 1
    expired = MaintenanceJob.objects.get(id=abandoned["jobId"])
    assert expired.status == "failed" and expired.reason.startswith("expired")
    assert expired.history[-1]["event"] == "expired" and expired.finished_at is not None
    assert maintenance_execute(job_id=queued["jobId"]).status == "committed"
    # The maintainer that abandoned its plan comes back too late: nothing is written.
    revision = Session.objects.get(pk=s.id).state_revision
    late = commit(s, abandoned, "late checkpoint")
    assert late.status_code == 409
    assert late.json()["error"]["code"] == "maintenance_job_finished"
    assert kv(s.id)["checkpoint/main"] == "checkpoint by the bound maintainer"
    assert Session.objects.get(pk=s.id).state_revision == revision


def test_the_sweeper_expires_abandoned_external_jobs_and_spares_live_ones(
    api_session, with_maintainer, settings
):
    settings.MAINTENANCE_EXTERNAL_JOB_TTL_SECONDS = 600
    live_session, idle_session = long_session(api_session), with_maintainer([])
    live, idle = plan(live_session), plan(idle_session)
    MaintenanceJob.objects.filter(id=idle["jobId"]).update(
        updated_at=timezone.now() - timedelta(seconds=601)
    )
    maintenance_sweep()
    assert MaintenanceJob.objects.get(id=idle["jobId"]).status == "failed"
    assert MaintenanceJob.objects.get(id=live["jobId"]).status == "queued"
    refused = page(idle_session, idle, 0)
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "maintenance_job_finished"
    assert page(live_session, live, 0).status_code == 200


def test_an_external_job_past_its_ttl_refuses_pages_before_any_sweep(api_session, settings):
    settings.MAINTENANCE_EXTERNAL_JOB_TTL_SECONDS = 600
    s = long_session(api_session)
    job = plan(s)
    MaintenanceJob.objects.filter(id=job["jobId"]).update(
        updated_at=timezone.now() - timedelta(seconds=601)
    )
    refused = page(s, job, 0)
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "maintenance_job_finished"
    assert MaintenanceJob.objects.get(id=job["jobId"]).status == "failed"
    # A new plan for the window gets a new job at once.
    assert plan(s)["jobId"] != job["jobId"]
