"""Tool calls in the archive (contract §2.3): a result that arrives after its call was archived.

The write paths find an archived call through `archived_message_by_tool_call`
(sessions_app.services.messages and .dispatch), as a frozen RawMessage.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from contextproto.errors import ApplicationError
from sessions_app.models import ArchiveChunk, Message
from sessions_app.reads import raw_log
from sessions_app.services import archive
from sessions_app.services.messages import NewMessage, message_write
from sessions_app.services.projection import projection_build
from sessions_app.services.runs import run_start
from sessions_app.store import cold_store
from tests.builders.dumps import hot_dump


def merged_log(session_id) -> list[dict]:
    page = raw_log.log_page(session_id, window_id=None, after_index=0, limit=10_000)
    return [m.to_wire() for m in page]


def view(session_id) -> list[dict]:
    return projection_build(session_id=session_id, use_cache=False).messages


def open_host_call(session, call_id: str = "call_lookup") -> Message:
    run_start(session_id=session.id, content="look it up")
    snapshot = projection_build(session_id=session.id)
    return message_write(
        session_id=session.id,
        message=NewMessage(
            role="assistant",
            kind="tool_call",
            content="",
            tool_call_id=call_id,
            tool_name="lookup",
            arguments={"q": "price"},
            snapshot_id=str(snapshot.id),
        ),
        host=True,
    )


def write_result(session, call_id: str = "call_lookup", content: str = "42") -> Message:
    return message_write(
        session_id=session.id,
        message=NewMessage(role="tool", kind="tool_result", content=content, tool_call_id=call_id),
        host=True,
    )


def test_result_of_a_call_archived_while_unanswered_is_paired_and_restored(session):
    call = open_host_call(session)
    archive.archive_session(session_id=session.id, keep_last=0, chunk_size=2)
    assert not Message.objects.filter(pk=call.pk).exists()
    assert cold_store.archived_message_by_tool_call(session.id, "call_lookup", "tool_call").id == (
        str(call.id)
    )

    result = write_result(session)

    assert (result.index, result.window_id, result.tool_call_id) == (3, "main", "call_lookup")
    paired = view(session.id)
    kinds = [(m["kind"], m.get("toolCallId")) for m in paired]
    position = kinds.index(("tool_call", "call_lookup"))
    assert kinds[position + 1] == ("tool_result", "call_lookup")
    log = merged_log(session.id)

    assert archive.restore_session(session_id=session.id) == 2
    assert hot_dump(session.id) == log
    restored_call = Message.objects.get(pk=call.pk)
    assert (restored_call.index, restored_call.window_id) == (call.index, call.window_id)
    assert json.dumps(view(session.id)) == json.dumps(paired)


def test_a_second_result_is_refused_whether_the_first_is_hot_or_archived(session):
    open_host_call(session)
    archive.archive_session(session_id=session.id, keep_last=0, chunk_size=2)
    write_result(session)
    with pytest.raises(ApplicationError) as hot_answer:
        write_result(session, content="again")
    assert hot_answer.value.code == "tool_call_already_answered"
    archive.archive_session(session_id=session.id, keep_last=0, chunk_size=1)
    assert not Message.objects.filter(session=session).exists()
    with pytest.raises(ApplicationError) as cold_answer:
        write_result(session, content="again")
    assert cold_answer.value.code == "tool_call_already_answered"
    assert len([m for m in merged_log(session.id) if m["kind"] == "tool_result"]) == 1


def test_an_archived_call_id_cannot_be_recorded_again(session):
    call = open_host_call(session)
    write_result(session)
    archive.archive_session(session_id=session.id, keep_last=0, chunk_size=3)
    with pytest.raises(ApplicationError) as duplicate:
        message_write(
            session_id=session.id,
            message=NewMessage(
                role="assistant",
                kind="tool_call",
                content="",
                tool_call_id="call_lookup",
                tool_name="lookup",
                arguments={},
                snapshot_id=str(call.snapshot_id),
            ),
            host=True,
        )
    assert duplicate.value.code == "tool_call_duplicate"


def test_late_result_of_an_archived_call_joins_the_calls_window_not_the_active_one(api_session):
    s = api_session(version=2)
    s.input("start")
    snapshot = s.project()
    # One answer with two calls: the window switch (executed) and a host lookup.
    switch = s.call(
        "context_window_open",
        snapshot,
        windowId="alpha",
        goal="g",
        input="i",
        expectedWindowId="main",
    )
    s.write(
        role="assistant",
        kind="tool_call",
        content="",
        toolCallId="host_1",
        toolName="lookup",
        arguments={},
        snapshotId=snapshot["snapshotId"],
    )
    assert s.dispatch(switch)["result"]["success"]
    archive.archive_session(session_id=s.id, keep_last=0, chunk_size=1)
    assert not Message.objects.filter(session_id=s.id).exists()

    answer = s.write(role="tool", kind="tool_result", content="done", toolCallId="host_1")

    assert answer["windowId"] == "main"
    assert s.client.get(s.path()).json()["activeWindow"] == "alpha"
    back = s.tool(
        "context_window_open", windowId="main", resume=True, input="back", expectedWindowId="alpha"
    )
    assert back["success"], back
    kinds = [(m["kind"], m.get("toolCallId")) for m in s.project()["messages"]]
    assert ("tool_call", "host_1") in kinds and ("tool_result", "host_1") in kinds
    assert kinds.index(("tool_call", "host_1")) < kinds.index(("tool_result", "host_1"))


def test_protocol_call_archived_before_dispatch_is_executed_once(api_session):
    s = api_session(version=2)
    s.input("start")
    call = s.call("context_task_memory_get")
    archive.archive_session(session_id=s.id, keep_last=0, chunk_size=2)
    assert ArchiveChunk.objects.filter(session_id=s.id).count() == 1
    receipt = s.dispatch(call)
    assert receipt["replayed"] is False and receipt["result"]["success"], receipt
    assert receipt["resultMessage"]["windowId"] == "main"
    again = s.dispatch(call)
    assert again["replayed"] is True and again["resultMessage"] == receipt["resultMessage"]
    log = merged_log(s.id)
    archive.restore_session(session_id=s.id)
    assert hot_dump(s.id) == log


def test_receipt_whose_result_is_archived_is_replayed(api_session):
    s = api_session(version=2)
    s.input("start")
    call = s.call("context_task_memory_get")
    receipt = s.dispatch(call)
    archive.archive_session(session_id=s.id, keep_last=0, chunk_size=1)
    assert not Message.objects.filter(session_id=s.id).exists()
    again = s.dispatch(call)
    assert again["replayed"] is True
    assert again["resultMessage"] == receipt["resultMessage"]
    assert again["result"] == receipt["result"]


def test_archived_call_lookup_finds_nothing_for_unknown_ids(session):
    open_host_call(session)
    message_write(
        session_id=session.id, message=NewMessage(role="assistant", kind="text", content="x")
    )
    archive.archive_session(session_id=session.id, keep_last=0, chunk_size=3)
    assert cold_store.archived_message_by_tool_call(session.id, "nope", "tool_call") is None
    assert (
        cold_store.archived_message_by_tool_call(session.id, "call_lookup", "tool_result") is None
    )
    call = cold_store.archived_message_by_tool_call(session.id, "call_lookup", "tool_call")
    assert call.index == 2 and call.tool_name == "lookup"
    # The write paths get a frozen RawMessage, not a row: nothing can write it back.
    assert not isinstance(call, Message)
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.index = 99
