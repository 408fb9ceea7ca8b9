"""One MCP tools/call takes the session lock once and stores no view (issue 35 item 2).

Counted at `mcp_server._call`, the synchronous body of a `tools/call` (the key lookup before
it takes no lock), on PostgreSQL where the lock is `SELECT ... FOR NO KEY UPDATE`.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app.mcp_server import _call
from sessions_app.models import ProjectionSnapshot

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

LOCK = "FOR NO KEY UPDATE"


def locks_of(session_id, call_id: str, tool: str, **arguments) -> tuple[dict, list[str]]:
    with CaptureQueriesContext(connection) as queries:
        result = _call(session_id, call_id, tool, {"purpose": "p", **arguments}, None)
    return result, [q["sql"] for q in queries.captured_queries if LOCK in q["sql"]]


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("context_task_memory_set", {"memory": "m"}),  # mutating
        ("context_task_memory_get", {}),  # read-only: still writes its call and result
    ],
)
def test_an_mcp_call_locks_the_session_once_and_stores_no_view(api_session, tool, arguments):
    s = api_session(version=2)
    s.input("start")
    snapshots = ProjectionSnapshot.objects.filter(session_id=s.id).count()
    result, locks = locks_of(s.id, "first", tool, **arguments)
    assert result["success"] is True, result
    assert len(locks) == 1, locks
    # A second call (the bound moved: the old design built a new view here too).
    result, locks = locks_of(s.id, "second", tool, **arguments)
    assert result["success"] is True, result
    assert len(locks) == 1, locks
    # A retry replays its receipt under the same single lock.
    result, locks = locks_of(s.id, "second", tool, **arguments)
    assert result["replayed"] is True
    assert len(locks) == 1, locks
    assert ProjectionSnapshot.objects.filter(session_id=s.id).count() == snapshots
