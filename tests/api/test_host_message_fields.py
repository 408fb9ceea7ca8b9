"""What a host writes is stored, or refused: never silently dropped (issue 23, item 12).

Assistant text may name the snapshot it was generated from (validated like a tool_call's);
other kinds than text and tool_call take no snapshotId. A host tool result carries its call's
tool name, in the API Message and in the admin, as dispatched protocol results do.
"""

from __future__ import annotations

import pytest

from sessions_app.models import Message


def text(**fields) -> dict:
    return {"role": "assistant", "kind": "text", "content": "The total is 42.", **fields}


def test_assistant_text_keeps_the_snapshot_it_was_generated_from(api_session):
    s = api_session()
    s.input("what is the total?")
    view = s.project()
    written = s.write(**text(snapshotId=view["snapshotId"].upper()))
    assert written["snapshotId"] == view["snapshotId"]
    listed = s.client.get(s.path("messages/")).json()["messages"][-1]
    assert (listed["kind"], listed["snapshotId"]) == ("text", view["snapshotId"])
    assert str(Message.objects.get(id=written["id"]).snapshot_id) == view["snapshotId"]
    # Without one, text is written as before.
    assert s.write(**text())["snapshotId"] is None


def test_assistant_text_naming_no_snapshot_of_this_session_is_refused(api_session):
    s = api_session()
    other = api_session(version=3)
    other.input("x")
    foreign = other.project()["snapshotId"]
    s.input("what is the total?")
    before = Message.objects.filter(session_id=s.id).count()
    for wrong in (foreign, "not-a-snapshot", "{" + foreign + "}"):
        response = s.client.post(s.path("messages/"), text(snapshotId=wrong))
        assert response.status_code == 400, response.content
        error = response.json()["error"]
        assert error["code"] == "snapshot_not_found"
        assert error["details"]["field"] == "snapshotId"
        assert "projection the text was generated from" in error["message"]
    assert Message.objects.filter(session_id=s.id).count() == before


@pytest.mark.parametrize(
    "body",
    [
        {"role": "tool", "kind": "tool_result", "content": "42", "toolCallId": "h1"},
        {"role": "user", "kind": "approval_feedback", "content": "ok", "toolCallId": "h1"},
        {"role": "user", "kind": "runtime_instruction", "content": "be brief"},
    ],
)
def test_a_snapshot_id_on_other_kinds_is_refused_not_dropped(api_session, body):
    s = api_session()
    s.input("look it up")
    view = s.project()
    s.write(
        role="assistant",
        kind="tool_call",
        content="",
        toolCallId="h1",
        toolName="lookup",
        arguments={},
        snapshotId=view["snapshotId"],
    )
    response = s.client.post(s.path("messages/"), {**body, "snapshotId": view["snapshotId"]})
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert (error["code"], error["details"]["field"]) == ("invalid_request", "snapshotId")
    assert f"a {body['kind']} message takes none" in error["message"]
    # The same message without it is written.
    assert s.client.post(s.path("messages/"), body).status_code == 201


def test_a_host_tool_result_carries_its_calls_tool_name(api_session, admin_client):
    s = api_session()
    s.input("look it up")
    _call_index, result_index = s.host_tool_work("price_lookup", "42")
    result = s.client.get(s.path("messages/")).json()["messages"][-1]
    assert (result["index"], result["kind"]) == (result_index, "tool_result")
    assert result["toolName"] == "price_lookup"
    row = Message.objects.get(session_id=s.id, index=result_index)
    assert row.tool_name == "price_lookup"
    # The operator sees it on the result's own page in the session browser.
    page = admin_client.get(f"/admin/sessions_app/session/{s.id}/browse/messages/{row.id}/")
    assert page.status_code == 200
    assert "<code>price_lookup</code> h" in page.content.decode()
