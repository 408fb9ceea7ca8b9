"""The raw SQL reads of the turn return exactly what the ORM readers return (issue #13)."""

from __future__ import annotations

from contextproto.protocol.messages import Frame
from sessions_app.models import Session
from sessions_app.reads import hot_sql, raw_log, view_cache
from sessions_app.services.archive import archive_session, restore_session
from sessions_app.store.state import kv_commit

PARTS = [
    {"type": "text", "text": "parts ü"},
    {"type": "image", "mediaType": "image/png", "data": "AAAA"},
]


def _session_with_windows_folds_and_runs(api_session):
    s = api_session()
    s.input("first input")
    s.input(PARTS)
    a = s.host_tool_work("lookup", result="a" * 40)
    b = s.host_tool_work("lookup", result="b")
    s.write(role="assistant", kind="text", content="an answer")
    for (first, last), summary in ((a, "a"), (b, "b")):
        folded = s.tool(
            "context_fold_create",
            fromIndex=first,
            throughIndex=last,
            summary=summary,
            expectedWindowId="main",
        )
        assert folded["success"], folded
    opened = s.tool(
        "context_window_open", windowId="beta", goal="other", input="x", expectedWindowId="main"
    )
    assert opened["success"], opened
    s.host_tool_work("in-beta")
    s.input("an input written in beta")
    return s


def _orm_view(session_id, window, after, through, run_hex):
    window_rows = raw_log.log_window(session_id, window, after, through)
    run_rows = raw_log.log_run_inputs(session_id, run_hex, through) if run_hex else []
    return window_rows, run_rows


def test_view_rows_equal_the_orm_readers(api_session):
    s = _session_with_windows_folds_and_runs(api_session)
    session = Session.objects.get(pk=s.id)
    run_hex = session.current_run_id.hex
    through = session.last_index
    cases = [
        ("main", 0, through, run_hex),
        ("main", 3, through, run_hex),
        ("main", -1, through - 2, run_hex),
        ("beta", 0, through, run_hex),
        ("beta", 0, through, None),
        ("main", through, through, run_hex),  # an empty range
        ("nowhere", 0, through, "0" * 32),  # nothing at all
    ]
    for window, after, bound, run in cases:
        hot = hot_sql.view_rows(s.id, window, after, bound, run)
        assert hot is not None
        expected_window, expected_inputs = _orm_view(s.id, window, after, bound, run)
        assert hot.window == expected_window, (window, after, bound)
        assert hot.run_inputs == expected_inputs, (window, after, bound)
        outline = hot_sql.window_outline(s.id, window, after, bound)
        assert outline == raw_log.log_window(s.id, window, after, bound, outline=True)
    full = hot_sql.view_rows(s.id, "main", 0, through, run_hex)
    assert {m.kind for m in full.window} >= {"input", "tool_call", "tool_result", "text"}
    assert any(m.content == PARTS for m in full.window)
    assert [m.content for m in full.run_inputs][-1] == "an input written in beta"


def test_view_rows_leave_archived_ranges_to_the_merging_readers(api_session):
    s = _session_with_windows_folds_and_runs(api_session)
    session = Session.objects.get(pk=s.id)
    run_hex = session.current_run_id.hex
    through = session.last_index
    before = _orm_view(s.id, "main", 0, through, run_hex)
    archive_session(session_id=s.id, keep_last=4, chunk_size=4)
    boundary = max(c.last_index for c in session.archive_chunks.all())
    assert boundary > 0
    assert hot_sql.view_rows(s.id, "main", 0, through, None) is None
    assert hot_sql.view_rows(s.id, "main", 0, through, run_hex) is None
    assert hot_sql.window_outline(s.id, "main", 0, through) is None
    # Above B the hot rows are the whole window again (the run's inputs may still be cold).
    above = hot_sql.view_rows(s.id, "beta", boundary, through, None)
    assert above is not None
    assert above.window == raw_log.log_window(s.id, "beta", boundary, through)
    outline = hot_sql.window_outline(s.id, "beta", boundary, through)
    assert outline == raw_log.log_window(s.id, "beta", boundary, through, outline=True)
    assert outline and all(m.content == "" and m.arguments is None for m in outline)
    restore_session(session_id=s.id)
    restored = hot_sql.view_rows(s.id, "main", 0, through, run_hex)
    assert restored is not None
    assert (restored.window, restored.run_inputs) == before


def test_kv_values_and_folds_equal_the_orm_readers(api_session):
    s = _session_with_windows_folds_and_runs(api_session)
    keys = ["activeWindow", "taskMemory", "window/main", "coveredThrough/main", "missing/key"]
    assert hot_sql.kv_values(s.id, keys) == raw_log.kv_values(s.id, keys)
    assert hot_sql.kv_values(s.id, keys)["activeWindow"] == "beta"
    assert hot_sql.kv_values(s.id, []) == {}
    for after in (0, 3, 5, 100):
        assert hot_sql.folds_of_window_above(s.id, "main", after) == raw_log.folds_of_window_above(
            s.id, "main", after
        )
    folds = hot_sql.folds_of_window_above(s.id, "main", 0)
    assert [f.summary for f in folds] == ["a", "b"]
    assert hot_sql.folds_of_window_above(s.id, "beta", 0) == []
    # A checkpoint over the first fold hides it from the view's read.
    kv_commit(session_id=s.id, writes={"coveredThrough/main": folds[0].last_index})
    above = hot_sql.folds_of_window_above(s.id, "main", folds[0].last_index)
    assert [f.summary for f in above] == ["b"]


def test_dispatch_frame_is_the_snapshot_and_the_previous_message(api_session):
    s = _session_with_windows_folds_and_runs(api_session)
    snapshot = s.project()
    first = s.call("context_task_memory_get", snapshot)
    second = s.call("context_task_memory_get", snapshot)
    session = Session.objects.get(pk=s.id)
    call = raw_log.call_and_answer(s.id, second)[0]
    frame = hot_sql.dispatch_frame(s.id, call.snapshot_id, call.index)
    assert frame.snapshot == Frame(snapshot["revision"], snapshot["upperBound"]) == call.frame
    before = raw_log.log_at(s.id, call.index - 1)
    assert frame.previous_known
    assert frame.previous == (before.kind, before.tool_call_id, before.snapshot_id)
    assert frame.previous == ("tool_call", first, snapshot["snapshotId"])
    # An unknown snapshot, and no message before #1.
    unknown = hot_sql.dispatch_frame(s.id, "00000000-0000-0000-0000-000000000000", 1)
    assert (unknown.snapshot, unknown.previous, unknown.previous_known) == (None, None, True)
    # A predecessor in the cold archive is left to log_at.
    archive_session(session_id=s.id, keep_last=4, chunk_size=4)
    boundary = max(c.last_index for c in session.archive_chunks.all())
    assert raw_log.log_at(s.id, boundary) is not None
    cold = hot_sql.dispatch_frame(s.id, call.snapshot_id, boundary + 1)
    assert cold.snapshot == frame.snapshot
    assert (cold.previous, cold.previous_known) == (None, False)


def test_log_tail_equals_the_merging_reader_and_leaves_archived_ranges_to_it(api_session):
    s = _session_with_windows_folds_and_runs(api_session)
    last = Session.objects.get(pk=s.id).last_index
    for after in (0, 3, last - 2, last):
        tail = hot_sql.log_tail(s.id, after, last)
        assert tail == raw_log.log_page(s.id, window_id=None, after_index=after, limit=last)
    assert {m.window_id for m in hot_sql.log_tail(s.id, 0, last)} == {"main", "beta"}
    # The upper bound is inclusive and leaves out what is above it.
    assert hot_sql.log_tail(s.id, 0, last - 1) == raw_log.log_page(
        s.id, window_id=None, after_index=0, limit=last - 1
    )
    archive_session(session_id=s.id, keep_last=4, chunk_size=4)
    boundary = max(c.last_index for c in Session.objects.get(pk=s.id).archive_chunks.all())
    assert hot_sql.log_tail(s.id, 0, last) is None
    assert hot_sql.log_tail(s.id, boundary, last) == raw_log.log_page(
        s.id, window_id=None, after_index=boundary, limit=last
    )


def test_the_view_cache_reads_only_new_rows_and_answers_as_a_fresh_read(
    api_session, django_assert_num_queries
):
    s = _session_with_windows_folds_and_runs(api_session)
    session = Session.objects.get(pk=s.id)
    run_hex = session.current_run_id.hex
    first_bound = session.last_index
    fresh = _orm_view(s.id, "main", 0, first_bound, run_hex)
    assert view_cache.view_rows(s.id, "main", 0, first_bound, run_hex) == fresh
    s.tool("context_window_complete", outcome="done", expectedWindowId="beta")
    s.input("later")
    s.write(role="assistant", kind="text", content="later answer")
    bound = Session.objects.get(pk=s.id).last_index
    with django_assert_num_queries(1):  # one statement: the rows above the kept ones
        cached = view_cache.view_rows(s.id, "main", 0, bound, run_hex)
    assert cached == _orm_view(s.id, "main", 0, bound, run_hex)
    # A checkpoint's bound moved up: the kept rows below it drop out.
    assert view_cache.view_rows(s.id, "main", 5, bound, run_hex) == _orm_view(
        s.id, "main", 5, bound, run_hex
    )
    # An archived range goes to the merging readers, and still answers the same.
    archive_session(session_id=s.id, keep_last=4, chunk_size=4)
    assert view_cache.view_rows(s.id, "main", 5, bound, run_hex) == _orm_view(
        s.id, "main", 5, bound, run_hex
    )
