"""External maintainer API: plan / page / commit fenced by the frozen revision (SPEC §6, §9.1)."""

from __future__ import annotations

from sessions_app.models import KVEntry, MaintenanceJob


def kv(session_id) -> dict:
    return dict(KVEntry.objects.filter(session_id=session_id).values_list("key", "value"))


def long_session(api_session, *, interactions: int = 12, **kwargs):
    s = api_session(version=2, options={"pageSize": 10}, max_input_tokens=1000, **kwargs)
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
