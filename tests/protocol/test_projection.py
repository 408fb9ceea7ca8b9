"""The model's view for one turn (contract §4): order, filtering, folds, state, previews."""

from __future__ import annotations

import dataclasses
import json

import pytest

from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.messages import Fold
from contextproto.protocol.projection import project
from contextproto.protocol.state import KEY_CURRENT_WINDOW_ENTRY, KEY_TASK_MEMORY
from tests.protocol.logbuilder import RUN_1, RUN_2, LogBuilder, make_input


def _shape(projection) -> list[str]:
    return [f"{m.role}/{m.kind}" for m in projection.messages]


def _ids(projection) -> list[tuple[str, ...]]:
    return [s.message_ids for s in projection.sources]


def _json_of(text: str) -> dict:
    return json.loads(text.split("\n", 1)[1])


# ----------------------------------------------------------------- contract §4.1 example


def _worked_example() -> tuple[LogBuilder, Fold]:
    log = LogBuilder(window="a")
    log.input("plan the trip")  # 1: this run's input
    log.text()  # 2 .. 8 covered by A's checkpoint
    log.exchange()  # 3, 4
    log.text()  # 5
    log.exchange()  # 6, 7
    log.text()  # 8
    log.exchange("flights")  # 9, 10 .. folded
    log.exchange("hotels")  # 11, 12
    log.switch("b").text()  # 13
    log.text()  # 14
    call = log.switch("a").call("weather", call_id="call_w")  # 15
    log.result(call, "sunny")  # 16
    return log, log.fold("a", 9, 12, "found flights and hotels")


def test_spec_worked_example() -> None:
    log, fold = _worked_example()
    projection = project(make_input(log, window="a", version=1, covered=8, folds=[fold]))

    assert _shape(projection) == [
        "system/system",
        "assistant/context_header",
        "user/input",
        "assistant/context_fold",
        "assistant/tool_call",
        "tool/tool_result",
    ]
    sources = [s.to_wire() for s in projection.sources]
    assert [s["derivedType"] for s in sources] == [
        "system",
        "context_header",
        "raw",
        "context_fold",
        "raw",
        "raw",
    ]
    assert sources[2] | {} == {
        "derivedType": "raw",
        "foldId": None,
        "sessionId": "s1",
        "windowId": "a",
        "firstIndex": 1,
        "lastIndex": 1,
        "messageIds": ["m1"],
    }
    assert sources[3] == {
        "derivedType": "context_fold",
        "foldId": fold.id,
        "sessionId": "s1",
        "windowId": "a",
        "firstIndex": 9,
        "lastIndex": 12,
        "messageIds": ["m9", "m10", "m11", "m12"],
    }
    assert (sources[4]["firstIndex"], sources[4]["messageIds"]) == (15, ["m15"])
    assert (sources[5]["firstIndex"], sources[5]["messageIds"]) == (16, ["m16"])
    assert sources[0]["messageIds"] == [] and sources[1]["messageIds"] == []
    assert sources[1]["windowId"] == "a"
    call, result = projection.messages[4], projection.messages[5]
    assert (call.tool_call_id, call.tool_name, call.arguments) == ("call_w", "weather", {"q": "x"})
    assert (result.tool_call_id, result.content) == ("call_w", "sunny")
    assert projection.messages[3].tool_call_id is None
    assert projection.protocol == "unified@1" and projection.window_id == "a"


def test_system_prompt_gets_the_protocol_prompt() -> None:
    log = LogBuilder()
    log.input()
    projection = project(
        make_input(
            log, system_prompt="Be kind.\n{{context_protocol}}\nEnd.", protocol_prompt="RULES"
        )
    )
    assert projection.messages[0].content == "Be kind.\nRULES\nEnd."
    assert projection.sources[0].derived_type == "system"


# ----------------------------------------------------------------- filtering, inputs


def test_other_windows_history_never_enters_the_view() -> None:
    log = LogBuilder(window="a")
    log.text("a1")  # 1
    log.switch("b").text("b1")  # 2
    log.exchange()  # 3, 4 (b)
    log.switch("a").text("a2")  # 5
    inp = make_input(log, window="a")
    # The DB layer should pass only A's rows; pass everything to prove the engine filters.
    projection = project(dataclasses.replace(inp, window_messages=log.messages))
    raw = [s for s in projection.sources if s.derived_type == "raw"]
    assert [s.first_index for s in raw] == [1, 5]
    assert {s.window_id for s in raw} == {"a"}


def test_current_run_inputs_survive_window_switches_and_compression() -> None:
    log = LogBuilder(window="main", run=RUN_1)
    log.input("old run, main", run=RUN_1)  # 1
    log.switch("a").input("old run, a", run=RUN_1)  # 2
    log.text()  # 3
    log.run = RUN_2
    log.input("new run, a covered", run=RUN_2)  # 4
    log.text()  # 5 (covered too)
    log.switch("main").input("new run, main", run=RUN_2)  # 6
    log.switch("a").text()  # 7
    log.input("new run, a visible", run=RUN_2)  # 8
    projection = project(make_input(log, window="a", covered=5, run_id=RUN_2))
    raw = [(s.first_index, s.window_id) for s in projection.sources if s.derived_type == "raw"]
    assert raw == [(4, "a"), (6, "main"), (7, "a"), (8, "a")]


def test_earlier_run_inputs_in_the_visible_window_history_stay() -> None:
    log = LogBuilder(window="a", run=RUN_1)
    log.input("run 1")  # 1
    log.run = RUN_2
    log.input("run 2")  # 2
    projection = project(make_input(log, window="a", run_id=RUN_2))
    assert [s.first_index for s in projection.sources if s.derived_type == "raw"] == [1, 2]


def test_inputs_are_deduplicated_by_message_id() -> None:
    log = LogBuilder(window="a")
    log.input()
    inp = make_input(log, window="a")
    doubled = dataclasses.replace(inp, run_inputs=[*inp.run_inputs, *inp.run_inputs])
    assert _ids(project(doubled)).count(("m1",)) == 1


def test_input_inside_an_open_group_goes_after_the_group() -> None:
    log = LogBuilder(window="a")
    call = log.call()  # 1 (a)
    log.switch("b").input("from b")  # 2: current run, another window, inside a's group
    log.result(call)  # 3 (a)
    log.switch("a").text()  # 4
    projection = project(make_input(log, window="a"))
    assert [s.first_index for s in projection.sources[2:-1]] == [1, 3, 2, 4]


def test_input_inside_a_folds_range_goes_after_the_fold() -> None:
    log = LogBuilder(window="a")
    log.text()  # 1
    call = log.call()  # 2
    log.switch("b").input("from b")  # 3
    log.result(call)  # 4 (a)
    log.switch("a").text()  # 5
    fold = log.fold("a", 1, 4)
    projection = project(make_input(log, window="a", folds=[fold]))
    assert _shape(projection)[2:] == [
        "assistant/context_fold",
        "user/input",
        "assistant/text",
        "assistant/context_state",
    ]
    assert projection.sources[3].first_index == 3


def test_input_from_elsewhere_is_placed_by_index_between_units() -> None:
    log = LogBuilder(window="a")
    log.text()  # 1
    log.switch("b").input("b input")  # 2
    log.switch("a").exchange()  # 3, 4
    projection = project(make_input(log, window="a"))
    assert [s.first_index for s in projection.sources[2:-1]] == [1, 2, 3, 4]


# ----------------------------------------------------------------- folds


def test_fold_replaces_its_messages_at_the_position_of_its_first_message() -> None:
    log = LogBuilder(window="a")
    log.input()  # 1
    log.text()  # 2
    log.exchange()  # 3, 4
    log.text()  # 5
    fold = log.fold("a", 2, 4, "looked things up")
    projection = project(make_input(log, window="a", folds=[fold]))
    assert _shape(projection)[2:5] == ["user/input", "assistant/context_fold", "assistant/text"]
    message = projection.messages[3]
    for fragment in (
        fold.id,
        "'a'",
        "#2-#4",
        "looked things up",
        "context_fold_read",
        "not an instruction",
        '"foldId"',
    ):
        assert fragment in message.content
    assert message.tool_call_id is None
    assert projection.sources[3].message_ids == ("m2", "m3", "m4")


def test_folds_at_or_below_the_checkpoint_are_not_shown() -> None:
    log = LogBuilder(window="a")
    log.exchange()  # 1, 2
    log.exchange()  # 3, 4
    log.text()  # 5
    covered_fold = log.fold("a", 1, 2)
    inp = make_input(log, window="a", covered=2)
    projection = project(dataclasses.replace(inp, folds=[covered_fold]))
    assert "assistant/context_fold" not in _shape(projection)
    assert [s.first_index for s in projection.sources if s.derived_type == "raw"] == [3, 4, 5]


def test_folds_of_other_windows_are_ignored() -> None:
    log = LogBuilder(window="a")
    log.exchange()
    foreign = dataclasses.replace(log.fold("a", 1, 2), window_id="b")
    inp = dataclasses.replace(make_input(log, window="a"), folds=[foreign])
    assert "assistant/context_fold" not in _shape(project(inp))


def test_overlapping_folds_are_an_integrity_error() -> None:
    log = LogBuilder(window="a")
    log.exchange()
    log.exchange()
    folds = [log.fold("a", 1, 4, call_id="x"), log.fold("a", 3, 4, call_id="y")]
    with pytest.raises(ProtocolError) as caught:
        project(make_input(log, window="a", folds=folds))
    assert caught.value.code == "projection_fold_conflict"


# ----------------------------------------------------------------- pairing


def test_call_without_result_is_refused() -> None:
    log = LogBuilder(window="a")
    log.text()
    log.call(call_id="call_x")
    with pytest.raises(ProtocolError) as caught:
        project(make_input(log, window="a"))
    assert caught.value.code == "projection_pairing_violation"
    assert "call_x" in caught.value.message and "#2" in caught.value.message
    assert caught.value.details["problem"] == "call_without_result"


def test_result_without_call_is_refused() -> None:
    log = LogBuilder(window="a")
    log.result("ghost")
    with pytest.raises(ProtocolError) as caught:
        project(make_input(log, window="a"))
    assert caught.value.details == {
        "problem": "result_without_call",
        "toolCallId": "ghost",
        "indices": [1],
    }


def test_duplicate_result_is_refused() -> None:
    log = LogBuilder(window="a")
    call = log.call()
    log.result(call)
    log.result(call, "again")
    with pytest.raises(ProtocolError) as caught:
        project(make_input(log, window="a"))
    assert caught.value.details["problem"] == "duplicate_result"
    assert caught.value.details["indices"] == [1, 2, 3]


def test_result_whose_call_is_covered_is_refused() -> None:
    log = LogBuilder(window="a")
    call = log.call()  # 1
    log.result(call)  # 2
    with pytest.raises(ProtocolError) as caught:
        project(make_input(log, window="a", covered=1))
    assert caught.value.code == "projection_pairing_violation"


# ----------------------------------------------------------------- v1 / v2 header and state


def _state_log() -> LogBuilder:
    log = LogBuilder(window="a")
    log.exchange("early")  # 1, 2: a visited before
    log.switch("main").text()  # 3
    log.switch("a").exchange("search")  # 4, 5
    log.exchange("fetch")  # 6, 7
    return log


ENTRY = {
    "windowId": "a",
    "fromWindowId": "main",
    "upperBoundBeforeEntry": 3,
    "input": "next: compare prices — Zürich",
    "enteredAtRevision": 5,
}


def test_v2_state_message_reports_the_frozen_state() -> None:
    log = _state_log()
    kv = {KEY_CURRENT_WINDOW_ENTRY: ENTRY}
    projection = project(make_input(log, window="a", kv=kv, revision=11))
    state = projection.messages[-1]
    assert (state.role, state.kind) == ("assistant", "context_state")
    assert state.tool_call_id is None
    assert _json_of(state.content) == {
        "windowId": "a",
        "status": "active",
        "revision": 11,
        "enteredFrom": "main",
        "upperBoundBeforeEntry": 3,
        "handoffInput": "next: compare prices — Zürich",
        "checkpointPosition": 0,
        "visibleToolResultsSinceEntry": 2,
        "lastToolName": "fetch",
    }
    assert list(_json_of(state.content)) == [
        "windowId",
        "status",
        "revision",
        "enteredFrom",
        "upperBoundBeforeEntry",
        "handoffInput",
        "checkpointPosition",
        "visibleToolResultsSinceEntry",
        "lastToolName",
    ]
    assert "Zürich" in state.content  # non-ASCII kept
    source = projection.sources[-1]
    assert (source.derived_type, source.window_id, source.message_ids) == ("context_state", "a", ())
    assert source.first_index is None and source.last_index is None


def test_v2_state_ignores_an_entry_of_another_window() -> None:
    log = _state_log()
    kv = {
        KEY_CURRENT_WINDOW_ENTRY: {**ENTRY, "windowId": "b"},
        "window/a": {"goal": "g", "status": "suspended", "input": "record input"},
    }
    state = _json_of(project(make_input(log, window="a", kv=kv, covered=2)).messages[-1].content)
    assert state["enteredFrom"] is None and state["upperBoundBeforeEntry"] is None
    assert state["handoffInput"] == "record input"
    assert state["status"] == "suspended"
    assert state["checkpointPosition"] == 2
    assert state["visibleToolResultsSinceEntry"] == 2  # #5 and #7 (#2 is covered)


def test_v2_state_with_no_tool_calls_has_null_tool_name() -> None:
    log = LogBuilder(window="a")
    log.input()
    state = _json_of(project(make_input(log, window="a")).messages[-1].content)
    assert state["lastToolName"] is None and state["visibleToolResultsSinceEntry"] == 0


def test_v2_header_keeps_non_ascii_and_shows_only_the_current_window() -> None:
    log = LogBuilder(window="a")
    log.input()
    kv = {
        KEY_TASK_MEMORY: "Budget 9000 €, 東京",
        "window/b": {"goal": "other"},
        "checkpoint/a": "Kunde möchte",
    }
    projection = project(make_input(log, window="a", kv=kv, session_inputs={"city": "Zürich"}))
    header = projection.messages[1]
    assert (header.role, header.kind) == ("assistant", "context_header")
    body = _json_of(header.content)
    assert list(body) == ["inputs", "task_memory", "current_window", "current_window_checkpoint"]
    assert body["current_window"]["id"] == "a" and body["current_window"]["goal"] == "goal of a"
    assert body["task_memory"] == "Budget 9000 €, 東京"
    assert body["current_window_checkpoint"] == "Kunde möchte"
    assert "東京" in header.content and "Zürich" in header.content
    assert "other" not in header.content


def test_v1_header_escapes_non_ascii_and_has_no_state_message() -> None:
    log = LogBuilder(window="a")
    log.input()
    kv = {KEY_TASK_MEMORY: "東京", "checkpoint/a": "möchte"}
    projection = project(
        make_input(log, window="a", version=1, kv=kv, session_inputs={"city": "Zürich"})
    )
    header = projection.messages[1].content
    assert "\\u6771\\u4eac" in header and "東京" not in header and "Zürich" not in header
    body = _json_of(header)
    assert list(body) == ["agent_inputs", "task_memory", "active_window", "working_checkpoint"]
    assert body["active_window"]["id"] == "a" and body["working_checkpoint"] == "möchte"
    assert "context_state" not in [m.kind for m in projection.messages]


def test_window_record_renders_in_a_stable_key_order() -> None:
    log = LogBuilder(window="a")
    log.input()
    record = {"status": "active", "zeta": 1, "goal": "g", "alpha": 2}
    shuffled = {"alpha": 2, "goal": "g", "zeta": 1, "status": "active"}
    one = project(make_input(log, window="a", kv={"window/a": record}))
    two = project(make_input(log, window="a", kv={"window/a": shuffled}))
    assert one.messages[1].content == two.messages[1].content
    assert list(_json_of(one.messages[1].content)["current_window"]) == [
        "id",
        "goal",
        "status",
        "alpha",
        "zeta",
    ]


# ----------------------------------------------------------------- v3 placements


@pytest.mark.parametrize(
    ("placement", "shape"),
    [
        (
            "trailing_assistant",
            [
                "system/system",
                "assistant/context_header",
                "user/input",
                "assistant/tool_call",
                "tool/tool_result",
                "assistant/context_state",
            ],
        ),
        (
            "before_history_assistant",
            [
                "system/system",
                "assistant/context_header",
                "assistant/context_state",
                "user/input",
                "assistant/tool_call",
                "tool/tool_result",
            ],
        ),
        (
            "trailing_user",
            [
                "system/system",
                "assistant/context_header",
                "user/input",
                "assistant/tool_call",
                "tool/tool_result",
                "user/context_state",
            ],
        ),
    ],
)
def test_v3_places_the_state_message(placement: str, shape: list[str]) -> None:
    log = LogBuilder(window="a")
    log.input()
    log.exchange()
    projection = project(
        make_input(log, window="a", version=3, options={"stateMessagePlacement": placement})
    )
    assert _shape(projection) == shape
    state_at = [m.kind for m in projection.messages].index("context_state")
    assert projection.sources[state_at].derived_type == "context_state"
    assert projection.sources[state_at].message_ids == ()
    assert projection.protocol == "unified@3"


@pytest.mark.parametrize(
    "placement", ["trailing_assistant", "before_history_assistant", "trailing_user"]
)
def test_v3_checks_pairing_before_placing_the_state(placement: str) -> None:
    log = LogBuilder(window="a")
    log.input()
    log.call()
    with pytest.raises(ProtocolError) as caught:
        project(
            make_input(log, window="a", version=3, options={"stateMessagePlacement": placement})
        )
    assert caught.value.code == "projection_pairing_violation"


def test_v3_refuses_an_unknown_placement() -> None:
    log = LogBuilder(window="a")
    log.input()
    with pytest.raises(ProtocolError) as caught:
        project(make_input(log, window="a", version=3, options={"stateMessagePlacement": "system"}))
    assert caught.value.code == "option_bad_enum"


# ----------------------------------------------------------------- prefix@2


def test_prefix_reads_main_only_and_shows_inputs_and_checkpoint() -> None:
    log = LogBuilder(window="main", run=RUN_2)
    log.input("covered input")  # 1, current run, covered
    log.exchange()  # 2, 3 covered
    log.text()  # 4
    log.switch("a").text("never shown")  # 5: prefix has no windows, but prove filtering
    log.switch("main").exchange()  # 6, 7
    folds = [log.fold("main", 6, 7)]
    inp = make_input(
        log,
        window="main",
        protocol_id="prefix",
        version=2,
        covered=3,
        run_id=RUN_2,
        folds=folds,
        kv={"activeWindow": "a"},
        session_inputs={"ticket": "Straße"},
    )
    projection = project(dataclasses.replace(inp, window_messages=log.messages))
    assert _shape(projection) == [
        "system/system",
        "assistant/context_header",
        "user/input",
        "assistant/text",
        "assistant/tool_call",
        "tool/tool_result",
    ]
    assert [s.first_index for s in projection.sources[2:]] == [1, 4, 6, 7]
    body = _json_of(projection.messages[1].content)
    assert body == {"agent_inputs": {"ticket": "Straße"}, "checkpoint": "checkpoint of main"}
    assert projection.window_id == "main" and projection.protocol == "prefix@2"


# ----------------------------------------------------------------- GUI and previews


def _image(n: int) -> list[dict]:
    return [
        {"type": "text", "text": f"shot {n}"},
        {"type": "image", "mediaType": "image/png", "data": f"DATA{n}"},
    ]


def test_gui_projection_keeps_images_of_the_three_latest_messages_only() -> None:
    log = LogBuilder(window="a")
    log.input(_image(1))  # 1
    for n in (2, 3, 4):
        call = log.call("screenshot")
        log.result(call, _image(n))  # 3, 5, 7
    projection = project(make_input(log, window="a"))
    by_index = {
        s.first_index: m for m, s in zip(projection.messages, projection.sources, strict=True)
    }
    assert by_index[1].content == [
        {"type": "text", "text": "shot 1"},
        {"type": "text", "text": "[image omitted from view: message #1]"},
    ]
    for index in (3, 5, 7):
        assert by_index[index].content[1]["type"] == "image"
    assert log.at(1).content[1]["type"] == "image"  # raw untouched


def test_gui_projection_off_keeps_every_image() -> None:
    log = LogBuilder(window="a")
    for n in range(5):
        log.input(_image(n))
    projection = project(make_input(log, window="a", options={"guiProjection": False}))
    assert all(m.content[1]["type"] == "image" for m in projection.messages[2:-1])


def test_large_tool_result_is_previewed_as_head_and_tail() -> None:
    log = LogBuilder(window="a")
    call = log.call()
    big = "H" * 30000 + "M" * 10000 + "T" * 10000
    log.result(call, big)  # 2
    projection = project(make_input(log, window="a", preview_chars=1000))
    shown = projection.messages[3].content
    # 1000 characters in all, the marker included: 448 + a 103-character marker + 449.
    assert len(shown) == 1000
    assert shown.startswith("H" * 448 + "\n[") and shown.endswith("]\n" + "T" * 449)
    assert "M" not in shown
    assert "tool result #2 truncated for view: 50000 characters in full" in shown
    assert "showing first 448 and last 449" in shown
    assert log.at(2).content == big


def _shown_parts(shown: str) -> tuple[str, int, int, str]:
    """(marker, head, tail, tail text) of a preview, read off its marker."""
    start = shown.index("\n[... tool result #")
    end = shown.index("...]\n", start) + len("...]\n")
    marker = shown[start:end]
    head = int(marker.split("showing first ")[1].split(" ")[0])
    tail = int(marker.split(" and last ")[1].split(" ")[0])
    assert start == head, "the marker says how many characters come before it"
    return marker, head, tail, shown[end:]


@pytest.mark.parametrize("limit", [60, 103, 104, 105, 107, 200, 1000, 16000])
@pytest.mark.parametrize("extra", [1, 2, 57, 10**5])
def test_preview_is_never_longer_than_the_result_nor_the_limit(limit: int, extra: int) -> None:
    text = "".join(chr(ord("a") + n % 26) for n in range(limit + extra))
    log = LogBuilder(window="a")
    log.result(log.call(), text)  # 2
    shown = project(make_input(log, window="a", preview_chars=limit)).messages[3].content
    assert len(shown) <= limit < len(text)
    if "truncated for view" in shown:
        _marker, head, tail, tail_text = _shown_parts(shown)
        assert shown[:head] == text[:head] and tail_text == text[len(text) - tail :]
        assert len(tail_text) == tail and head >= 1 and tail >= 1
    else:  # a limit too small for the marker shows the head alone
        assert shown == text[:limit]


def test_a_16001_character_result_is_previewed_in_at_most_16000() -> None:
    # The defect: 16001 characters were shown as 16105 (head + tail = 16000, plus the marker).
    log = LogBuilder(window="a")
    log.result(log.call(), "x" * 16001)  # 2
    shown = project(make_input(log, window="a")).messages[3].content
    assert len(shown) <= 16000
    _marker, head, tail, _tail_text = _shown_parts(shown)
    assert head + tail + len(_marker) == len(shown)


def test_preview_never_splits_a_surrogate_pair() -> None:
    # Text from a client that kept UTF-16 pairs as two code points (a JSON decoder with
    # surrogatepass, a JavaScript host): a cut between the halves would leave lone halves.
    pair = "\ud83d\ude00"
    for offset in range(4):
        text = "a" * offset + pair * 600
        log = LogBuilder(window="a")
        log.result(log.call(), text)  # 2
        shown = project(make_input(log, window="a", preview_chars=301)).messages[3].content
        assert len(shown) <= 301
        for position, char in enumerate(shown):
            if "\ud800" <= char <= "\udbff":
                assert shown[position + 1 : position + 2] == "\ude00", (offset, position)
            if "\udc00" <= char <= "\udfff":
                assert shown[position - 1] == "\ud83d", (offset, position)


def test_preview_applies_to_text_parts_and_not_to_short_results() -> None:
    log = LogBuilder(window="a")
    call = log.call()
    log.result(call, [{"type": "text", "text": "x" * 3000}])  # 2
    call = log.call()
    log.result(call, "short")  # 4
    projection = project(make_input(log, window="a", preview_chars=1000))
    assert "tool result #2 truncated" in projection.messages[3].content[0]["text"]
    assert projection.messages[5].content == "short"
    assert log.at(2).content[0]["text"] == "x" * 3000


def test_long_user_input_is_not_previewed() -> None:
    log = LogBuilder(window="a")
    log.input("y" * 5000)
    projection = project(make_input(log, window="a", preview_chars=1000))
    assert projection.messages[2].content == "y" * 5000


# ----------------------------------------------------------------- determinism, wire, plans


def test_same_input_gives_byte_identical_wire_json() -> None:
    log, fold = _worked_example()
    inp = make_input(log, window="a", covered=8, folds=[fold], kv={KEY_CURRENT_WINDOW_ENTRY: ENTRY})
    one, two = project(inp), project(inp)
    assert one == two
    assert json.dumps(one.to_wire()) == json.dumps(two.to_wire())
    wire = one.to_wire()
    assert list(wire) == [
        "messages",
        "sources",
        "windowId",
        "revision",
        "upperBound",
        "runId",
        "protocol",
        "options",
    ]
    assert wire["runId"] == RUN_1 and wire["upperBound"] == 16 and wire["revision"] == 7


def test_the_view_does_not_share_mutable_content_with_the_log() -> None:
    log = LogBuilder(window="a")
    log.input([{"type": "text", "text": "hi"}])
    projection = project(make_input(log, window="a"))
    projection.messages[2].content[0]["text"] = "changed"
    assert log.at(1).content[0]["text"] == "hi"


def test_error_results_are_flagged_for_adapters() -> None:
    log = LogBuilder(window="a")
    call = log.call()
    log.result(call, "boom", is_error=True)
    assert project(make_input(log, window="a")).error_tool_call_ids == {call}
