"""unified@4's view (contract §9): the masking tier, the cache-stable layout, context pressure."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextproto.protocol import adapters, catalog, prompts
from contextproto.protocol.derived_texts import HEADER_LEAD, STATE_LEAD
from contextproto.protocol.masking import masked_stub, result_size
from contextproto.protocol.messages import KIND_TOOL_CALL, KIND_TOOL_RESULT, RawMessage
from contextproto.protocol.projection import (
    Projection,
    project,
)
from contextproto.protocol.state import (
    KEY_CURRENT_WINDOW_ENTRY,
    KEY_TASK_MEMORY,
    new_window_record,
    window_key,
)
from contextproto.protocol.tokens import json_tokens
from tests.protocol.logbuilder import LogBuilder, make_input
from tests.protocol.test_projection_properties import Case, cases

BIG = "x" * 1500  # longer than the default maskMinChars (1000)


def _log(results: int, content: Any = BIG, *, name: str = "price_lookup") -> LogBuilder:
    """An input, then `results` tool calls each answered by `content`: result i is #2i+1."""
    log = LogBuilder()
    log.input("quote 40 seats")
    for _ in range(results):
        log.exchange(name, content)
    return log


def _v4(log: LogBuilder, **kwargs: Any) -> Projection:
    options = kwargs.pop("options", {})
    return project(make_input(log, version=4, options=options, **kwargs))


def masked_indices(projection: Projection) -> list[int]:
    return [s.first_index for s in projection.sources if s.derived_type == "masked"]


def result_index(n: int) -> int:
    """The MessageIndex of the n-th result (from 1) of `_log`."""
    return 2 * n + 1


def derived_json(text: str) -> dict[str, Any]:
    return json.loads(text.split("\n", 1)[1])


def state_of(projection: Projection) -> dict[str, Any]:
    (message,) = [m for m in projection.messages if m.kind == "context_state"]
    assert message.content.startswith(STATE_LEAD)
    return derived_json(message.content)


def header_of(projection: Projection) -> str:
    (message,) = [m for m in projection.messages if m.kind == "context_header"]
    assert message.content.startswith(HEADER_LEAD)
    return message.content


# ---------------------------------------------------------------- the boundary


@pytest.mark.parametrize(
    ("results", "masked"),
    [
        (6, 0),  # all kept recent
        (15, 0),  # 9 eligible: less than one step
        (16, 10),  # 10 eligible: the first step
        (20, 10),
        (25, 10),  # 19 eligible: still the first step
        (26, 20),  # 20 eligible: the second step
        (35, 20),
        (36, 30),
    ],
)
def test_the_boundary_moves_in_steps_of_mask_step(results: int, masked: int) -> None:
    # Defaults: keep the newest 6, step 10, results longer than 1000 characters.
    projection = _v4(_log(results))
    assert masked_indices(projection) == [result_index(n) for n in range(1, masked + 1)]
    assert state_of(projection)["maskedToolResults"] == masked


def test_nothing_moves_between_two_steps() -> None:
    # Results 16..25: the same ten oldest are masked on each of those turns.
    views = [_v4(_log(n)) for n in range(16, 26)]
    assert {tuple(masked_indices(v)) for v in views} == {
        tuple(result_index(n) for n in range(1, 11))
    }


def test_between_steps_a_turn_only_appends_to_the_view() -> None:
    # The cache-stability point: without a step crossed, the messages up to the state
    # message are byte-equal to the turn before's, followed by the new ones.
    def prefix_kept(before: Projection, after: Projection) -> bool:
        old = [m.to_wire() for m in before.messages[:-1]]
        new = [m.to_wire() for m in after.messages[:-1]]
        return json.dumps(new[: len(old)]) == json.dumps(old)

    for n in range(16, 25):
        assert prefix_kept(_v4(_log(n)), _v4(_log(n + 1))), n
    # Crossing the step (25 -> 26 results) rewrites the view from the 11th result on, once.
    assert not prefix_kept(_v4(_log(25)), _v4(_log(26)))


def test_keep_recent_zero_and_step_one_mask_every_long_result() -> None:
    projection = _v4(_log(3), options={"maskKeepRecent": 0, "maskStep": 1})
    assert masked_indices(projection) == [3, 5, 7]


def test_keep_recent_larger_than_the_history_masks_nothing() -> None:
    assert masked_indices(_v4(_log(30), options={"maskKeepRecent": 1000})) == []


# ---------------------------------------------------------------- stubs, pairing, sources


def test_a_stub_names_index_tool_size_and_how_to_read_it_on_one_line() -> None:
    projection = _v4(_log(3, "y" * 18234), options={"maskKeepRecent": 1, "maskStep": 1})
    stub = projection.messages[projection.sources.index(_source_at(projection, 3))].content
    assert stub == (
        "[tool result #3 of price_lookup masked: 18234 characters; read it with "
        'context_history_read {"index": 3}]'
    )
    assert "\n" not in stub


def _source_at(projection: Projection, index: int):
    return next(s for s in projection.sources if s.first_index == index)


def test_a_stub_keeps_its_call_pairing_and_the_call_stays_raw() -> None:
    log = _log(3)
    projection = _v4(log, options={"maskKeepRecent": 1, "maskStep": 2})
    for index in (3, 5):
        position = projection.sources.index(_source_at(projection, index))
        call, stub = projection.messages[position - 1], projection.messages[position]
        raw_call, raw_result = log.at(index - 1), log.at(index)
        assert (call.kind, call.tool_call_id, call.arguments) == (
            KIND_TOOL_CALL,
            raw_call.tool_call_id,
            raw_call.arguments,
        )
        assert projection.sources[position - 1].derived_type == "raw"
        assert (stub.role, stub.kind, stub.tool_call_id) == (
            "tool",
            KIND_TOOL_RESULT,
            raw_result.tool_call_id,
        )
    # Both providers get a call answered right after it by the stub.
    openai = adapters.adapt(projection, "openai-chat").body["messages"]
    calls = [m for m in openai if m.get("tool_calls")]
    for message in calls[:2]:
        answer = openai[openai.index(message) + 1]
        assert answer["role"] == "tool"
        assert answer["tool_call_id"] == message["tool_calls"][0]["id"]
        assert answer["content"].startswith("[tool result #")
    anthropic = adapters.adapt(projection, "anthropic-messages").body["messages"]
    blocks = [b for m in anthropic for b in m["content"] if b["type"] == "tool_result"]
    assert [b["content"].startswith("[tool result #") for b in blocks] == [True, True, False]


def test_a_masked_source_names_the_original_message() -> None:
    log = _log(4)
    projection = _v4(log, options={"maskKeepRecent": 2, "maskStep": 1})
    masked = [s for s in projection.sources if s.derived_type == "masked"]
    assert [s.to_wire() for s in masked] == [
        {
            "derivedType": "masked",
            "foldId": None,
            "sessionId": "s1",
            "windowId": "main",
            "firstIndex": index,
            "lastIndex": index,
            "messageIds": [log.at(index).id],
        }
        for index in (3, 5)
    ]


def test_results_at_or_below_mask_min_chars_stay_raw_but_count_for_the_step() -> None:
    log = LogBuilder()
    log.input("go")
    for size in (999, 1000, 1001, 5, 2000, 3):
        log.exchange("fetch", "z" * size)
    # 6 results, keep 2, step 2: the oldest 4 (#3, #5, #7, #9) are in the masked range; only
    # those longer than 1000 characters are stubbed. The short ones still count for the step.
    projection = _v4(log, options={"maskKeepRecent": 2, "maskStep": 2})
    assert masked_indices(projection) == [7]
    assert state_of(projection)["maskedToolResults"] == 1
    raw = {s.first_index for s in projection.sources if s.derived_type == "raw"}
    assert {3, 5, 9, 11, 13} <= raw
    zero = _v4(log, options={"maskKeepRecent": 2, "maskStep": 2, "maskMinChars": 0})
    assert masked_indices(zero) == [3, 5, 7, 9]


def test_a_masked_result_shows_the_stub_never_a_preview() -> None:
    log = _log(3, "p" * 5000)
    projection = _v4(log, options={"maskKeepRecent": 1, "maskStep": 1}, preview_chars=400)
    contents = {
        s.first_index: m.content
        for m, s in zip(projection.messages, projection.sources, strict=True)
        if m.kind == KIND_TOOL_RESULT
    }
    assert contents[3].startswith("[tool result #3 of price_lookup masked: 5000 characters")
    assert "truncated for view" not in contents[3] + contents[5]
    assert "truncated for view: 5000 characters" in contents[7]  # the kept one is previewed


def test_an_image_result_is_replaced_whole_and_frees_its_image_place() -> None:
    image = {"type": "image", "mediaType": "image/png", "data": "A" * 2000}
    log = LogBuilder()
    log.input([{"type": "text", "text": "first screen"}, dict(image)])  # 1
    for _ in range(2):
        call = log.call("screenshot")
        log.result(call, [{"type": "text", "text": "shot"}, dict(image)])  # 3, 5
    log.input([{"type": "text", "text": "second screen"}, dict(image)])  # 6
    call = log.call("screenshot")
    log.result(call, [{"type": "text", "text": "shot"}, dict(image)])  # 8
    projection = _v4(log, options={"maskKeepRecent": 1, "maskStep": 1})
    assert masked_indices(projection) == [3, 5]
    by_index = {
        s.first_index: m.content
        for m, s in zip(projection.messages, projection.sources, strict=True)
        if s.first_index
    }
    assert by_index[3] == (
        "[tool result #3 of screenshot masked: 2004 characters with 1 image; read it with "
        'context_history_read {"index": 3}]'
    )
    # The masked results show no image, so the three newest messages that still carry one
    # (#1, #6, #8) keep theirs: the oldest input is not reduced to a marker on their account.
    for index in (1, 6, 8):
        assert any(p.get("type") == "image" for p in by_index[index]), index


def test_an_error_result_says_so_in_its_stub_and_stays_an_error_for_the_provider() -> None:
    log = LogBuilder()
    log.input("go")
    call = log.call("deploy")
    log.result(call, "E" * 3000, is_error=True)
    log.exchange("deploy", "ok")
    projection = _v4(log, options={"maskKeepRecent": 1, "maskStep": 1})
    assert masked_indices(projection) == [3]
    stub = projection.messages[projection.sources.index(_source_at(projection, 3))].content
    assert "masked: an error result, 3000 characters" in stub
    assert call in projection.error_tool_call_ids


# ---------------------------------------------------------------- folds and checkpoints


def test_folded_results_are_not_candidates_and_the_fold_stays() -> None:
    log = _log(12)
    fold = log.fold("main", 2, 9)  # results 1-4 (#3, #5, #7, #9) folded
    projection = _v4(log, folds=[fold], options={"maskKeepRecent": 2, "maskStep": 3})
    # 8 visible results (#11..#25): keep 2, 6 eligible, 6 masked (#11..#21).
    assert masked_indices(projection) == [11, 13, 15, 17, 19, 21]
    kinds = [s.derived_type for s in projection.sources]
    assert kinds.count("context_fold") == 1
    assert not {3, 5, 7, 9} & set(masked_indices(projection))


def test_results_under_the_checkpoint_are_not_candidates() -> None:
    log = _log(12)
    # #1-#9 covered by the checkpoint: 8 visible results remain, as with the fold.
    projection = _v4(log, covered=9, options={"maskKeepRecent": 2, "maskStep": 3})
    assert masked_indices(projection) == [11, 13, 15, 17, 19, 21]


def test_only_the_active_windows_results_are_masked() -> None:
    log = _log(3)
    log.switch("b")
    for _ in range(3):
        log.exchange("other", BIG)
    log.switch("main")
    inp = make_input(log, version=4, window="main", options={"maskKeepRecent": 0, "maskStep": 1})
    assert masked_indices(project(inp)) == [3, 5, 7]
    b = make_input(log, version=4, window="b", options={"maskKeepRecent": 0, "maskStep": 1})
    assert masked_indices(project(b)) == [9, 11, 13]


# ---------------------------------------------------------------- layout and pressure


def _kv(memory: str = "", *, outcomes: list | None = None, task: str = "Quote ACME") -> dict:
    record = new_window_record(goal="Quote for ACME", input="handoff")
    record.update(memory=memory, outcomes=outcomes or [])
    return {
        window_key("quote"): record,
        KEY_TASK_MEMORY: task,
        KEY_CURRENT_WINDOW_ENTRY: {
            "windowId": "quote",
            "fromWindowId": "main",
            "upperBoundBeforeEntry": 1,
            "input": "Prepare the quote; then report back.",
            "enteredAtRevision": 3,
        },
    }


def _quote_log() -> LogBuilder:
    log = LogBuilder()
    log.input("quote")
    log.switch("quote")
    log.exchange("price_lookup", "1300 EUR")
    return log


def test_the_header_does_not_change_when_only_volatile_state_changes() -> None:
    log = _quote_log()
    first = _v4(log, window="quote", kv=_kv("price 1300"), revision=7)
    second = _v4(log, window="quote", kv=_kv("price 1300, stock 40", outcomes=["done"]), revision=8)
    assert header_of(first) == header_of(second)
    assert state_of(first)["workingMemory"] == "price 1300"
    assert state_of(second)["workingMemory"] == "price 1300, stock 40"
    assert state_of(second)["outcomes"] == ["done"]
    # unified@2's header carries the window record, so the same write changes it.
    v2 = [
        project(make_input(log, version=2, window="quote", kv=_kv(memory)))
        for memory in ("price 1300", "price 1300, stock 40")
    ]
    assert header_of(v2[0]) != header_of(v2[1])


def test_the_header_changes_at_a_task_memory_write_and_holds_only_rare_state() -> None:
    log = _quote_log()
    one = _v4(log, window="quote", kv=_kv("m", task="Quote ACME"), session_inputs={"b": 1, "a": 2})
    two = _v4(log, window="quote", kv=_kv("m", task="Quote ACME, 40 seats"))
    assert header_of(one) != header_of(two)
    body = derived_json(header_of(one))
    assert body == {
        "inputs": {"a": 2, "b": 1},
        "task_memory": "Quote ACME",
        "current_window": {"id": "quote", "goal": "Quote for ACME"},
        "current_window_checkpoint": None,
    }
    assert list(body["inputs"]) == ["a", "b"]  # stable key order, whatever the store gave


def test_the_header_keeps_non_ascii_as_is() -> None:
    header = header_of(_v4(_quote_log(), window="quote", kv=_kv(task="Zoë Café 😀")))
    assert "Zoë Café 😀" in header


def test_the_state_message_holds_everything_volatile_and_the_pressure() -> None:
    log = _quote_log()
    projection = _v4(
        log,
        window="quote",
        kv=_kv("price 1300", outcomes=["first quote sent"]),
        revision=9,
        max_input_tokens=32000,
        trigger_tokens=24000,
        maintenance_pending=True,
        tool_tokens=700,
    )
    state = state_of(projection)
    assert list(state) == [
        "windowId",
        "status",
        "revision",
        "enteredFrom",
        "upperBoundBeforeEntry",
        "handoffInput",
        "workingMemory",
        "outcomes",
        "checkpointPosition",
        "visibleToolResultsSinceEntry",
        "lastToolName",
        "maskedToolResults",
        "contextPressure",
    ]
    assert state["windowId"] == "quote" and state["revision"] == 9
    assert (state["enteredFrom"], state["upperBoundBeforeEntry"]) == ("main", 1)
    assert state["handoffInput"] == "Prepare the quote; then report back."
    assert state["outcomes"] == ["first quote sent"]
    assert state["lastToolName"] == "price_lookup"
    pressure = state["contextPressure"]
    assert list(pressure) == ["viewTokens", "maxInputTokens", "triggerTokens", "maintenancePending"]
    assert pressure["maxInputTokens"] == 32000 and pressure["triggerTokens"] == 24000
    assert pressure["maintenancePending"] is True
    # viewTokens: every other message of the view, as the capacity estimator counts it,
    # plus the tool schemas; the state message itself is not counted.
    others = [m for m in projection.messages if m.kind != "context_state"]
    assert pressure["viewTokens"] == 700 + sum(json_tokens(m.to_wire()) for m in others)


def test_the_default_placement_is_a_trailing_user_state_message() -> None:
    projection = _v4(_log(2))
    last = projection.messages[-1]
    assert (last.role, last.kind) == ("user", "context_state")
    assert [m.kind for m in projection.messages[:2]] == ["system", "context_header"]
    before = _v4(_log(2), options={"stateMessagePlacement": "before_history_assistant"})
    assert [(m.role, m.kind) for m in before.messages[:3]] == [
        ("system", "system"),
        ("assistant", "context_header"),
        ("assistant", "context_state"),
    ]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_earlier_versions_ignore_the_pressure_fields_and_mask_nothing(version: int) -> None:
    log = _log(30)
    plain = project(make_input(log, version=version))
    with_pressure = project(
        make_input(
            log,
            version=version,
            max_input_tokens=1000,
            trigger_tokens=750,
            maintenance_pending=True,
            tool_tokens=99,
        )
    )
    assert json.dumps(plain.to_wire()) == json.dumps(with_pressure.to_wire())
    assert "masked" not in {s.derived_type for s in plain.sources}


def test_the_prompt_shows_the_stub_as_the_projection_writes_it() -> None:
    assert masked_stub(42, "price_lookup", "x" * 1500, is_error=False).startswith(
        "[tool result #42 of price_lookup masked: 1500 characters;"
    )
    assert "[tool result #N of TOOL masked: ...]" in prompts.UNIFIED_V4


def test_result_size_counts_text_and_image_data() -> None:
    parts = [
        {"type": "text", "text": "abc"},
        {"type": "image", "mediaType": "image/png", "data": "QUJD"},
        {"type": "image", "url": "https://x.test/i.png"},
    ]
    assert result_size(parts) == (3 + 4 + len("https://x.test/i.png"), 2)
    assert result_size("😀ü") == (2, 0)


# ---------------------------------------------------------------- properties


@st.composite
def v4_cases(draw) -> tuple[Case, dict[str, int]]:
    """Random logs, windows, folds and checkpoints of the projection properties, as v4."""
    case = draw(cases())
    mask = {
        "maskKeepRecent": draw(st.integers(0, 4)),
        "maskStep": draw(st.integers(1, 4)),
        "maskMinChars": draw(st.sampled_from((0, 1, 2, 30, 1000))),
    }
    options = {
        "guiProjection": case.inp.options.get("guiProjection", True),
        "stateMessagePlacement": draw(
            st.sampled_from(("trailing_user", "trailing_assistant", "before_history_assistant"))
        ),
        **mask,
    }
    window = case.window
    # The same plan (window, keys, rows) under unified@4, with the case's protocol prompt.
    v4 = replace(catalog.get_version("unified", 4), prompt=case.inp.plan.protocol.prompt)
    inp = replace(case.inp, plan=replace(case.inp.plan, protocol=v4), options=options)
    return replace(case, inp=inp, window=window), mask


PROPERTY_SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def _project_or_skip(case: Case) -> Projection | None:
    if case.dangling_visible:
        return None  # a pending call: the pairing refusal has its own property test
    return project(case.inp)


@PROPERTY_SETTINGS
@given(v4_cases(), st.randoms(use_true_random=False))
def test_the_v4_view_is_a_pure_function_of_state_and_raw_log(data, rnd: random.Random) -> None:
    case, _ = data
    one = _project_or_skip(case)
    if one is None:
        return
    # The same state and raw messages, loaded in another order: the same view, byte for byte.
    shuffled: list[RawMessage] = list(case.inp.window_messages)
    rnd.shuffle(shuffled)
    inputs = list(case.inp.run_inputs)
    rnd.shuffle(inputs)
    two = project(replace(case.inp, window_messages=shuffled, run_inputs=inputs))
    assert json.dumps(one.to_wire(), ensure_ascii=False) == json.dumps(
        two.to_wire(), ensure_ascii=False
    )


@PROPERTY_SETTINGS
@given(v4_cases())
def test_masking_follows_the_rule_and_keeps_pairing(data) -> None:
    case, mask = data
    projection = _project_or_skip(case)
    if projection is None:
        return
    by_id = {m.id: m for m in case.log.messages}
    # Candidates: W's results shown in the view as themselves or as stubs (so above C and
    # outside folds), in index order.
    shown = [
        by_id[s.message_ids[0]]
        for s in projection.sources
        if s.derived_type in ("raw", "masked")
        and by_id[s.message_ids[0]].kind == KIND_TOOL_RESULT
        and by_id[s.message_ids[0]].window_id == case.window
    ]
    candidates = sorted(shown, key=lambda m: m.index)
    eligible = candidates[: max(len(candidates) - mask["maskKeepRecent"], 0)]
    in_range = eligible[: len(eligible) // mask["maskStep"] * mask["maskStep"]]
    expected = [m.index for m in in_range if result_size(m.content)[0] > mask["maskMinChars"]]
    assert sorted(masked_indices(projection)) == expected
    for message, source in zip(projection.messages, projection.sources, strict=True):
        if source.derived_type != "masked":
            continue
        raw = by_id[source.message_ids[0]]
        assert source.first_index == source.last_index == raw.index
        assert (message.kind, message.tool_call_id) == (KIND_TOOL_RESULT, raw.tool_call_id)
        assert message.content == masked_stub(
            raw.index,
            next(m.tool_name for m in case.log.messages if m.tool_call_id == raw.tool_call_id),
            raw.content,
            is_error=bool(raw.is_error),
        )
    pending: set[str] = set()
    for message in projection.messages:
        if message.kind == KIND_TOOL_CALL:
            pending.add(message.tool_call_id)
        elif message.kind == KIND_TOOL_RESULT:
            assert message.tool_call_id in pending
            pending.discard(message.tool_call_id)
    assert not pending
    ids = [i for s in projection.sources for i in s.message_ids]
    assert len(ids) == len(set(ids))
