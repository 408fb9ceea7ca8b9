"""A dispatch runs a fixed, small number of statements, whatever the session's size (#13)."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app.services.dispatch import tool_dispatch

# Reads and writes of one dispatch, transaction control (BEGIN, SAVEPOINT, ...) not counted:
# the session lock; the call and its answer; the snapshot and the message before the call;
# the KV the handler reads; for a fold the window's outline and the fold checks; the KV
# limits and upserts (KV and its index table); the result message and its window counter;
# the session row; the receipt.
BUDGET = {"context_fold_create": 15, "context_window_open": 13}
CONTROL = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE", "ROLLBACK")


def statements(session_id, call_id: str) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        receipt = tool_dispatch(session_id=session_id, tool_call_id=call_id)
    assert receipt.result["success"], receipt.result
    return [q["sql"] for q in queries.captured_queries if not q["sql"].lstrip().startswith(CONTROL)]


def test_dispatch_statements_stay_within_budget(api_session):
    s = api_session(version=2)
    s.input("start")
    for n in range(30):
        s.host_tool_work(result=f"lookup {n}")
    first, last = s.host_tool_work(result="the one to fold")
    fold = s.call(
        "context_fold_create",
        fromIndex=first,
        throughIndex=last,
        summary="folded",
        expectedWindowId="main",
    )
    folded = statements(s.id, fold)
    assert len(folded) <= BUDGET["context_fold_create"], "\n".join(folded)
    window = s.call(
        "context_window_open", windowId="beta", goal="other", input="x", expectedWindowId="main"
    )
    opened = statements(s.id, window)
    assert len(opened) <= BUDGET["context_window_open"], "\n".join(opened)
