"""Dispatch over HTTP: receipts, stale state, window guard, fold rules, fold read (contract
§5.2)."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection

from sessions_app.models import FoldRecord, KVEntry, Message, ProjectionSnapshot, ToolReceipt
from sessions_app.services.archive import archive_session
from sessions_app.services.dispatch import tool_dispatch
from sessions_app.store.state import kv_commit


def kv(session_id) -> dict:
    return dict(KVEntry.objects.filter(session_id=session_id).values_list("key", "value"))


def revision(handle) -> int:
    return handle.client.get(handle.path()).json()["stateRevision"]


def test_receipt_is_replayed_and_nothing_changes(api_session):
    s = api_session()
    s.input("hello")
    first, last = s.host_tool_work()
    call = s.call(
        "context_fold_create",
        fromIndex=first,
        throughIndex=last,
        summary="looked up",
        expectedWindowId="main",
    )
    receipt = s.dispatch(call)
    assert receipt["replayed"] is False and receipt["result"]["success"] is True
    again = s.dispatch(call)
    assert again["replayed"] is True
    assert again["result"] == receipt["result"]
    assert again["resultMessage"] == receipt["resultMessage"]
    assert again["stateRevision"] == receipt["stateRevision"]
    assert FoldRecord.objects.filter(session_id=s.id).count() == 1
    assert (
        Message.objects.filter(session_id=s.id, kind="tool_result", tool_call_id=call).count() == 1
    )


def test_result_message_is_in_the_window_of_the_call(api_session):
    s = api_session()
    s.input("start")
    call = s.call(
        "context_window_open",
        windowId="alpha",
        goal="quote",
        input="prepare a quote",
        expectedWindowId="main",
    )
    receipt = s.dispatch(call)
    assert receipt["result"]["success"], receipt
    assert receipt["resultMessage"]["windowId"] == "main"
    assert revision(s) == receipt["stateRevision"]
    assert s.client.get(s.path()).json()["activeWindow"] == "alpha"


def test_two_mutating_calls_from_one_snapshot_one_is_stale(api_session):
    s = api_session(version=1)
    s.input("start")
    snapshot = s.project()
    first = s.call("context_task_memory_set", snapshot, memory="one")
    ok = s.dispatch(first)
    assert ok["result"]["success"]
    # A second answer generated from the same view (a concurrent turn of another worker),
    # written after the first call's result, so it is not a second call of the same answer.
    second = s.call("context_task_memory_set", snapshot, memory="two")
    stale = s.dispatch(second)["result"]
    assert stale["success"] is False
    assert stale["error"]["code"] == "context_state_stale"
    assert stale["error"]["currentRevision"] == ok["stateRevision"]
    assert kv(s.id)["taskMemory"] == "one"
    third = s.call("context_task_memory_set", s.project(), memory="three")
    assert s.dispatch(third)["result"]["success"]
    assert kv(s.id)["taskMemory"] == "three"


def test_stale_call_gets_the_current_revision(api_session):
    s = api_session(version=1)
    s.input("start")
    old = s.project()
    s.tool("context_task_memory_set", memory="moved on")  # revision moves
    late = s.call("context_task_memory_set", old, memory="late")
    result = s.dispatch(late)["result"]
    assert result["error"]["code"] == "context_state_stale"
    assert result["error"]["currentRevision"] == revision(s)
    assert kv(s.id)["taskMemory"] == "moved on"
    fresh = s.call("context_task_memory_set", s.project(), memory="fresh")
    assert s.dispatch(fresh)["result"]["success"]


def test_later_calls_of_one_answer_get_single_tool_call_per_turn(api_session):
    s = api_session(version=1)
    s.input("start")
    snapshot = s.project()
    first = s.call("context_task_memory_get", snapshot)
    second = s.call("context_task_memory_get", snapshot)
    assert s.dispatch(first)["result"]["success"]
    result = s.dispatch(second)["result"]
    assert result["error"]["code"] == "single_tool_call_per_turn"
    # Pairing holds: the next projection succeeds with both results present.
    view = s.project()
    kinds = [m["kind"] for m in view["messages"]]
    assert kinds.count("tool_result") == 2


@pytest.mark.parametrize("version", [2, 3])
def test_wrong_expected_window_is_refused_and_the_session_continues(api_session, version):
    s = api_session(version=version)
    s.input("start")
    assert s.tool(
        "context_window_open",
        windowId="alpha",
        goal="quote",
        input="quote 5000",
        expectedWindowId="main",
    )["success"]
    before, rev = kv(s.id), revision(s)
    result = s.tool("context_window_memory_set", memory="beta plan", expectedWindowId="beta")
    assert result["success"] is False
    assert result["error"]["code"] == "context_window_mismatch"
    assert result["error"]["currentWindowId"] == "alpha"
    assert result["error"]["stateRevision"] == rev
    assert kv(s.id) == before and revision(s) == rev
    missing = s.tool("context_window_memory_set", memory="x")
    assert missing["error"]["code"] == "context_window_expectation_required"
    fixed = s.tool("context_window_memory_set", memory="quote: 5000", expectedWindowId="alpha")
    assert fixed["success"]
    assert kv(s.id)["window/alpha"]["memory"] == "quote: 5000"


def test_invalid_arguments_name_the_argument(api_session):
    s = api_session()
    s.input("start")
    result = s.tool("context_history_list", limit=500)
    assert result["error"]["code"] == "invalid_arguments"
    assert result["error"]["argument"] == "limit"


FOLD_CASES = {
    "partial_group": "context_fold_partial_group",
    "unanswered": "context_fold_unanswered_call",
    "user_input": "context_fold_contains_user_input",
    "overlap": "context_fold_overlap",
    "nested": "context_fold_nested",
    "other_window": "context_fold_other_window",
    "below_checkpoint": "context_fold_below_checkpoint",
    "above_bound": "context_fold_above_bound",
    "max_folds": "context_fold_limit_reached",
}


@pytest.mark.parametrize("case", sorted(FOLD_CASES))
def test_fold_rules_each_refused_with_its_own_code(api_session, case):
    options = {"maxFolds": 1} if case == "max_folds" else {}
    s = api_session(version=1, options=options)
    s.input("start")
    a1, a2 = s.host_tool_work("a")
    b1, b2 = s.host_tool_work("b")
    c1, c2 = s.host_tool_work("c")
    fold = {"fromIndex": a1, "throughIndex": b2, "summary": "s"}
    if case == "partial_group":
        fold = {"fromIndex": a1, "throughIndex": a1, "summary": "s"}
    elif case == "unanswered":
        snapshot = s.project()
        s.write(
            role="assistant",
            kind="tool_call",
            content="",
            toolCallId="open1",
            toolName="slow",
            arguments={},
            snapshotId=snapshot["snapshotId"],
        )
        # A view can't be projected while a call is pending, so freeze one by hand: as if
        # a host had taken its snapshot right after writing the call.
        frozen = ProjectionSnapshot.objects.get(id=snapshot["snapshotId"])
        frozen.pk = None
        frozen.id = None
        frozen.upper_bound += 1
        frozen.save()
        call = s.call(
            "context_fold_create",
            {"snapshotId": str(frozen.id)},
            fromIndex=c1,
            throughIndex=c2 + 1,
            summary="s",
        )
        result = s.dispatch(call)["result"]
        assert result["error"]["code"] == FOLD_CASES[case], result
        return
    elif case == "user_input":
        fold = {"fromIndex": 1, "throughIndex": a2, "summary": "s"}
    elif case == "overlap":
        assert s.tool("context_fold_create", fromIndex=a1, throughIndex=b2, summary="ab")["success"]
        fold = {"fromIndex": b1, "throughIndex": c2, "summary": "s"}
    elif case in ("nested", "max_folds"):
        assert s.tool("context_fold_create", fromIndex=b1, throughIndex=b2, summary="b")["success"]
        fold = {"fromIndex": a1, "throughIndex": c2, "summary": "s"}
        if case == "max_folds":
            fold = {"fromIndex": c1, "throughIndex": c2, "summary": "s"}
    elif case == "other_window":
        s.tool("context_window_open", windowId="beta", goal="other", input="x")
        s.host_tool_work("in-beta")
        s.tool("context_window_open", windowId="main", resume=True, input="back")
        fold = {"fromIndex": c2 + 2, "throughIndex": c2 + 3, "summary": "s"}
    elif case == "below_checkpoint":
        kv_commit(session_id=s.id, writes={"coveredThrough/main": b2})
        fold = {"fromIndex": a1, "throughIndex": a2, "summary": "s"}
    elif case == "above_bound":
        fold = {"fromIndex": c1, "throughIndex": c2 + 5, "summary": "s"}
    result = s.tool("context_fold_create", **fold)
    assert result["success"] is False, result
    assert result["error"]["code"] == FOLD_CASES[case], result


def test_fold_read_slices_utf16_without_splitting_pairs(api_session):
    s = api_session(version=1)
    s.input("start")
    text = ("价格 😀 emoji 𝄞 " * 3000)[:40000]
    a1, a2 = s.host_tool_work("lookup", text)
    fold_id = s.tool("context_fold_create", fromIndex=a1, throughIndex=a2, summary="big")["foldId"]
    slices, cursor, total = [], 0, None
    while cursor is not None:
        result = s.tool("context_fold_read", foldId=fold_id, cursor=cursor)
        assert result["success"], result
        chunk = result["text"]
        assert len(chunk.encode("utf-16-le")) // 2 <= 12000
        slices.append(chunk)
        total, cursor = result["totalLength"], result["nextCursor"]
    full = "".join(slices)
    assert len(full.encode("utf-16-le")) // 2 == total
    messages = json.loads(full)
    assert [m["index"] for m in messages] == [a1, a2]
    assert messages[1]["content"] == text


def test_fold_read_of_another_sessions_fold_is_not_found(api_session):
    s1 = api_session(version=1)
    s1.input("x")
    a1, a2 = s1.host_tool_work()
    fold_id = s1.tool("context_fold_create", fromIndex=a1, throughIndex=a2, summary="s")["foldId"]
    s2 = api_session(version=2)
    s2.input("y")
    result = s2.tool("context_fold_read", foldId=fold_id)
    assert result["error"]["code"] == "context_fold_not_found"


def test_host_cannot_write_results_of_protocol_tools_or_unknown_calls(api_session):
    s = api_session()
    s.input("x")
    _a1, _a2 = s.host_tool_work()
    response = s.client.post(
        s.path("messages/"),
        {
            "role": "tool",
            "kind": "tool_result",
            "content": "again",
            "toolCallId": f"host_{s.calls}",
        },
    )
    assert response.json()["error"]["code"] == "tool_call_already_answered"
    response = s.client.post(
        s.path("messages/"),
        {"role": "tool", "kind": "tool_result", "content": "x", "toolCallId": "nope"},
    )
    assert response.json()["error"]["code"] == "tool_call_not_found"
    response = s.client.post(
        s.path("messages/"),
        {
            "role": "assistant",
            "kind": "tool_call",
            "content": "",
            "toolCallId": "c9",
            "toolName": "lookup",
            "arguments": {},
        },
    )
    assert response.json()["error"]["code"] == "snapshot_required"
    call = s.call("context_task_memory_get")
    response = s.client.post(
        s.path("messages/"),
        {"role": "tool", "kind": "tool_result", "content": "x", "toolCallId": call},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "protocol_tool_result_forbidden"
    assert Message.objects.filter(session_id=s.id, kind="tool_result").count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_sixteen_concurrent_dispatches_of_one_call_make_one_fold(api_session):
    s = api_session()
    s.input("start")
    a1, a2 = s.host_tool_work()
    call = s.call(
        "context_fold_create",
        fromIndex=a1,
        throughIndex=a2,
        summary="done",
        expectedWindowId="main",
    )

    barrier = threading.Barrier(16)
    receipts, errors = [], []

    def worker():
        try:
            barrier.wait()
            receipts.append(tool_dispatch(session_id=s.id, tool_call_id=call).to_wire())
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(r["replayed"] for r in receipts) == [False] + [True] * 15
    originals = [r for r in receipts if not r["replayed"]]
    for r in receipts:
        assert {**r, "replayed": False} == originals[0]
    assert FoldRecord.objects.filter(session_id=s.id).count() == 1
    assert ToolReceipt.objects.filter(session_id=s.id, tool_call_id=call).count() == 1
    assert (
        Message.objects.filter(session_id=s.id, kind="tool_result", tool_call_id=call).count() == 1
    )


def test_fold_read_of_another_windows_fold_does_not_switch_window(api_session):
    s = api_session(version=2)
    s.input("start")
    a1, a2 = s.host_tool_work("in-main", "main data")
    fold = s.tool(
        "context_fold_create",
        fromIndex=a1,
        throughIndex=a2,
        summary="main lookups",
        expectedWindowId="main",
    )
    assert fold["success"], fold
    assert s.tool(
        "context_window_open",
        windowId="other",
        goal="elsewhere",
        input="go elsewhere",
        expectedWindowId="main",
    )["success"]
    rev = revision(s)
    read = s.tool("context_fold_read", foldId=fold["foldId"])
    assert read["success"] and read["windowId"] == "main"
    assert "main data" in read["text"]
    assert s.client.get(s.path()).json()["activeWindow"] == "other"
    assert revision(s) == rev


def test_one_call_per_turn_holds_when_the_answer_s_earlier_calls_are_archived(api_session):
    """The dispatcher finds the answer's first call hot, or archived, several calls back."""
    s = api_session(version=2)
    s.input("start")
    snapshot = s.project()
    calls = [s.call("context_task_memory_get", snapshot) for _ in range(3)]
    archive_session(session_id=s.id, keep_last=1, chunk_size=1)
    hot = set(Message.objects.filter(session_id=s.id).values_list("tool_call_id", flat=True))
    assert hot == {calls[2]}  # the first two calls are in the cold archive
    for later in calls[1:]:
        result = s.dispatch(later)["result"]
        assert result["error"]["code"] == "single_tool_call_per_turn", result
        assert result["error"]["executedToolCallId"] == calls[0]
    assert s.dispatch(calls[0])["result"]["success"]
