"""What the protocol did to one view (contract §22's view span), from its sources: table-driven."""

from __future__ import annotations

import json

import pytest

from contextproto.economics.view_effect import (
    ViewEffect,
    checkpoint_position,
    replaced_ids,
    standin_tokens,
    view_effect,
)
from contextproto.protocol.tokens import json_tokens, text_tokens

FOLD_TEXT = "Fold f_1 of main, #9-#12: looked the prices up."
STUB_TEXT = "[tool result #20 of lookup masked: 4000 characters; read it back]"


def raw(index: int, window: str = "main") -> tuple[dict, dict]:
    return (
        {"role": "user", "kind": "input", "content": f"message {index}"},
        {
            "derivedType": "raw",
            "windowId": window,
            "firstIndex": index,
            "lastIndex": index,
            "messageIds": [f"m{index}"],
        },
    )


def fold(first: int, last: int) -> tuple[dict, dict]:
    return (
        {"role": "assistant", "kind": "context_fold", "content": FOLD_TEXT},
        {
            "derivedType": "context_fold",
            "windowId": "main",
            "foldId": "f_1",
            "firstIndex": first,
            "lastIndex": last,
            "messageIds": [f"m{i}" for i in range(first, last + 1)],
        },
    )


def masked(index: int) -> tuple[dict, dict]:
    return (
        {"role": "tool", "kind": "tool_result", "content": STUB_TEXT, "toolCallId": "c"},
        {
            "derivedType": "masked",
            "windowId": "main",
            "firstIndex": index,
            "lastIndex": index,
            "messageIds": [f"m{index}"],
        },
    )


def derived(kind: str) -> tuple[dict, dict]:
    return (
        {"role": "assistant" if kind != "system" else "system", "kind": kind, "content": kind},
        {"derivedType": kind, "windowId": "main", "messageIds": []},
    )


def effect(parts, *, bound, window_messages=None, raw_tokens=None) -> ViewEffect:
    return view_effect(
        [m for m, _ in parts],
        [s for _, s in parts],
        upper_bound=bound,
        window_id="main",
        window_messages=window_messages,
        raw_tokens=raw_tokens,
    )


HEAD = [derived("system"), derived("context_header")]
# The contract's worked example (§4.1): #1 this run's input; A's #2-#8 under the checkpoint;
# #9-#12 folded; #13-#14 another window's; #15/#16 a call and its result.
WORKED = [*HEAD, raw(1), fold(9, 12), raw(15), raw(16), derived("context_state")]

CASES = [
    # (what, parts, bound, window messages, expected counts: shown, folded, folds, masked,
    #  covered, hidden)
    ("everything shown", [*HEAD, raw(1), raw(2), raw(3)], 3, 3, (3, 0, 0, 0, 0, 0)),
    ("the worked example", WORKED, 16, 14, (3, 4, 1, 0, 7, 9)),
    ("masked results", [*HEAD, raw(1), masked(2), masked(3), raw(4)], 4, 4, (2, 0, 0, 2, 0, 0)),
    (
        "an input carried from another window",
        [*HEAD, raw(1, "b"), raw(5)],
        5,
        3,
        (2, 0, 0, 0, 2, 3),
    ),
    ("no window size given", WORKED, 16, None, (3, 4, 1, 0, None, 9)),
    ("an empty view", HEAD, 0, 0, (0, 0, 0, 0, 0, 0)),
]


@pytest.mark.parametrize(
    ("parts", "bound", "window_messages", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_counts(parts, bound, window_messages, expected):
    found = effect(parts, bound=bound, window_messages=window_messages)
    assert (
        found.shown,
        found.folded,
        found.folds,
        found.masked,
        found.covered,
        found.hidden,
    ) == expected
    assert found.messages == len(parts)
    assert found.view_tokens == sum(json_tokens(m) for m, _ in parts)


SAVED_CASES = [
    # (what, parts, raw tokens by id, expected tokens saved)
    ("nothing replaced", [*HEAD, raw(1)], {}, 0),
    (
        "a fold of four messages",
        WORKED,
        {f"m{i}": 100 for i in range(9, 13)},
        400 - text_tokens(FOLD_TEXT),
    ),
    (
        "a masked result",
        [*HEAD, raw(1), masked(2)],
        {"m2": 1000},
        1000 - text_tokens(STUB_TEXT),
    ),
    ("a raw message behind a fold is missing", WORKED, {"m9": 100}, None),
    ("no raw tokens given", WORKED, None, None),
]


@pytest.mark.parametrize(
    ("parts", "raw_tokens", "saved"),
    [case[1:] for case in SAVED_CASES],
    ids=[case[0] for case in SAVED_CASES],
)
def test_tokens_saved(parts, raw_tokens, saved):
    assert effect(parts, bound=16, raw_tokens=raw_tokens).tokens_saved == saved


def state(position: int) -> tuple[dict, dict]:
    body = json.dumps({"windowId": "main", "checkpointPosition": position})
    return (
        {"role": "assistant", "kind": "context_state", "content": f"Context state:\n{body}"},
        {"derivedType": "context_state", "windowId": "main", "messageIds": []},
    )


@pytest.mark.parametrize(
    ("parts", "position", "covered"),
    [
        ([*HEAD, raw(1), state(0)], 0, 0),  # nothing covered: no count needed
        ([*HEAD, raw(9), state(8)], 8, None),  # covered through #8: the window's size decides
        ([*HEAD, raw(1)], None, None),  # no state message (unified@1, @4)
    ],
    ids=["C = 0", "C = 8", "no state message"],
)
def test_a_state_message_saying_nothing_is_covered_needs_no_count(parts, position, covered):
    assert checkpoint_position([m for m, _ in parts]) == position
    assert effect(parts, bound=9).covered == covered


def test_a_stand_in_is_measured_as_the_planner_measures_text():
    message, _ = fold(9, 12)
    assert standin_tokens(message) == text_tokens(FOLD_TEXT)


def test_the_ids_behind_folds_and_stubs_are_what_the_tokens_need():
    assert replaced_ids([s for _, s in [*WORKED, masked(20)]]) == [
        "m9",
        "m10",
        "m11",
        "m12",
        "m20",
    ]
