"""Fold rules of `context_fold_create` (contract §5), one test per refusal code."""

from __future__ import annotations

import hashlib

import pytest

from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.folds import fold_id_for, make_fold, validate_fold_range
from contextproto.protocol.messages import Fold
from tests.protocol.logbuilder import LogBuilder


def _log() -> LogBuilder:
    """Window a: #1 input, #2 text, #3/#4 exchange, #5-#8 two calls + results, #9 text,
    #10 in window b, #11 instruction, #12/#13 exchange, #14 orphan result, #15 unanswered call.
    """
    log = LogBuilder(window="a")
    log.input()  # 1
    log.text()  # 2
    log.exchange()  # 3, 4
    x = log.call()  # 5
    y = log.call()  # 6
    log.result(x)  # 7
    log.result(y)  # 8
    log.text()  # 9
    log.switch("b").text()  # 10
    log.switch("a").instruction()  # 11
    log.exchange()  # 12, 13
    log.result("ghost")  # 14
    log.call()  # 15
    return log


def _validate(
    log: LogBuilder,
    first: int,
    last: int,
    *,
    covered: int = 0,
    bound: int | None = None,
    folds: tuple[Fold, ...] = (),
    fold_count: int = 0,
    max_folds: int = 1024,
    window: str = "a",
):
    bound = len(log.messages) if bound is None else bound
    return validate_fold_range(
        window_id=window,
        window_messages=log.of_window(window, after=covered, through=bound),
        covered_through=covered,
        upper_bound=bound,
        from_index=first,
        through_index=last,
        endpoint_windows=log.endpoint_windows(first, last),
        existing_folds=folds,
        fold_count=fold_count,
        max_folds=max_folds,
    )


def _code(log: LogBuilder, first: int, last: int, **kw) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        _validate(log, first, last, **kw)
    return caught.value


def test_whole_foldable_groups_are_folded_in_index_order() -> None:
    log = _log()
    messages = _validate(log, 2, 9)
    assert [m.index for m in messages] == [2, 3, 4, 5, 6, 7, 8, 9]
    assert all(m.window_id == "a" for m in messages)


def test_a_fold_skips_other_windows_messages_inside_its_range() -> None:
    log = LogBuilder(window="a")
    call = log.call()  # 1
    log.switch("b").text()  # 2 (b)
    log.result(call)  # 3 (a)
    log.switch("a").text()  # 4
    assert [m.index for m in _validate(log, 1, 4)] == [1, 3, 4]


def test_reversed_range_is_refused() -> None:
    err = _code(_log(), 9, 2)
    assert err.code == "context_fold_range_invalid"
    assert err.details == {"fromIndex": 9, "throughIndex": 2}


def test_range_at_or_below_the_checkpoint_is_refused() -> None:
    err = _code(_log(), 3, 9, covered=4)
    assert err.code == "context_fold_below_checkpoint"
    assert "above index 4" in err.message


def test_range_above_the_frozen_bound_is_refused() -> None:
    err = _code(_log(), 2, 9, bound=8)
    assert err.code == "context_fold_above_bound"
    assert err.details["upperBound"] == 8


def test_unknown_endpoint_is_refused() -> None:
    err = _code(_log(), 2, 99, bound=120)
    assert err.code == "context_fold_index_not_found"
    assert err.details == {"argument": "throughIndex", "index": 99}


def test_endpoint_in_another_window_is_refused() -> None:
    err = _code(_log(), 2, 10)
    assert err.code == "context_fold_other_window"
    assert err.details["messageWindowId"] == "b"
    assert err.details["index"] == 10


def test_range_cutting_a_group_says_where_the_group_ends() -> None:
    err = _code(_log(), 2, 6)
    assert err.code == "context_fold_partial_group"
    assert "fold through index 8, where the group ends" in err.message
    assert err.details["endGroup"] == [5, 8]


def test_range_starting_inside_a_group_says_where_it_starts() -> None:
    err = _code(_log(), 4, 9)
    assert err.code == "context_fold_partial_group"
    assert "fold from index 3, where the group starts" in err.message
    assert err.details["startGroup"] == [3, 4]


def test_fold_covering_an_input_is_refused() -> None:
    err = _code(_log(), 1, 4)
    assert err.code == "context_fold_contains_user_input"
    assert err.details["indices"] == [1]


def test_fold_covering_a_runtime_instruction_is_refused() -> None:
    err = _code(_log(), 9, 13)
    assert err.code == "context_fold_contains_user_input"
    assert err.details["groups"] == [[11, 11]]


def test_fold_covering_an_unanswered_call_is_refused() -> None:
    err = _code(_log(), 15, 15)
    assert err.code == "context_fold_unanswered_call"
    assert err.details["indices"] == [15]


def test_fold_covering_an_orphan_result_is_refused() -> None:
    err = _code(_log(), 12, 14)
    assert err.code == "context_fold_orphan_result"
    assert err.details["groups"] == [[14, 14]]


def test_user_input_is_reported_before_an_unanswered_call() -> None:
    log = _log()
    log.input()  # 16, inside the open group of #15
    assert _code(log, 15, 16).code == "context_fold_contains_user_input"


def _fold(first: int, last: int, fold_id: str = "f_existing") -> Fold:
    return Fold(
        id=fold_id,
        window_id="a",
        first_index=first,
        last_index=last,
        message_ids=tuple(f"m{i}" for i in range(first, last + 1)),
        summary="s",
        created_at_index=last + 1,
    )


def test_range_containing_an_existing_fold_is_refused_as_nested() -> None:
    err = _code(_log(), 2, 9, folds=(_fold(3, 4),))
    assert err.code == "context_fold_nested"
    assert err.details["foldId"] == "f_existing"


def test_range_inside_an_existing_fold_is_refused_as_nested() -> None:
    err = _code(_log(), 3, 4, folds=(_fold(2, 8),))
    assert err.code == "context_fold_nested"
    assert "lies inside" in err.message


def test_the_same_range_twice_is_refused_as_nested() -> None:
    assert _code(_log(), 3, 4, folds=(_fold(3, 4),)).code == "context_fold_nested"


def test_partial_intersection_is_refused_as_overlap() -> None:
    err = _code(_log(), 5, 9, folds=(_fold(2, 8),))
    assert err.code == "context_fold_overlap"
    assert err.details["foldRange"] == [2, 8]
    assert "ends before #2 or starts after #8" in err.message


def test_folds_of_other_windows_do_not_conflict() -> None:
    other = Fold(
        id="f_b",
        window_id="b",
        first_index=2,
        last_index=9,
        message_ids=(),
        summary="s",
        created_at_index=10,
    )
    assert len(_validate(_log(), 2, 9, folds=(other,))) == 8


def test_fold_limit_counts_every_fold_of_the_session() -> None:
    err = _code(_log(), 2, 9, fold_count=3, max_folds=3)
    assert err.code == "context_fold_limit_reached"
    assert err.details == {"foldCount": 3, "maxFolds": 3}
    assert len(_validate(_log(), 2, 9, fold_count=2, max_folds=3)) == 8


def test_checks_run_in_the_specified_order() -> None:
    log = _log()
    # below the checkpoint AND reversed: the reversed range is reported first
    assert _code(log, 5, 1, covered=6).code == "context_fold_range_invalid"
    # below the checkpoint AND above the bound
    assert _code(log, 1, 40, covered=2, bound=14).code == "context_fold_below_checkpoint"
    # partial group AND over the limit
    assert _code(log, 2, 6, fold_count=5, max_folds=5).code == "context_fold_partial_group"
    # overlap AND over the limit
    assert _code(log, 5, 9, folds=(_fold(2, 8),), fold_count=5, max_folds=5).code == (
        "context_fold_overlap"
    )


def test_fold_id_is_derived_from_the_call_id() -> None:
    expected = "f_" + hashlib.sha256(b"call_42").hexdigest()[:12]
    assert fold_id_for("call_42") == expected
    assert fold_id_for("call_42") == fold_id_for("call_42")
    assert fold_id_for("call_43") != expected


def test_make_fold_records_the_validated_messages() -> None:
    log = _log()
    messages = _validate(log, 2, 9)
    fold = make_fold(
        tool_call_id="call_9",
        window_id="a",
        messages=messages,
        summary="searched twice",
        created_at_index=16,
    )
    assert fold.id == fold_id_for("call_9")
    assert (fold.first_index, fold.last_index) == (2, 9)
    assert fold.message_ids == tuple(f"m{i}" for i in range(2, 10))
    assert Fold.from_kv(fold.id, fold.to_kv()) == fold
