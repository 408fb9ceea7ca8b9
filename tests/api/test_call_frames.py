"""A tool call's frame on the wire (contract §3.1, §9.1, issue 42): `frame: {revision,
upperBound}` on every tool_call message, the state it was made against (its view's; an MCP
call's, the state its client saw), and null on the other kinds."""

from __future__ import annotations

from sessions_app.services.mcp_calls import tool_call_record_and_dispatch


def test_a_host_call_carries_its_views_frame_and_other_kinds_none(api_session):
    s = api_session()
    started = s.input("start")
    assert started["message"]["frame"] is None
    view = s.project()
    call = s.write(
        role="assistant",
        kind="tool_call",
        content="",
        toolCallId="h1",
        toolName="context_task_memory_get",
        arguments={"purpose": "p"},
        snapshotId=view["snapshotId"],
    )
    frame = {"revision": view["revision"], "upperBound": view["upperBound"]}
    assert call["frame"] == frame
    receipt = s.dispatch("h1")
    assert receipt["resultMessage"]["frame"] is None
    listed = s.client.get(s.path("messages/")).json()["messages"]
    assert [(m["kind"], m["frame"]) for m in listed] == [
        ("input", None),
        ("tool_call", frame),
        ("tool_result", None),
    ]


def test_an_mcp_call_names_no_snapshot_but_shows_its_frame(api_session):
    s = api_session()
    s.input("start")
    receipt = tool_call_record_and_dispatch(
        session_id=s.id,
        tool_call_id="m1",
        tool_name="context_task_memory_set",
        arguments={"purpose": "p", "memory": "quote"},
    )
    assert receipt.result["success"] is True
    listed = s.client.get(s.path("messages/")).json()["messages"]
    call = next(m for m in listed if m["toolCallId"] == "m1" and m["kind"] == "tool_call")
    assert call["snapshotId"] is None
    # Framed by the state at the call: the revision before its write, the bound below it.
    assert call["frame"] == {
        "revision": receipt.state_revision - 1,
        "upperBound": call["index"] - 1,
    }


def test_the_calls_of_a_recorded_turn_carry_its_views_frame(api_session):
    s = api_session()
    s.input("start")
    view = s.project()
    answer = {
        "content": "Noting it.",
        "toolCalls": [
            {
                "id": "t1",
                "name": "context_task_memory_set",
                "arguments": {"purpose": "p", "memory": "m"},
            }
        ],
    }
    turn = s.client.post(s.path("turns/"), {"snapshotId": view["snapshotId"], "answer": answer})
    assert turn.status_code == 201, turn.content
    call, result = turn.json()["messages"]
    assert call["frame"] == {"revision": view["revision"], "upperBound": view["upperBound"]}
    assert result["frame"] is None
