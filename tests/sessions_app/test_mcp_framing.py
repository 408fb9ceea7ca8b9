"""The view an MCP call is framed by, and what a call costs (SPEC §11, issue 23.1).

`tool_call_record_and_dispatch` records a call against a view at the state its client saw:
an existing view at the current (revision, upper bound) is reused, one is built otherwise,
and the statements of a call do not grow with the number of views the session stored.
"""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app.models import Message, ProjectionSnapshot
from sessions_app.services.dispatch import FRAME_LOOKBACK, tool_call_record_and_dispatch

CONTROL = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE", "ROLLBACK")


def mcp_call(session_id, call_id: str, tool: str = "context_task_memory_get", **arguments):
    return tool_call_record_and_dispatch(
        session_id=session_id,
        tool_call_id=call_id,
        tool_name=tool,
        arguments={"purpose": "p", **arguments},
    )


def snapshot_of(session_id, call_id: str):
    return Message.objects.get(session_id=session_id, tool_call_id=call_id, kind="tool_call")


def test_a_call_reuses_the_hosts_view_at_the_current_state(api_session):
    s = api_session(version=2)
    s.input("start")
    view = s.project()
    receipt = mcp_call(s.id, "m1")
    assert receipt.result["success"] is True
    assert str(snapshot_of(s.id, "m1").snapshot_id) == view["snapshotId"]
    assert ProjectionSnapshot.objects.filter(session_id=s.id).count() == 1


def test_a_call_after_the_state_moved_is_framed_by_a_new_view_at_the_current_state(api_session):
    s = api_session(version=2)
    s.input("start")
    old = s.project()
    s.host_tool_work()  # the bound moves past the host's view
    mcp_call(s.id, "m1", "context_task_memory_set", memory="x")
    frame = ProjectionSnapshot.objects.get(id=snapshot_of(s.id, "m1").snapshot_id)
    assert str(frame.id) != old["snapshotId"]
    assert (frame.revision, frame.upper_bound) == (
        old["revision"],
        snapshot_of(s.id, "m1").index - 1,
    )


def test_the_statements_of_a_call_do_not_grow_with_the_stored_views(api_session):
    s = api_session(version=2)
    s.input("start")
    mcp_call(s.id, "warm-up")

    def counted(call_id: str) -> list[str]:
        with CaptureQueriesContext(connection) as queries:
            receipt = mcp_call(s.id, call_id, "context_task_memory_set", memory=call_id)
        assert receipt.result["success"] is True, receipt.result
        return [
            q["sql"] for q in queries.captured_queries if not q["sql"].lstrip().startswith(CONTROL)
        ]

    early = counted("early")
    for n in range(FRAME_LOOKBACK + 6):
        mcp_call(s.id, f"filler-{n}")
    assert ProjectionSnapshot.objects.filter(session_id=s.id).count() > FRAME_LOOKBACK + 6
    late = counted("late")
    assert len(late) == len(early), "\n".join(late)
