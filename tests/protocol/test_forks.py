"""Where a fork may cut the log (contract §10): never inside a group with an unanswered call."""

from __future__ import annotations

import pytest

from contextproto.protocol.forks import fork_bound
from tests.protocol.logbuilder import LogBuilder


def _finished_work(log: LogBuilder) -> None:
    log.input()  # 1
    log.exchange()  # 2, 3
    log.text()  # 4


def _open_call_at_the_end(log: LogBuilder) -> None:
    _finished_work(log)
    log.call()  # 5, unanswered


def _answered_after_the_bound(log: LogBuilder) -> None:
    _finished_work(log)
    call = log.call()  # 5
    log.approval(call)  # 6: written while the call is open, part of its group
    log.result(call)  # 7


def _two_calls_one_answered(log: LogBuilder) -> None:
    _finished_work(log)
    first = log.call()  # 5
    second = log.call()  # 6: joins the open group
    log.result(first)  # 7
    log.result(second)  # 8


def _other_window_open_earlier(log: LogBuilder) -> None:
    log.input()  # 1
    log.switch("alpha")
    call = log.call()  # 2, alpha
    log.switch("main")
    log.text()  # 3, main
    log.exchange()  # 4, 5, main
    log.result(call)  # 6, alpha (a result keeps its call's window)


def _nested_back_off(log: LogBuilder) -> None:
    # Moving back before the second group cuts the first one, answered only later.
    log.input()  # 1
    log.switch("alpha")
    early = log.call()  # 2, alpha
    log.switch("main")
    late = log.call()  # 3, main
    log.result(early)  # 4, alpha
    log.result(late)  # 5, main


CASES = [
    # (builder, throughIndex asked, bound used)
    (_finished_work, 4, 4),
    (_finished_work, 3, 3),
    (_finished_work, 2, 1),  # the call at 2 has its result at 3
    (_finished_work, 0, 0),
    (_open_call_at_the_end, 5, 4),
    (_answered_after_the_bound, 6, 4),
    (_answered_after_the_bound, 5, 4),
    (_answered_after_the_bound, 7, 7),
    (_two_calls_one_answered, 7, 4),  # the second call is still open at 7
    (_two_calls_one_answered, 8, 8),
    (_other_window_open_earlier, 5, 1),  # alpha's call at 2 is unanswered at 5
    (_other_window_open_earlier, 6, 6),
    (_nested_back_off, 4, 1),  # main's call (3) is open at 4; before it, alpha's (2) is too
]


@pytest.mark.parametrize(("build", "asked", "expected"), CASES)
def test_the_bound_moves_back_before_a_group_with_an_unanswered_call(build, asked, expected):
    log = LogBuilder()
    build(log)
    outline = [m for m in log.messages if m.index <= asked]
    assert fork_bound(outline, asked) == expected
