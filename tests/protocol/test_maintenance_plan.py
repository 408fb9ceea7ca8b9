"""Prefix compression planning (contract §6): boundary rules, source hash, pages, checkpoints."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextproto.protocol.checkpoints import (
    page_slice,
    render_page_text,
    shorter_retry_prompt,
    source_hash,
    summariser_prompt,
    validate_checkpoint,
)
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.groups import build_groups
from contextproto.protocol.maintenance import MaintenancePlan, choose_boundary, plan_maintenance
from contextproto.protocol.messages import Fold, RawMessage
from contextproto.protocol.tokens import message_tokens
from tests.protocol.logbuilder import LogBuilder

# LogBuilder defaults: a call ("search", {"q": "x"}, empty content) estimates 4 tokens,
# a result "ok" 1 token.
CALL_TOKENS = 4
RESULT_TOKENS = 1


def tokens(n: int) -> str:
    """A text that estimates exactly n tokens."""
    return "x" * (4 * n)


def _choose(
    log: LogBuilder,
    *,
    covered: int = 0,
    folds: tuple[Fold, ...] = (),
    keep: int = 0,
    requested: int | None = None,
    window: str = "main",
):
    return choose_boundary(
        window_messages=log.of_window(window, after=covered),
        covered_through=covered,
        folds=folds,
        keep_tail_tokens=keep,
        requested_through=requested,
    )


def _plan(
    log: LogBuilder,
    *,
    covered: int = 0,
    folds: tuple[Fold, ...] = (),
    keep: int = 0,
    requested: int | None = None,
    page_size: int = 200,
    checkpoint: str = "old",
    window: str = "main",
) -> MaintenancePlan:
    return plan_maintenance(
        window_id=window,
        frozen_revision=41,
        window_messages=log.of_window(window, after=covered),
        covered_through=covered,
        previous_checkpoint=checkpoint,
        folds=folds,
        page_size=page_size,
        keep_tail_tokens=keep,
        requested_through=requested,
    )


def _tokens_above(log: LogBuilder, boundary: int, window: str = "main") -> int:
    return sum(message_tokens(m) for m in log.of_window(window, after=boundary))


# ---------------------------------------------------------------------------- estimate


def _msg(**fields) -> RawMessage:
    base = {
        "id": "m1",
        "index": 1,
        "window_id": "main",
        "role": "assistant",
        "kind": "text",
        "content": "",
    }
    return RawMessage(**{**base, **fields})


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (_msg(content=""), 0),
        (_msg(content="x" * 40), 10),
        (_msg(content="x" * 41), 11),
        (_msg(content=[{"type": "text", "text": "x" * 8}, {"type": "text", "text": "y" * 4}]), 3),
        (
            _msg(
                role="user",
                kind="input",
                content=[
                    {"type": "text", "text": "see"},
                    {"type": "image", "mediaType": "image/png", "data": "A" * 9000},
                ],
            ),
            257,
        ),
        # name "ab" + {"k":"v"} (9 chars) = 11 chars
        (
            _msg(
                kind="tool_call", content="", tool_name="ab", arguments={"k": "v"}, tool_call_id="c"
            ),
            3,
        ),
        (_msg(role="tool", kind="tool_result", content="r" * 12, tool_call_id="c"), 3),
    ],
    ids=[
        "empty",
        "forty_chars",
        "rounds_up",
        "text_parts_summed",
        "image_counts_256",
        "call_counts_name_and_arguments",
        "result_counts_content",
    ],
)
def test_estimate_tokens_is_a_deterministic_character_estimate(message, expected) -> None:
    assert message_tokens(message) == expected
    assert message_tokens(message) == message_tokens(dataclasses.replace(message))


def test_logbuilder_token_constants_hold() -> None:
    log = LogBuilder()
    log.exchange()
    assert [message_tokens(m) for m in log.messages] == [CALL_TOKENS, RESULT_TOKENS]


# ---------------------------------------------------------------------------- boundaries

Case = Callable[[], tuple[LogBuilder, dict]]


def _inside_group() -> tuple[LogBuilder, dict]:
    # #1 text(10) | #2 call, #3 result(10) | #4 text(10); keep 12: #2 would leave 4+10+10
    # above it but is inside the call pair, so B drops to #1.
    log = LogBuilder()
    log.text(tokens(10))
    call = log.call()
    log.result(call, tokens(10))
    log.text(tokens(10))
    return log, {"keep": 12, "expected": 1, "blocked": []}


def _group_with_text_inside() -> tuple[LogBuilder, dict]:
    # Two calls open, a text and an approval written while open, then both results.
    log = LogBuilder()
    log.text(tokens(5))  # 1
    a = log.call()  # 2
    b = log.call()  # 3
    log.text(tokens(5))  # 4
    log.approval(a)  # 5
    log.result(b)  # 6
    log.result(a, tokens(20))  # 7
    log.text(tokens(3))  # 8
    return log, {"keep": 10, "expected": 1, "blocked": []}


def _fold_straddles_best() -> tuple[LogBuilder, dict]:
    # Five texts of 10; keep 15 puts B at #3, which is inside fold #2-#4: B moves to #1.
    log = LogBuilder()
    for _ in range(5):
        log.text(tokens(10))
    return log, {"keep": 15, "folds": (log.fold("main", 2, 4),), "expected": 1, "blocked": []}


def _fold_entirely_below() -> tuple[LogBuilder, dict]:
    log = LogBuilder()
    for _ in range(5):
        log.text(tokens(10))
    return log, {"keep": 15, "folds": (log.fold("main", 1, 2),), "expected": 3, "blocked": []}


def _fold_at_or_below_checkpoint_ignored() -> tuple[LogBuilder, dict]:
    log = LogBuilder()
    for _ in range(6):
        log.text(tokens(10))
    # A compressed fold (#1-#2, at or below C=2) never constrains B.
    return log, {
        "covered": 2,
        "keep": 0,
        "folds": (log.fold("main", 1, 2),),
        "expected": 6,
        "blocked": [],
    }


def _open_call_stops_boundary() -> tuple[LogBuilder, dict]:
    log = LogBuilder()
    log.text(tokens(10))  # 1
    log.text(tokens(10))  # 2
    log.call(call_id="late")  # 3, never answered
    log.text(tokens(10))  # 4, joins the open group
    return log, {
        "keep": 0,
        "expected": 2,
        "blocked": [{"kind": "unanswered_call", "toolCallId": "late", "index": 3}],
    }


def _early_open_call_with_lots_after() -> tuple[LogBuilder, dict]:
    log = LogBuilder()
    log.input(tokens(10))  # 1
    log.text(tokens(10))  # 2
    log.exchange()  # 3, 4
    log.call(call_id="lost")  # 5, never answered
    for _ in range(20):
        log.text(tokens(10))
        log.exchange()
    # Everything after #5 belongs to its group: compress #1-#4, report the lost call.
    return log, {
        "keep": 100,
        "expected": 4,
        "blocked": [{"kind": "unanswered_call", "toolCallId": "lost", "index": 5}],
    }


def _several_open_calls_all_reported() -> tuple[LogBuilder, dict]:
    log = LogBuilder()
    log.text(tokens(10))  # 1
    a = log.call(call_id="a")  # 2
    log.call(call_id="b")  # 3
    log.call(call_id="c")  # 4
    log.result(a)  # 5; b and c stay open
    return log, {
        "keep": 0,
        "expected": 1,
        "blocked": [
            {"kind": "unanswered_call", "toolCallId": "b", "index": 3},
            {"kind": "unanswered_call", "toolCallId": "c", "index": 4},
        ],
    }


def _tail_binds_before_open_call() -> tuple[LogBuilder, dict]:
    # The tail rule, not the open call, stops B: the call is not reported.
    log = LogBuilder()
    for _ in range(5):
        log.text(tokens(10))
    log.call(call_id="inflight")  # 6 (4 tokens)
    return log, {"keep": 25, "expected": 2, "blocked": []}


def _orphan_result_compressed_and_reported() -> tuple[LogBuilder, dict]:
    log = LogBuilder()
    log.text(tokens(10))  # 1
    log.result("ghost", "stray")  # 2: no call
    log.text(tokens(10))  # 3
    log.text(tokens(10))  # 4
    return log, {
        "keep": 10,
        "expected": 3,
        "blocked": [{"kind": "orphan_result", "index": 2, "toolCallId": "ghost"}],
    }


def _orphan_inside_group_reported() -> tuple[LogBuilder, dict]:
    log = LogBuilder()
    a = log.call(call_id="a")  # 1
    log.result("ghost")  # 2: inside a's group, answers nothing
    log.result(a)  # 3
    log.text(tokens(10))  # 4
    return log, {
        "keep": 10,
        "expected": 3,
        "blocked": [{"kind": "orphan_result", "index": 2, "toolCallId": "ghost"}],
    }


def _orphan_in_tail_not_reported() -> tuple[LogBuilder, dict]:
    log = LogBuilder()
    log.text(tokens(10))  # 1
    log.text(tokens(10))  # 2
    log.result("ghost", tokens(10))  # 3, stays in the tail
    return log, {"keep": 10, "expected": 2, "blocked": []}


def _user_inputs_compressible() -> tuple[LogBuilder, dict]:
    log = LogBuilder()
    log.input(tokens(10))  # 1
    log.instruction(tokens(10))  # 2
    log.input(tokens(10))  # 3
    log.text(tokens(10))  # 4
    return log, {"keep": 10, "expected": 3, "blocked": []}


def _other_windows_leave_gaps() -> tuple[LogBuilder, dict]:
    log = LogBuilder()
    log.text(tokens(10))  # 1 main
    log.switch("side").text(tokens(50))  # 2 side
    log.switch("main").text(tokens(10))  # 3 main
    log.switch("side").text(tokens(50))  # 4 side
    log.switch("main").text(tokens(10))  # 5 main
    # Only main's tokens count: above #3 there are 10.
    return log, {"keep": 10, "expected": 3, "blocked": []}


def _above_checkpoint_only() -> tuple[LogBuilder, dict]:
    log = LogBuilder()
    for _ in range(6):
        log.text(tokens(10))
    return log, {"covered": 3, "keep": 20, "expected": 4, "blocked": []}


def _zero_tail_compresses_everything_finished() -> tuple[LogBuilder, dict]:
    log = LogBuilder()
    log.input()
    log.exchange()
    log.text()
    return log, {"keep": 0, "expected": 4, "blocked": []}


BOUNDARY_CASES: dict[str, Case] = {
    "never_inside_a_call_pair": _inside_group,
    "never_inside_a_group_with_messages_written_while_open": _group_with_text_inside,
    "fold_straddling_the_best_boundary_moves_it_below_the_fold": _fold_straddles_best,
    "fold_entirely_below_the_boundary_is_kept_whole": _fold_entirely_below,
    "folds_at_or_below_the_checkpoint_are_ignored": _fold_at_or_below_checkpoint_ignored,
    "never_past_an_unanswered_call_and_reported": _open_call_stops_boundary,
    "early_unanswered_call_compresses_up_to_before_it": _early_open_call_with_lots_after,
    "several_unanswered_calls_are_all_reported": _several_open_calls_all_reported,
    "tail_rule_binding_below_an_open_call_does_not_report_it": _tail_binds_before_open_call,
    "orphan_result_is_compressed_and_reported": _orphan_result_compressed_and_reported,
    "orphan_inside_a_group_is_reported": _orphan_inside_group_reported,
    "orphan_in_the_tail_is_not_reported": _orphan_in_tail_not_reported,
    "user_inputs_are_compressible": _user_inputs_compressible,
    "other_windows_neither_count_nor_bound": _other_windows_leave_gaps,
    "boundary_lies_above_the_checkpoint": _above_checkpoint_only,
    "zero_tail_compresses_every_finished_group": _zero_tail_compresses_everything_finished,
}


@pytest.mark.parametrize("name", BOUNDARY_CASES)
def test_boundary_rules(name: str) -> None:
    log, case = BOUNDARY_CASES[name]()
    covered = case.get("covered", 0)
    boundary, blocked = _choose(
        log, covered=covered, folds=case.get("folds", ()), keep=case["keep"]
    )
    assert boundary == case["expected"]
    assert list(blocked) == case["blocked"]
    assert _tokens_above(log, boundary) >= case["keep"]
    ends = {g.last_index for g in build_groups(log.of_window("main", after=covered)) if not g.open}
    assert boundary in ends


def test_tail_kept_is_the_highest_boundary_satisfying_the_budget() -> None:
    log = LogBuilder()
    for _ in range(10):
        log.text(tokens(10))
    for keep in (0, 1, 10, 11, 35, 90):
        boundary, _ = _choose(log, keep=keep)
        assert _tokens_above(log, boundary) >= keep
        # One group higher would leave less than the budget (or there is none).
        assert boundary == 10 or _tokens_above(log, boundary + 1) < keep


@pytest.mark.parametrize(
    ("build", "keep", "reason", "blocked"),
    [
        (lambda log: None, 0, "no_messages", []),
        (lambda log: (log.text(tokens(10)), log.text(tokens(10))), 21, "within_tail_budget", []),
        (
            lambda log: (log.call(call_id="first"), log.text(tokens(100))),
            0,
            "unanswered_call",
            [{"kind": "unanswered_call", "toolCallId": "first", "index": 1}],
        ),
    ],
    ids=["no_messages", "history_within_tail_budget", "first_group_is_an_unanswered_call"],
)
def test_nothing_to_compress_is_an_error_with_its_reason(build, keep, reason, blocked) -> None:
    log = LogBuilder()
    build(log)
    boundary, got_blocked = _choose(log, keep=keep)
    assert boundary is None
    assert list(got_blocked) == blocked
    with pytest.raises(ProtocolError) as caught:
        _plan(log, keep=keep)
    assert caught.value.code == "maintenance_nothing_to_compress"
    assert caught.value.details["reason"] == reason
    assert caught.value.details["blockedBy"] == blocked
    if reason == "within_tail_budget":
        assert "within the tail budget" in caught.value.message


# ---------------------------------------------------------------------------- explicit request


def _request_log() -> tuple[LogBuilder, tuple[Fold, ...]]:
    """#1 text, #2 input, #3/#4 exchange, #5-#7 folded texts, #8 text, #9 other window,
    #10 call never answered, #11 text (inside the open group)."""
    log = LogBuilder()
    log.text()  # 1
    log.input()  # 2
    log.exchange()  # 3, 4
    log.text()  # 5
    log.text()  # 6
    log.text()  # 7
    log.text()  # 8
    log.switch("side").text()  # 9
    log.switch("main").call(call_id="open")  # 10
    log.text()  # 11
    return log, (log.fold("main", 5, 7),)


@pytest.mark.parametrize(
    ("covered", "requested", "reason", "nearest"),
    [
        (2, 2, "not_above_checkpoint", None),
        (2, 1, "not_above_checkpoint", None),
        (0, 3, "inside_group", 2),
        (0, 6, "cuts_fold", 4),
        (0, 5, "cuts_fold", 4),
        (0, 9, "not_in_window", 8),
        (0, 40, "unanswered_call", 8),
        (0, 10, "unanswered_call", 8),
        (0, 11, "unanswered_call", 8),
    ],
    ids=[
        "at_checkpoint",
        "below_checkpoint",
        "inside_call_pair",
        "inside_fold",
        "at_fold_start",
        "other_window_index",
        "beyond_the_log",
        "at_unanswered_call",
        "after_unanswered_call",
    ],
)
def test_explicit_through_index_is_validated(covered, requested, reason, nearest) -> None:
    log, folds = _request_log()
    with pytest.raises(ProtocolError) as caught:
        _plan(log, covered=covered, folds=folds, requested=requested)
    error = caught.value
    assert error.code == "maintenance_boundary_invalid"
    assert error.details["reason"] == reason
    assert error.details["throughIndex"] == requested
    assert error.details["nearestValidBoundary"] == nearest
    assert str(requested) in error.message


@pytest.mark.parametrize("requested", [1, 2, 4, 7, 8])
def test_explicit_through_index_on_a_valid_boundary_ignores_the_tail_rule(requested) -> None:
    log, folds = _request_log()
    plan = _plan(log, folds=folds, keep=10**9, requested=requested)
    assert plan.through_index == requested
    assert plan.message_ids == tuple(m.id for m in log.of_window("main", through=requested))
    blocked = [e["kind"] for e in plan.blocked_by]
    # Only the highest boundary below the open call is stopped by it.
    assert blocked == (["unanswered_call"] if requested == 8 else [])


# ---------------------------------------------------------------------------- plan


def test_plan_freezes_range_hash_pages_and_tail() -> None:
    log = LogBuilder()
    for _ in range(30):
        log.text(tokens(2))
    log.switch("side").text("elsewhere")  # 31, never in main's plan
    log.switch("main")
    for _ in range(4):
        log.text(tokens(5))  # 32-35
    plan = _plan(log, covered=4, keep=20, page_size=10, checkpoint="prev")
    assert plan.window_id == "main"
    assert plan.frozen_revision == 41
    assert (plan.covered_through, plan.from_index, plan.through_index) == (4, 5, 30)
    in_range = log.of_window("main", after=4, through=30)
    assert plan.message_ids == tuple(m.id for m in in_range)
    assert plan.page_count == 3  # 26 messages, pages of 10
    assert plan.source_hash == source_hash("prev", in_range)
    assert plan.previous_checkpoint == "prev"
    assert plan.tail_tokens_kept == 20 == _tokens_above(log, 30)
    assert plan.blocked_by == ()
    wire = plan.to_wire()
    assert wire["throughIndex"] == 30 and wire["fromIndex"] == 5
    assert wire["sourceHash"] == plan.source_hash and wire["pageCount"] == 3


def test_plan_ignores_folds_of_other_windows() -> None:
    log = LogBuilder()
    for _ in range(5):
        log.text(tokens(10))
    side = dataclasses.replace(log.fold("main", 2, 4), window_id="side")
    assert _plan(log, keep=15, folds=(side,)).through_index == 3


def test_plan_page_count_is_at_least_one_page() -> None:
    log = LogBuilder()
    log.text()
    assert _plan(log, page_size=10).page_count == 1


# ---------------------------------------------------------------------------- source hash


def _source() -> list[RawMessage]:
    log = LogBuilder()
    log.input("Budget is 9000 €")
    call = log.call("lookup", {"q": "quote"})
    log.result(call, [{"type": "text", "text": "found"}])
    return log.messages


def test_source_hash_is_stable_for_the_same_source() -> None:
    one = source_hash("prev", _source())
    assert one == source_hash("prev", _source())
    assert len(one) == 64 and int(one, 16) >= 0


def test_source_hash_changes_with_the_checkpoint() -> None:
    assert source_hash("prev", _source()) != source_hash("prev ", _source())
    assert source_hash("", _source()) != source_hash("prev", _source())


@pytest.mark.parametrize(
    ("position", "change"),
    [
        (0, {"id": "other"}),
        (0, {"index": 99}),
        (0, {"window_id": "side"}),
        (0, {"content": "Budget is 9001 €"}),
        (0, {"run_id": "9" * 32}),
        (0, {"input_run": "9" * 32}),
        (0, {"created_at": "2030-01-01T00:00:00Z"}),
        (1, {"arguments": {"q": "quote2"}}),
        (1, {"tool_name": "lookup2"}),
        (1, {"snapshot_id": "snap2"}),
        (2, {"is_error": True}),
        (2, {"tool_call_id": "call_x"}),
        (2, {"content": [{"type": "text", "text": "found!"}]}),
        (2, {"role": "assistant"}),
        (2, {"kind": "text"}),
    ],
)
def test_source_hash_changes_when_any_message_field_changes(position, change) -> None:
    messages = _source()
    changed = list(messages)
    changed[position] = dataclasses.replace(messages[position], **change)
    assert source_hash("prev", changed) != source_hash("prev", messages)


def test_source_hash_changes_with_message_order_and_count() -> None:
    messages = _source()
    assert source_hash("prev", messages[::-1]) != source_hash("prev", messages)
    assert source_hash("prev", messages[:2]) != source_hash("prev", messages)


# ---------------------------------------------------------------------------- pages


IDS = tuple(f"m{i}" for i in range(25))


@pytest.mark.parametrize(
    ("page", "expected"),
    [(0, IDS[0:10]), (1, IDS[10:20]), (2, IDS[20:25])],
)
def test_page_slice_serves_pages_in_order(page, expected) -> None:
    assert page_slice(IDS, page, 10) == expected


@pytest.mark.parametrize("page", [3, -1, 100, True, "0", 1.0])
def test_page_slice_refuses_a_page_out_of_range(page) -> None:
    with pytest.raises(ProtocolError) as caught:
        page_slice(IDS, page, 10)
    assert caught.value.code == "maintenance_page_out_of_range"
    assert caught.value.details["pageCount"] == 3


def test_page_slice_pages_cover_every_id_once() -> None:
    pages = [page_slice(IDS, n, 7) for n in range(4)]
    assert tuple(i for p in pages for i in p) == IDS
    assert page_slice((), 0, 10) == ()


# ---------------------------------------------------------------------------- checkpoint


@pytest.mark.parametrize(
    ("text", "limit", "code", "details"),
    [
        ("", 100, "checkpoint_empty", None),
        ("   \n\t ", 100, "checkpoint_empty", None),
        (None, 100, "checkpoint_invalid", None),
        (42, 100, "checkpoint_invalid", None),
        (["a"], 100, "checkpoint_invalid", None),
        ("x" * 101, 100, "checkpoint_too_long", {"length": 101, "limit": 100}),
        ("é" * 11, 10, "checkpoint_too_long", {"length": 11, "limit": 10}),
    ],
    ids=["empty", "whitespace_only", "none", "number", "list", "too_long", "too_long_unicode"],
)
def test_validate_checkpoint_refusals(text, limit, code, details) -> None:
    with pytest.raises(ProtocolError) as caught:
        validate_checkpoint(text, limit)
    assert caught.value.code == code
    if details is not None:
        assert caught.value.details == details


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [("  summary \n", 7, "summary"), ("x" * 100, 100, "x" * 100), ("é" * 10, 10, "é" * 10)],
)
def test_validate_checkpoint_accepts_and_strips(text, limit, expected) -> None:
    assert validate_checkpoint(text, limit) == expected


# ---------------------------------------------------------------------------- prompts


def test_render_page_text_shows_raw_messages_with_indices() -> None:
    log = LogBuilder()
    log.input("Find the quote\nfor ACME")  # 1
    call = log.call("lookup", {"q": "ACME"})  # 2
    log.result(call, "quote: 1200", is_error=True)  # 3
    log.text(
        [
            {"type": "text", "text": "see"},
            {"type": "image", "mediaType": "image/png", "data": "AAAA"},
        ]
    )  # 4
    text = render_page_text(log.messages)
    lines = text.split("\n")
    assert lines[0] == "#1 user/input: Find the quote"
    assert lines[1] == "  for ACME"
    assert lines[2] == '#2 assistant/tool_call lookup [call_1] {"q":"ACME"}'
    assert lines[3] == "#3 tool/tool_result lookup [call_1] error: quote: 1200"
    assert lines[4] == "#4 assistant/text: see"
    assert lines[5] == "  [image image/png]"
    assert "AAAA" not in text


def test_summariser_prompt_carries_checkpoint_pages_limit_and_goal() -> None:
    log = LogBuilder()
    log.input("budget is now 9000")
    page = render_page_text(log.messages)
    messages = summariser_prompt(
        previous_checkpoint="PREVIOUS-CP",
        pages_text=[page, "#2 x"],
        max_characters=3000,
        window_goal="prepare the quote",
    )
    assert [m["role"] for m in messages] == ["system", "user"]
    system, user = messages[0]["content"], messages[1]["content"]
    assert "ONE" in system and "3000" in system
    assert "indices" in system and "constraints" in system and "open questions" in system
    assert "Never write instructions" in system and "plain text" in system
    assert "PREVIOUS-CP" in user and page in user and "#2 x" in user
    assert "page 2 of 2" in user and "3000" in user and "prepare the quote" in user


def test_summariser_prompt_marks_a_first_checkpoint() -> None:
    messages = summariser_prompt(
        previous_checkpoint="  ",
        pages_text=["#1 user/input: hi"],
        max_characters=1000,
        window_goal="",
    )
    assert "first checkpoint" in messages[1]["content"]


def test_shorter_retry_prompt_appends_answer_and_request_without_mutating() -> None:
    previous = summariser_prompt(
        previous_checkpoint="p", pages_text=["#1 x"], max_characters=1000, window_goal="g"
    )
    before = [dict(m) for m in previous]
    retry = shorter_retry_prompt(previous, "y" * 1500, 1000)
    assert previous == before
    assert retry[:2] == previous
    assert retry[2] == {"role": "assistant", "content": "y" * 1500}
    assert retry[3]["role"] == "user"
    assert "1500" in retry[3]["content"] and "1000" in retry[3]["content"]


# ---------------------------------------------------------------------------- property


@st.composite
def window_logs(draw):
    log = LogBuilder(window="main")
    texts = st.integers(0, 60).map(lambda n: "t" * n)
    for _ in range(draw(st.integers(0, 25))):
        op = draw(
            st.sampled_from(
                (
                    "text",
                    "input",
                    "instruction",
                    "exchange",
                    "exchange",
                    "multi",
                    "other",
                    "orphan",
                    "open",
                )
            )
        )
        if op == "text":
            log.text(draw(texts))
        elif op == "input":
            log.input(draw(texts))
        elif op == "instruction":
            log.instruction(draw(texts))
        elif op == "exchange":
            call = log.call()
            log.result(call, draw(texts))
        elif op == "multi":
            calls = [log.call() for _ in range(draw(st.integers(1, 3)))]
            if draw(st.booleans()):
                log.text(draw(texts))
            for call in draw(st.permutations(calls)):
                log.result(call, draw(texts))
        elif op == "other":
            log.switch("side").text(draw(texts))
            log.switch("main")
        elif op == "orphan" and draw(st.integers(0, 3)) == 0:
            log.result(f"ghost{len(log.messages)}", draw(texts))
        elif op == "open" and draw(st.integers(0, 3)) == 0:
            log.call()  # never answered
    groups = build_groups(log.of_window("main"))
    closed_ends = [g.last_index for g in groups if not g.open]
    covered = draw(st.sampled_from([0, *closed_ends])) if draw(st.booleans()) else 0
    above = [g for g in groups if g.first_index > covered]
    folds: list[Fold] = []
    i = 0
    while i < len(above):
        if above[i].foldable and draw(st.integers(0, 2)) == 0:
            j = i
            while j + 1 < len(above) and above[j + 1].foldable and draw(st.booleans()):
                j += 1
            folds.append(
                log.fold("main", above[i].first_index, above[j].last_index, call_id=f"f{i}")
            )
            i = j + 1
        else:
            i += 1
    keep = draw(st.integers(0, 80))
    requested = draw(st.integers(-1, len(log.messages) + 2))
    return log, covered, tuple(folds), keep, requested


def _valid_boundaries(log: LogBuilder, covered: int, folds: tuple[Fold, ...]) -> list[int]:
    """Brute force: every index a checkpoint may end on, ignoring the tail rule."""
    groups = build_groups(log.of_window("main", after=covered))
    first_open = next((g.first_index for g in groups if g.open), None)
    valid = []
    for group in groups:
        end = group.last_index
        if group.open or (first_open is not None and end >= first_open):
            continue
        if any(f.first_index <= end < f.last_index for f in folds if f.first_index > covered):
            continue
        valid.append(end)
    return valid


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(window_logs())
def test_property_boundary_respects_every_rule(case) -> None:
    log, covered, folds, keep, requested = case
    messages = log.of_window("main", after=covered)
    groups = build_groups(messages)
    open_group = next((g for g in groups if g.open), None)
    valid = _valid_boundaries(log, covered, folds)
    qualifying = [b for b in valid if _tokens_above(log, b) >= keep]

    boundary, blocked = _choose(log, covered=covered, folds=folds, keep=keep)
    assert boundary == (qualifying[-1] if qualifying else None)  # the highest one
    reported_calls = {e["index"] for e in blocked if e["kind"] == "unanswered_call"}
    if boundary is not None:
        assert boundary > covered
        assert boundary in {g.last_index for g in groups if not g.open}
        assert not any(f.first_index <= boundary < f.last_index for f in folds)
        assert _tokens_above(log, boundary) >= keep
        if open_group is not None:
            assert boundary < open_group.first_index
            if boundary == valid[-1]:
                assert open_group.first_index in reported_calls
        orphans = {e["index"] for e in blocked if e["kind"] == "orphan_result"}
        assert all(covered < i <= boundary for i in orphans)
        plan = _plan(log, covered=covered, folds=folds, keep=keep, page_size=10)
        assert plan.through_index == boundary
        assert plan.tail_tokens_kept == _tokens_above(log, boundary)
        assert plan.message_ids == tuple(m.id for m in messages if m.index <= boundary)
    elif open_group is not None and not valid:
        assert open_group.first_index in reported_calls

    # An explicit request is accepted exactly on a valid boundary, tail rule aside.
    if requested in valid:
        got, _ = _choose(log, covered=covered, folds=folds, keep=10**9, requested=requested)
        assert got == requested
    else:
        with pytest.raises(ProtocolError) as caught:
            _choose(log, covered=covered, folds=folds, keep=keep, requested=requested)
        assert caught.value.code == "maintenance_boundary_invalid"
        below = [b for b in valid if b <= requested]
        assert caught.value.details["nearestValidBoundary"] == (below[-1] if below else None)


@pytest.mark.parametrize("requested", ["4", True, 4.0])
def test_explicit_through_index_must_be_an_integer(requested) -> None:
    log, folds = _request_log()
    with pytest.raises(ProtocolError) as caught:
        _plan(log, folds=folds, requested=requested)
    assert caught.value.code == "maintenance_boundary_invalid"
    assert caught.value.details["nearestValidBoundary"] is None
