"""`POST sessions/{id}/turns/`: one model answer in one call (contract §5.2a), over HTTP.

A host sends what its provider's SDK returned (an OpenAI chat.completion or its message, an
Anthropic message) or the neutral form; the service writes the text and every call, records
the usage, dispatches the first call when it is a protocol tool, answers the later calls
itself, and says which call the host runs now. The same body again replays.
"""

from __future__ import annotations

import json

import pytest

from sessions_app.models import Message, ProjectionSnapshot, Run, ToolReceipt
from tests.api.turn_bodies import (
    MEMORY,
    OPENAI_USAGE,
    REDACTED,
    THINKING,
    anthropic_message,
    log,
    openai_completion,
    turn,
)


def test_text_and_a_protocol_call_are_written_dispatched_and_their_usage_recorded(host):
    s = host()
    view = s.project("openai-chat")
    answer = openai_completion(
        "I'll note the request first.", ("call_A1", "context_task_memory_set", MEMORY)
    )

    body = turn(s, {"snapshotId": view["snapshotId"], "answer": answer})

    call, result = body["messages"]
    assert (call["kind"], call["toolCallId"], call["toolName"]) == (
        "tool_call",
        "call_A1",
        "context_task_memory_set",
    )
    assert call["content"] == "I'll note the request first."  # the text beside the call
    assert call["arguments"] == MEMORY and call["snapshotId"] == view["snapshotId"]
    receipt = body["receipt"]
    assert receipt["toolCallId"] == "call_A1" and receipt["replayed"] is False
    assert receipt["result"]["success"] is True and receipt["resultMessage"] == result
    assert body["hostCall"] is None and body["replayed"] is False
    assert body["runStatus"] == "external"
    assert [m["kind"] for m in log(s)] == ["input", "tool_call", "tool_result"]
    assert (
        s.client.get(s.path("kv/"), prefix="taskMemory").json()["entries"][0]["value"]
        == (MEMORY["memory"])
    )
    # The reply's own usage, converted (OpenAI's prompt_tokens count the cached ones).
    usage = ProjectionSnapshot.objects.get(id=view["snapshotId"]).usage
    assert usage == {
        "inputTokens": 3512,
        "outputTokens": 48,
        "cacheReadInputTokens": 3072,
        "cacheWriteInputTokens": 0,
    }
    assert s.client.get(s.path()).json()["usage"]["turns"] == 1
    # A host-written answer is a turn of its run.
    assert Run.objects.get(session_id=s.id).turns == 1


def test_text_and_a_host_call_hand_the_call_to_the_host(host):
    s = host()
    view = s.project("anthropic-messages")
    answer = anthropic_message(
        THINKING,
        REDACTED,
        {"type": "text", "text": "Let me look the price up.", "citations": None},
        {"type": "tool_use", "id": "toolu_01", "name": "lookup", "input": {"q": "A-100"}},
    )

    body = turn(s, {"snapshotId": view["snapshotId"], "answer": answer})

    assert body["receipt"] is None
    assert body["hostCall"] == {
        "toolCallId": "toolu_01",
        "toolName": "lookup",
        "arguments": {"q": "A-100"},
    }
    [call] = body["messages"]
    # Anthropic's thinking blocks are stored with the answer as given, before its text.
    assert call["content"] == [
        THINKING,
        REDACTED,
        {"type": "text", "text": "Let me look the price up."},
    ]
    assert ToolReceipt.objects.filter(session_id=s.id).count() == 0
    # The host runs the tool and writes its result under the id it was handed.
    s.write(role="tool", kind="tool_result", content="12.40 EUR", toolCallId="toolu_01")
    request = s.project("anthropic-messages")["request"]
    blocks = next(m["content"] for m in request["messages"] if m["role"] == "assistant")
    assert [b["type"] for b in blocks] == ["thinking", "redacted_thinking", "text", "tool_use"]
    assert ProjectionSnapshot.objects.get(id=view["snapshotId"]).usage["inputTokens"] == 3512


def test_of_two_calls_the_second_is_answered_single_tool_call_per_turn(host):
    s = host()
    view = s.project("openai-chat")
    answer = openai_completion(
        None,
        ("call_1", "context_task_memory_set", MEMORY),
        ("call_2", "lookup", {"q": "A-100"}),
        ("call_3", "context_window_list", {"purpose": "look"}),
    )

    body = turn(s, {"snapshotId": view["snapshotId"], "answer": answer})

    assert body["hostCall"] is None  # the later host call is never handed out
    assert body["receipt"]["toolCallId"] == "call_1" and body["receipt"]["result"]["success"]
    kinds = [(m["kind"], m["toolCallId"]) for m in body["messages"]]
    assert kinds == [
        ("tool_call", "call_1"),
        ("tool_call", "call_2"),
        ("tool_call", "call_3"),
        ("tool_result", "call_2"),
        ("tool_result", "call_1"),
        ("tool_result", "call_3"),
    ]
    results = {m["toolCallId"]: json.loads(m["content"]) for m in body["messages"][3:]}
    for later in ("call_2", "call_3"):
        assert results[later]["error"]["code"] == "single_tool_call_per_turn"
    assert [m["index"] for m in log(s)] == list(range(1, 8))
    # Every call is answered: the next view builds.
    s.project("openai-chat")


def test_a_host_call_first_is_handed_and_a_later_protocol_call_is_refused(host):
    s = host()
    view = s.project()
    answer = {
        "content": "Two things.",
        "toolCalls": [
            {"id": "c1", "name": "lookup", "arguments": '{"q": "A-100"}'},
            {"id": "c2", "name": "context_task_memory_set", "arguments": MEMORY},
        ],
    }

    body = turn(s, {"snapshotId": view["snapshotId"], "answer": answer})

    assert body["hostCall"] == {
        "toolCallId": "c1",
        "toolName": "lookup",
        "arguments": {"q": "A-100"},
    }
    assert body["receipt"] is None
    later = json.loads(body["messages"][-1]["content"])
    assert body["messages"][-1]["toolCallId"] == "c2"
    assert later["error"]["code"] == "single_tool_call_per_turn"


def test_the_same_body_again_replays_and_writes_nothing(host):
    s = host()
    view = s.project("openai-chat")
    body = {
        "snapshotId": view["snapshotId"],
        "answer": openai_completion("Noting.", ("call_A1", "context_task_memory_set", MEMORY)),
    }
    first = turn(s, body)
    revision = s.client.get(s.path()).json()["stateRevision"]

    again = turn(s, body, status=200)

    assert again["replayed"] is True and first["replayed"] is False
    assert again["messages"] == first["messages"]
    assert again["receipt"] == {**first["receipt"], "replayed": True}
    assert (again["hostCall"], again["runStatus"]) == (first["hostCall"], first["runStatus"])
    assert Message.objects.filter(session_id=s.id).count() == 3
    assert ToolReceipt.objects.filter(session_id=s.id).count() == 1
    assert s.client.get(s.path()).json()["stateRevision"] == revision
    assert Run.objects.get(session_id=s.id).turns == 1
    assert s.client.get(s.path()).json()["usage"]["turns"] == 1


def test_a_replay_after_the_run_closed_answers_the_status_it_answered_first(host):
    s = host()
    view = s.project()
    body = {"snapshotId": view["snapshotId"], "answer": {"content": "Done."}}
    assert turn(s, body)["runStatus"] == "external"
    s.input("Next, please.")  # closes the run
    assert turn(s, body, status=200)["runStatus"] == "external"


def test_a_host_call_turn_replays_with_its_host_call(host):
    s = host()
    view = s.project()
    body = {
        "snapshotId": view["snapshotId"],
        "answer": {
            "content": None,
            "toolCalls": [{"id": "c1", "name": "lookup", "arguments": {"q": "x"}}],
        },
    }
    first = turn(s, body)
    again = turn(s, body, status=200)
    assert (
        again["hostCall"]
        == first["hostCall"]
        == {
            "toolCallId": "c1",
            "toolName": "lookup",
            "arguments": {"q": "x"},
        }
    )
    assert again["messages"] == first["messages"]


def test_another_body_for_an_answered_snapshot_is_refused(host):
    s = host()
    view = s.project()
    turn(s, {"snapshotId": view["snapshotId"], "answer": {"content": "Hello."}})

    refused = turn(
        s, {"snapshotId": view["snapshotId"], "answer": {"content": "Hello!"}}, status=409
    )

    assert refused["error"]["code"] == "snapshot_already_answered"
    assert "project again" in refused["error"]["message"]
    assert refused["error"]["details"]["snapshotId"] == view["snapshotId"]
    assert [m["kind"] for m in log(s)] == ["input", "text"]
    # Answered through messages/ counts too.
    view = s.project()
    s.write(role="assistant", kind="text", content="Written.", snapshotId=view["snapshotId"])
    refused = turn(
        s, {"snapshotId": view["snapshotId"], "answer": {"content": "Hello."}}, status=409
    )
    assert refused["error"]["code"] == "snapshot_already_answered"


@pytest.mark.parametrize(
    "answer, text",
    [
        (openai_completion("5000 units cost 57,040 EUR."), "5000 units cost 57,040 EUR."),
        (
            openai_completion("5000 units cost 57,040 EUR.")["choices"][0]["message"],
            "5000 units cost 57,040 EUR.",
        ),
        (
            anthropic_message(THINKING, {"type": "text", "text": "57,040 EUR."}),
            [THINKING, {"type": "text", "text": "57,040 EUR."}],
        ),
        ({"content": "57,040 EUR.", "toolCalls": []}, "57,040 EUR."),
        (
            {"content": [THINKING, {"type": "text", "text": "57,040 EUR."}]},
            [THINKING, {"type": "text", "text": "57,040 EUR."}],
        ),
    ],
    ids=["openai-completion", "openai-message", "anthropic-message", "neutral", "neutral-parts"],
)
def test_text_alone_in_each_shape_is_a_text_message(host, answer, text):
    s = host()
    view = s.project()
    body = turn(s, {"snapshotId": view["snapshotId"], "answer": answer})
    [message] = body["messages"]
    assert (message["kind"], message["content"]) == ("text", text)
    assert message["snapshotId"] == view["snapshotId"]
    assert (body["receipt"], body["hostCall"]) == (None, None)


@pytest.mark.parametrize(
    "answer, usage, counts",
    [
        (
            anthropic_message({"type": "text", "text": "Done."}),
            None,
            {
                "inputTokens": 3512,
                "outputTokens": 30,
                "cacheReadInputTokens": 3400,
                "cacheWriteInputTokens": 100,
            },
        ),
        (
            {"content": "Done."},
            OPENAI_USAGE,
            {
                "inputTokens": 3512,
                "outputTokens": 48,
                "cacheReadInputTokens": 3072,
                "cacheWriteInputTokens": 0,
            },
        ),
        (
            openai_completion("Done."),
            {"inputTokens": 900, "outputTokens": 9, "cachedInputTokens": 512},
            {"inputTokens": 900, "outputTokens": 9, "cachedInputTokens": 512},
        ),
    ],
    ids=["the-replys-own-anthropic", "provider-usage-in-the-body", "counts-win-over-the-reply"],
)
def test_usage_is_the_bodys_else_the_replys_own(host, answer, usage, counts):
    s = host(prices={"input": 2.0, "cacheRead": 0.5, "cacheWrite": 2.5, "output": 8.0})
    view = s.project()
    body = {"snapshotId": view["snapshotId"], "answer": answer}
    if usage is not None:
        body["usage"] = usage
    turn(s, body)
    assert ProjectionSnapshot.objects.get(id=view["snapshotId"]).usage == counts
    session_usage = s.client.get(s.path()).json()["usage"]
    assert session_usage["inputTokens"] == counts["inputTokens"] and session_usage["cost"] > 0
    # The usage endpoint sees the turn's report: the same counts replay.
    reported = s.client.post(s.path(f"snapshots/{view['snapshotId']}/usage/"), counts)
    assert reported.json()["replayed"] is True


def test_an_answer_without_usage_records_none(host):
    s = host()
    view = s.project()
    turn(s, {"snapshotId": view["snapshotId"], "answer": {"content": "Done."}})
    assert ProjectionSnapshot.objects.get(id=view["snapshotId"]).usage is None
    # The host may still report it.
    reported = s.client.post(
        s.path(f"snapshots/{view['snapshotId']}/usage/"), {"inputTokens": 5, "outputTokens": 1}
    )
    assert reported.status_code == 200


def test_a_provider_id_the_session_holds_is_replaced_and_handed_under_its_new_id(host):
    s = host()
    first = s.project()
    answer = {
        "content": None,
        "toolCalls": [{"id": "call_0", "name": "lookup", "arguments": {"q": "a"}}],
    }
    turn(s, {"snapshotId": first["snapshotId"], "answer": answer})
    s.write(role="tool", kind="tool_result", content="1", toolCallId="call_0")
    second = s.project()

    body = turn(s, {"snapshotId": second["snapshotId"], "answer": answer})

    renamed = body["hostCall"]["toolCallId"]
    assert renamed != "call_0" and renamed.startswith("call_")
    assert body["messages"][0]["toolCallId"] == renamed
    notes = ProjectionSnapshot.objects.get(id=second["snapshotId"]).notes
    assert any("'call_0'" in note and renamed in note for note in notes)


def test_calls_no_host_may_run_are_answered_by_the_service(host):
    s = host()
    view = s.project()
    answer = {"content": None, "toolCalls": [{"id": "c1", "name": "lookup", "arguments": {"q": 5}}]}
    body = turn(s, {"snapshotId": view["snapshotId"], "answer": answer})
    assert body["hostCall"] is None and body["receipt"] is None
    result = json.loads(body["messages"][1]["content"])
    assert result["error"]["code"] == "invalid_arguments"
    # Malformed arguments text of a protocol call: stored as written, answered correctably.
    view = s.project()
    answer = {
        "content": None,
        "toolCalls": [{"id": "c2", "name": "context_task_memory_set", "arguments": '{"memory": '}],
    }
    body = turn(s, {"snapshotId": view["snapshotId"], "answer": answer})
    assert body["messages"][0]["arguments"] == '{"memory": '
    assert body["receipt"]["result"]["error"]["code"] == "invalid_arguments"
