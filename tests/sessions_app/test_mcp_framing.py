"""The frame an MCP call is recorded with, and what a call costs (contract §13, issues 23.1, 35.2).

`tool_call_record_and_dispatch` records a call with its frame, the (revision, upper bound)
of the state its client saw, on the tool_call row: at the current state the session's own
(revision, bound), with no view built or stored; and the statements of a call do not grow
with the number of frames the session holds.
"""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app.models import Message, ProjectionSnapshot
from sessions_app.services.mcp_calls import FRAME_LOOKBACK, tool_call_record_and_dispatch

CONTROL = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE", "ROLLBACK")


def mcp_call(session_id, call_id: str, tool: str = "context_task_memory_get", **arguments):
    return tool_call_record_and_dispatch(
        session_id=session_id,
        tool_call_id=call_id,
        tool_name=tool,
        arguments={"purpose": "p", **arguments},
    )


def call_row(session_id, call_id: str) -> Message:
    return Message.objects.get(session_id=session_id, tool_call_id=call_id, kind="tool_call")


def test_a_call_at_the_hosts_view_is_framed_as_that_view_and_stores_none(api_session):
    s = api_session(version=2)
    s.input("start")
    view = s.project()
    receipt = mcp_call(s.id, "m1")
    assert receipt.result["success"] is True
    row = call_row(s.id, "m1")
    assert (row.frozen_revision, row.frozen_upper_bound) == (view["revision"], view["upperBound"])
    assert row.snapshot_id is None
    assert ProjectionSnapshot.objects.filter(session_id=s.id).count() == 1


def test_a_call_after_the_state_moved_is_framed_by_the_current_state(api_session):
    s = api_session(version=2)
    s.input("start")
    old = s.project()
    s.host_tool_work()  # the bound moves past the host's view
    mcp_call(s.id, "m1", "context_task_memory_set", memory="x")
    row = call_row(s.id, "m1")
    assert (row.frozen_revision, row.frozen_upper_bound) == (old["revision"], row.index - 1)
    assert ProjectionSnapshot.objects.filter(session_id=s.id).count() == 1  # the host's only


def test_a_call_at_an_older_revision_takes_the_newest_frame_there(api_session):
    s = api_session(version=2)
    s.input("start")
    first = mcp_call(s.id, "a", "context_task_memory_set", memory="1")
    seen = first.state_revision
    mcp_call(s.id, "b")  # a read at `seen`
    mcp_call(s.id, "c", "context_task_memory_set", memory="2")  # the newest frame at `seen`
    receipt = tool_call_record_and_dispatch(
        session_id=s.id,
        tool_call_id="late",
        tool_name="context_task_memory_get",
        arguments={"purpose": "p"},
        state_revision=seen,
    )
    assert receipt.result["success"] is True
    row = call_row(s.id, "late")
    assert (row.frozen_revision, row.frozen_upper_bound) == (seen, call_row(s.id, "c").index - 1)
    assert call_row(s.id, "c").frozen_revision == seen


def test_the_statements_of_a_call_do_not_grow_with_the_stored_frames(api_session):
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
    framed = Message.objects.filter(session_id=s.id, frozen_revision__isnull=False).count()
    assert framed > FRAME_LOOKBACK + 6
    late = counted("late")
    assert len(late) == len(early), "\n".join(late)
