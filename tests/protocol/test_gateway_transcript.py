"""The transcript read off a log (contract §14), and reconciliation against it, without a
database."""

from __future__ import annotations

import pytest

from contextproto.protocol.catalog import PROTOCOL_TOOL_NAMES
from contextproto.protocol.gateway.reconcile import (
    Proceed,
    Refusal,
    Replay,
    overlap,
    reconcile,
)
from contextproto.protocol.gateway.transcript import Call, Item, transcript_of_log
from contextproto.protocol.messages import RawMessage

PROTOCOL = "context_task_memory_set"


class Log:
    """Builds a raw log message by message."""

    def __init__(self) -> None:
        self.messages: list[RawMessage] = []

    def _add(self, role: str, kind: str, content: object = "", **fields: object) -> RawMessage:
        message = RawMessage(
            id=f"m{len(self.messages) + 1}",
            index=len(self.messages) + 1,
            window_id="main",
            role=role,
            kind=kind,
            content=content,  # type: ignore[arg-type]
            **fields,  # type: ignore[arg-type]
        )
        self.messages.append(message)
        return message

    def user(self, text: str) -> Log:
        self._add("user", "input", text)
        return self

    def text(self, text: str) -> Log:
        self._add("assistant", "text", text, snapshot_id="s")
        return self

    def call(self, call_id: str, name: str, text: object = "", **arguments: object) -> Log:
        self._add(
            "assistant",
            "tool_call",
            text,
            tool_call_id=call_id,
            tool_name=name,
            arguments=dict(arguments),
            snapshot_id="s",
        )
        return self

    def result(self, call_id: str, name: str, text: str, *, service: bool = False) -> Log:
        self._add(
            "tool",
            "tool_result",
            text,
            tool_call_id=call_id,
            tool_name=name,
            snapshot_id="s" if service else None,
        )
        return self


def read(log: Log):
    return transcript_of_log(log.messages, PROTOCOL_TOOL_NAMES, from_start=True)


def test_protocol_calls_stay_out_and_their_text_joins_the_reply():
    log = (
        Log()
        .user("remember tea")
        .call("p1", PROTOCOL, "Noting it.", purpose="x", memory="tea")
        .result("p1", PROTOCOL, '{"success": true}')
        .text("Done.")
    )
    items = read(log).items
    assert [i.role for i in items] == ["user", "assistant"]
    assert items[1].text == "Noting it.\n\nDone."
    assert items[1].calls == ()
    assert items[1].position == 2


def test_a_call_handed_to_the_client_ends_the_reply_and_waits():
    log = Log().user("weather?").call("c1", "lookup", "Checking.", city="Oslo")
    transcript = read(log)
    assert transcript.items[-1].calls == (Call("c1", "lookup", {"city": "Oslo"}),)
    assert transcript.items[-1].text == "Checking."
    assert transcript.pending_calls == ("c1",)
    log.result("c1", "lookup", "sunny")
    after = read(log)
    assert after.pending_calls == ()
    assert after.items[-1].role == "tool" and after.items[-1].call_id == "c1"


def test_calls_the_service_answered_are_not_the_clients():
    log = (
        Log()
        .user("two cities")
        .call("c1", "lookup", city="Oslo")
        .call("c2", "lookup", city="Rome")
        .result("c2", "lookup", "single_tool_call_per_turn", service=True)
    )
    reply = read(log).items[-1]
    assert [c.id for c in reply.calls] == ["c1"]
    assert read(log).pending_calls == ("c1",)


def test_a_reply_cut_off_by_a_failure_is_not_in_the_transcript_yet():
    log = (
        Log()
        .user("a")
        .text("one")
        .user("b")
        .call("p1", PROTOCOL, "Half way.", purpose="x", memory="m")
        .result("p1", PROTOCOL, "{}")
    )
    transcript = read(log)
    assert [i.role for i in transcript.items] == ["user", "assistant", "user"]
    assert transcript.ends_with_client_message
    assert [m.index for m in transcript.open_answers] == [4, 5]


def test_a_stretch_that_starts_mid_reply_skips_it():
    log = Log().user("a").text("one").user("b").text("two")
    transcript = transcript_of_log(log.messages[1:], PROTOCOL_TOOL_NAMES, from_start=False)
    assert [(i.role, i.text) for i in transcript.items] == [("user", "b"), ("assistant", "two")]


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        ("hello", [{"type": "text", "text": "hel"}, {"type": "text", "text": "lo"}]),
        ("", None),
        (
            [
                {"type": "thinking", "thinking": "hm", "signature": "s"},
                {"type": "text", "text": "x"},
            ],
            "x",
        ),
    ],
)
def test_text_compares_as_text(ours, theirs):
    assert Item(role="user", content=ours).key == Item(role="user", content=theirs or "").key


def test_arguments_compare_as_json_values():
    as_text = Item(role="assistant", calls=(Call("c", "f", '{"b": 1.0, "a": [1]}'),))
    as_object = Item(role="assistant", calls=(Call("c", "f", {"a": [1], "b": 1}),))
    assert as_text.key == as_object.key
    assert as_text.key != Item(role="assistant", calls=(Call("c", "f", {"a": [2]}),)).key


# --------------------------------------------------------------------------- reconcile


def u(text: str, position: int = 0) -> Item:
    return Item(role="user", content=text, position=position)


def a(text: str, position: int = 0, calls: tuple[Call, ...] = ()) -> Item:
    return Item(role="assistant", content=text, calls=calls, position=position)


def r(call_id: str, text: str, position: int = 0) -> Item:
    return Item(role="tool", content=text, call_id=call_id, position=position)


def positioned(*items: Item) -> list[Item]:
    return [Item(i.role, i.content, i.calls, i.call_id, i.is_error, n) for n, i in enumerate(items)]


T = [u("a"), a("one"), u("b"), a("two")]


@pytest.mark.parametrize(
    ("client", "new"),
    [
        ([*T, u("c")], ["c"]),  # everything resent
        ([a("two"), u("c")], ["c"]),  # trimmed from the front
        ([u("b"), a("two"), u("c")], ["c"]),
        ([u("c")], ["c"]),  # only the new message
        ([u("c"), u("d")], ["c", "d"]),
    ],
)
def test_new_messages_are_what_follows_the_longest_overlap(client, new):
    outcome = reconcile(
        positioned(*client), T, before_reply=None, log_empty=False, pending_calls=()
    )
    assert isinstance(outcome, Proceed)
    assert [i.text for i in outcome.new] == new


def test_overlap_is_linear_and_exact():
    long = [u(str(n)) for n in range(5000)]
    assert overlap([*long, u("new")], long) == 5000
    assert overlap([u("x")], long) == 0


def test_a_retry_of_the_last_request_replays():
    before = [u("a"), a("one"), u("b")]
    for client in ([u("b")], [u("a"), a("one"), u("b")]):
        outcome = reconcile(
            positioned(*client), T, before_reply=before, log_empty=False, pending_calls=()
        )
        assert isinstance(outcome, Replay)


def test_an_assistant_message_the_session_did_not_send_is_a_mismatch():
    client = positioned(u("a"), a("something else"), u("b"))
    outcome = reconcile(client, T, before_reply=None, log_empty=False, pending_calls=())
    assert isinstance(outcome, Refusal)
    assert (outcome.code, outcome.index) == ("gateway_transcript_mismatch", 1)
    assert "something else" in outcome.reason and "'one'" in outcome.reason


def test_results_answer_only_pending_calls_and_user_input_waits_for_them():
    transcript = [u("w"), a("", calls=(Call("c1", "lookup", {}),))]
    wrong = reconcile(
        positioned(r("c9", "x")),
        transcript,
        before_reply=None,
        log_empty=False,
        pending_calls=("c1",),
    )
    assert isinstance(wrong, Refusal) and wrong.code == "gateway_transcript_mismatch"
    waiting = reconcile(
        positioned(u("next")), transcript, before_reply=None, log_empty=False, pending_calls=("c1",)
    )
    assert isinstance(waiting, Refusal)
    assert (waiting.code, waiting.tool_call_id) == ("tool_call_pending", "c1")
    ok = reconcile(
        positioned(r("c1", "sunny"), u("thanks")),
        transcript,
        before_reply=None,
        log_empty=False,
        pending_calls=("c1",),
    )
    assert isinstance(ok, Proceed) and [i.role for i in ok.new] == ["tool", "user"]


def test_nothing_new_runs_again_after_a_failure_or_is_refused():
    failed = [u("a"), a("one"), u("b")]
    again = reconcile(
        positioned(u("b")), failed, before_reply=None, log_empty=False, pending_calls=()
    )
    assert isinstance(again, Proceed) and again.again and not again.new
    refused = reconcile(positioned(*T), T, before_reply=None, log_empty=False, pending_calls=())
    assert isinstance(refused, Refusal) and refused.code == "gateway_nothing_new"


def test_an_empty_session_imports_a_whole_conversation():
    conversation = positioned(
        u("a"), a("calling", calls=(Call("c1", "lookup", {}),)), r("c1", "x"), a("done"), u("b")
    )
    outcome = reconcile(conversation, [], before_reply=None, log_empty=True, pending_calls=())
    assert isinstance(outcome, Proceed) and outcome.importing
    assert len(outcome.new) == 5
    broken = positioned(u("a"), a("calling", calls=(Call("c1", "lookup", {}),)), u("b"))
    refusal = reconcile(broken, [], before_reply=None, log_empty=True, pending_calls=())
    assert isinstance(refusal, Refusal) and refusal.index == 2
    ends_with_answer = reconcile(
        positioned(u("a"), a("x")), [], before_reply=None, log_empty=True, pending_calls=()
    )
    assert isinstance(ends_with_answer, Refusal) and ends_with_answer.code == "gateway_nothing_new"


REASONING = {
    "type": "reasoning",
    "id": "rs_up_1",
    "summary": [{"type": "summary_text", "text": "Patch it."}],
    "encryptedContent": "gAAAA-1",
}


def test_a_reply_read_off_the_log_carries_its_reasoning_and_its_custom_calls_kind():
    patch = "*** Begin Patch\n*** End Patch"
    log = (
        Log()
        .user("fix a.txt")
        .call("p1", PROTOCOL, [REASONING, {"type": "text", "text": "Noted."}], purpose="x")
        .result("p1", PROTOCOL, '{"success": true}')
        .call("c1", "apply_patch", [{**REASONING, "id": "rs_up_2"}], input=patch)
    )
    transcript = transcript_of_log(
        log.messages, PROTOCOL_TOOL_NAMES, from_start=True, custom_tools=frozenset({"apply_patch"})
    )
    reply = transcript.items[-1]
    # Every answer's reasoning is the reply's, in order; its protocol call stays out.
    assert [r["id"] for r in reply.reasoning] == ["rs_up_1", "rs_up_2"]
    assert reply.calls == (Call("c1", "apply_patch", {"input": patch}, kind="custom"),)
    assert reply.text == "Noted."
    # Kind and reasoning are not compared: the reply a Chat client holds is the same reply.
    as_chat = Item(
        role="assistant", content="Noted.", calls=(Call("c1", "apply_patch", {"input": patch}),)
    )
    assert reply.key == as_chat.key
    assert read(log).items[-1].calls[0].kind == "function"
