"""unified@4 through the service (contract §9): pressure from the AgentVersion and the job table,
the projection cache, context_history_read on archived messages, raw maintenance pages."""

from __future__ import annotations

import json

from django.urls import reverse

from sessions_app.admin_views import context as viewer
from sessions_app.models import MaintenanceJob, ProjectionSnapshot
from sessions_app.services import archive

RESULT = "price list: " + "1300 EUR per laptop; " * 100  # > 1000 characters
# Mask every long result as soon as it is not the newest one.
EAGER = {"maskKeepRecent": 1, "maskStep": 1}


def v4_session(api_session, options: dict | None = None, **fields):
    return api_session(
        version=4,
        options=options if options is not None else EAGER,
        max_input_tokens=fields.pop("max_input_tokens", 32000),
        maintenance_trigger_ratio=fields.pop("maintenance_trigger_ratio", 0.7),
        **fields,
    )


def state(view: dict) -> dict:
    (message,) = [m for m in view["messages"] if m["kind"] == "context_state"]
    return json.loads(message["content"].split("\n", 1)[1])


def masked(view: dict) -> list[int]:
    return [s["firstIndex"] for s in view["sources"] if s["derivedType"] == "masked"]


def test_pressure_comes_from_the_agent_version_and_the_queued_job(api_session):
    s = v4_session(api_session, max_input_tokens=32001, maintenance_trigger_ratio=0.7)
    s.input("quote please")
    first = s.project()
    pressure = state(first)["contextPressure"]
    # ceil(0.7 * 32001): the fewest reported input tokens that queue maintenance.
    assert pressure["maxInputTokens"] == 32001 and pressure["triggerTokens"] == 22401
    assert pressure["maintenancePending"] is False
    assert s.project()["snapshotId"] == first["snapshotId"]  # same turn: the cached view

    # A job queued for the window changes no revision and writes no message, but the view
    # must not keep saying that nothing is pending: the cache builds a new one.
    job = MaintenanceJob.objects.create(session_id=s.id, window_id="main", trigger="tool")
    queued = s.project()
    assert queued["snapshotId"] != first["snapshotId"]
    assert (queued["revision"], queued["upperBound"]) == (first["revision"], first["upperBound"])
    assert state(queued)["contextPressure"]["maintenancePending"] is True
    assert s.project()["snapshotId"] == queued["snapshotId"]
    job.status = MaintenanceJob.Status.RUNNING
    job.save(update_fields=["status"])
    assert s.project()["snapshotId"] == queued["snapshotId"]  # still pending
    # A job of another window is not this view's business.
    job.status = MaintenanceJob.Status.FAILED
    job.save(update_fields=["status"])
    MaintenanceJob.objects.create(session_id=s.id, window_id="elsewhere", trigger="tool")
    done = s.project()
    assert done["snapshotId"] not in (first["snapshotId"], queued["snapshotId"])
    assert state(done)["contextPressure"]["maintenancePending"] is False


def test_view_tokens_are_the_breakdowns_parts_but_the_state_message(api_session):
    s = v4_session(api_session)
    s.input("quote please")
    for _ in range(3):
        s.host_tool_work("lookup", RESULT)
    view = s.project()  # neutral: the request's tools are the ones counted
    assert masked(view) == [3, 5]
    snapshot = ProjectionSnapshot.objects.get(pk=view["snapshotId"])
    breakdown = viewer.snapshot_breakdown(snapshot)
    assert state(view)["contextPressure"]["viewTokens"] == (
        breakdown.total - breakdown.tokens("state")
    )
    # The masked results are their own part of the breakdown.
    part = next(p for p in breakdown.segments if p.key == "masked")
    assert part.messages == 2 and part.tokens > 0
    assert breakdown.tokens("history") > 0


def test_history_read_serves_archived_messages_through_the_dispatcher(api_session):
    s = v4_session(api_session)
    s.input("quote please")
    _call, result = s.host_tool_work("lookup", RESULT)
    s.host_tool_work("lookup", "stock 40")
    assert archive.archive_session(session_id=s.id, keep_last=0, chunk_size=1)
    view = s.project()
    assert masked(view) == [result]
    stub = next(m for m in view["messages"] if m["kind"] == "tool_result")["content"]
    assert stub == (
        f"[tool result #{result} of lookup masked: {len(RESULT)} characters; read it with "
        f'context_history_read {{"index": {result}}}]'
    )
    call_id = s.call("context_history_read", view, index=result)
    receipt = s.dispatch(call_id)
    read = receipt["result"]
    assert read["success"] is True, read
    assert (read["index"], read["windowId"], read["nextCursor"]) == (result, "main", None)
    raw = json.loads(read["text"])
    assert (raw["content"], raw["kind"], raw["index"]) == (RESULT, "tool_result", result)
    assert s.dispatch(call_id)["replayed"] is True

    # Above the call's frozen bound: a correctable error receipt, and the session goes on.
    frozen = s.project()
    beyond = s.tool("context_history_read", frozen, index=frozen["upperBound"] + 1)
    assert beyond["success"] is False
    assert beyond["error"]["code"] == "history_index_out_of_range"
    assert beyond["error"]["correctable"] is True


def test_maintenance_pages_are_the_raw_messages_never_the_stubs(api_session):
    s = v4_session(api_session, options={**EAGER, "pageSize": 10}, max_input_tokens=8000)
    s.input("quote please")
    for _ in range(4):
        s.host_tool_work("lookup", RESULT)
    view = s.project()
    assert masked(view) == [3, 5, 7]
    plan = s.client.post(s.path("windows/main/maintenance/plan/"), {"throughIndex": 7})
    assert plan.status_code == 201, plan.content
    job = plan.json()
    pages = [
        s.client.get(s.path(f"windows/main/maintenance/{job['jobId']}/pages/{n}/")).json()
        for n in range(job["pageCount"])
    ]
    results = [m for p in pages for m in p["messages"] if m["kind"] == "tool_result"]
    assert [m["index"] for m in results] == [3, 5, 7]
    assert all(m["content"] == RESULT for m in results)


def test_the_context_viewer_shows_a_stub_beside_the_message_it_masks(api_session, admin_client):
    s = v4_session(api_session)
    s.input("quote please")
    _, result = s.host_tool_work("lookup", RESULT)
    s.host_tool_work("lookup", "stock 40")
    view = s.project()
    page = admin_client.get(
        reverse("admin:sessions_app_session_browse_snapshot", args=[s.id, view["snapshotId"]])
    )
    assert page.status_code == 200
    body = page.content.decode()
    # The raw pane marks the original as masked and links to its stub in the view.
    position = next(i for i, src in enumerate(view["sources"]) if src["firstIndex"] == result)
    raw_row = body[body.index(f'id="r{result}"') :]
    raw_row = raw_row[: raw_row.index("</tr>")]
    assert 'data-status="masked"' in raw_row and f'href="#v{position}"' in raw_row
    # The view pane shows the stub, badged masked, leading back to the raw message.
    view_row = body[body.index(f'id="v{position}"') :]
    view_row = view_row[: view_row.index("</tr>")]
    assert "badge-masked" in view_row and f"#r{result}" in view_row
    assert "masked: " in view_row and "context_history_read" in view_row
    assert 'data-segment="masked"' in body


def test_after_a_return_the_parents_view_shows_what_the_sub_task_produced(api_session):
    # contract §9: the state message names the completed window and its outcome, so the model
    # does not re-open a finished window to find out what it did.
    s = v4_session(api_session)
    s.input("quote ACME, then schedule delivery")
    opened = s.tool(
        "context_window_open",
        windowId="quote",
        goal="prepare the ACME quote",
        input="5000 units of A-100",
        expectedWindowId="main",
    )
    assert opened["success"], opened
    done = s.tool(
        "context_window_complete",
        outcome="Quote sent: 57,040 EUR.",
        expectedWindowId="quote",
    )
    assert done["success"] and done["windowId"] == "main", done
    after = state(s.project("anthropic-messages"))
    assert (after["windowId"], after["enteredFrom"]) == ("main", "quote")
    assert after["handoffInput"] == {
        "completedWindowId": "quote",
        "goal": "prepare the ACME quote",
        "outcome": "Quote sent: 57,040 EUR.",
    }
