"""Interaction groups of one window's history (contract §2.7)."""

from __future__ import annotations

import pytest

from contextproto.protocol.groups import build_groups
from tests.protocol.logbuilder import LogBuilder


def _summary(log: LogBuilder, window: str = "main") -> list[tuple]:
    return [
        (g.indices, g.kind, g.foldable, g.reason, g.open)
        for g in build_groups(log.of_window(window))
    ]


def _text_alone(log: LogBuilder) -> None:
    log.text()


def _input_alone(log: LogBuilder) -> None:
    log.input()


def _instruction_alone(log: LogBuilder) -> None:
    log.instruction()


def _call_and_result(log: LogBuilder) -> None:
    log.exchange()


def _two_calls_then_results(log: LogBuilder) -> None:
    a = log.call()
    b = log.call()
    log.result(a)
    log.result(b)


def _overlapping_calls(log: LogBuilder) -> None:
    # a, b open; a answered; c opened while b is still pending; b, c answered.
    a = log.call()
    b = log.call()
    log.result(a)
    c = log.call()
    log.result(b)
    log.result(c)


def _text_inside_open_group(log: LogBuilder) -> None:
    a = log.call()
    log.text("while waiting")
    log.result(a)


def _approval_inside_group(log: LogBuilder) -> None:
    a = log.call()
    log.approval(a)
    log.result(a)


def _unanswered_call(log: LogBuilder) -> None:
    log.call()


def _unanswered_with_input(log: LogBuilder) -> None:
    log.call()
    log.input("are you done?")


def _orphan_result(log: LogBuilder) -> None:
    log.result("ghost")


def _duplicate_result_inside_group(log: LogBuilder) -> None:
    a = log.call()
    b = log.call()
    log.result(a)
    log.result(a, "again")
    log.result(b)


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (_text_alone, [((1,), "assistant_text", True, None, False)]),
        (_input_alone, [((1,), "user_message", False, "contains_user_input", False)]),
        (_instruction_alone, [((1,), "user_message", False, "contains_user_input", False)]),
        (_call_and_result, [((1, 2), "tool_interaction", True, None, False)]),
        (_two_calls_then_results, [((1, 2, 3, 4), "tool_interaction", True, None, False)]),
        (_overlapping_calls, [((1, 2, 3, 4, 5, 6), "tool_interaction", True, None, False)]),
        (_text_inside_open_group, [((1, 2, 3), "tool_interaction", True, None, False)]),
        (
            _approval_inside_group,
            [((1, 2, 3), "tool_interaction", False, "contains_user_input", False)],
        ),
        (_unanswered_call, [((1,), "tool_interaction", False, "unanswered_call", True)]),
        (
            _unanswered_with_input,
            [((1, 2), "tool_interaction", False, "contains_user_input", True)],
        ),
        (_orphan_result, [((1,), "orphan_result", False, "orphan_result", False)]),
        (
            _duplicate_result_inside_group,
            [((1, 2, 3, 4, 5), "tool_interaction", False, "orphan_result", False)],
        ),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_group_rules(build, expected) -> None:
    log = LogBuilder()
    build(log)
    assert _summary(log) == expected


def test_a_mixed_history_splits_into_its_groups() -> None:
    log = LogBuilder()
    log.input()  # 1
    log.text()  # 2
    log.exchange()  # 3, 4
    log.text()  # 5
    log.result("ghost")  # 6
    log.exchange()  # 7, 8
    log.call()  # 9
    groups = build_groups(log.of_window("main"))
    assert [(g.first_index, g.last_index, g.kind) for g in groups] == [
        (1, 1, "user_message"),
        (2, 2, "assistant_text"),
        (3, 4, "tool_interaction"),
        (5, 5, "assistant_text"),
        (6, 6, "orphan_result"),
        (7, 8, "tool_interaction"),
        (9, 9, "tool_interaction"),
    ]
    assert [g.foldable for g in groups] == [False, True, True, True, False, True, False]
    assert groups[-1].open and not any(g.open for g in groups[:-1])


def test_groups_ignore_gaps_left_by_other_windows() -> None:
    log = LogBuilder(window="a")
    call = log.call()  # 1 in a
    log.switch("b").text()  # 2 in b: another window's message inside a's group range
    log.result(call)  # 3 carries a's window
    log.switch("a").text()  # 4
    groups = build_groups(log.of_window("a"))
    assert [(g.indices, g.kind, g.foldable) for g in groups] == [
        ((1, 3), "tool_interaction", True),
        ((4,), "assistant_text", True),
    ]
    assert groups[0].messages == (log.at(1), log.at(3))


def test_a_result_written_after_its_group_closed_is_an_orphan() -> None:
    log = LogBuilder()
    call = log.call()
    log.result(call)
    log.result(call, "duplicate")
    groups = build_groups(log.of_window("main"))
    assert [(g.indices, g.kind) for g in groups] == [
        ((1, 2), "tool_interaction"),
        ((3,), "orphan_result"),
    ]


def test_empty_history_has_no_groups() -> None:
    assert build_groups([]) == []
