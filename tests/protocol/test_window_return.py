"""unified@4: after a return by `context_window_complete`, the state message names the window
that was completed and its outcome, as the entry's handoff input (contract §9).

A model re-opened a finished window six times because the parent's view had no trace of
what the sub-task produced. unified@1-3 do not change.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextproto.protocol import catalog
from contextproto.protocol.catalog import get_version
from contextproto.protocol.projection import project
from contextproto.protocol.state import KEY_CURRENT_WINDOW_ENTRY
from tests.protocol.fakereader import FakeReader
from tests.protocol.logbuilder import LogBuilder, make_input
from tests.protocol.test_tools import ok, run

OUTCOME = "Quote sent: 5000 x A-100 at 57,040 EUR."


def _after_return(version: int) -> FakeReader:
    """main -> quote (open), then complete quote back to main, under unified@`version`."""
    protocol = get_version("unified", version)
    reader = FakeReader({}, (), revision=3)
    opened = run(
        reader,
        catalog.WINDOW_OPEN,
        {
            "windowId": "quote",
            "goal": "prepare the ACME quote",
            "input": "5000 units of A-100 for ACME",
            "expectedWindowId": "main",
        },
        version=protocol,
    )
    reader.apply(opened)
    reader.kv["window/main"] = {**reader.kv["window/main"], "input": "start of the session"}
    completed = run(
        reader,
        catalog.WINDOW_COMPLETE,
        {"outcome": OUTCOME, "expectedWindowId": "quote"},
        version=protocol,
    )
    assert ok(completed)["windowId"] == "main"
    reader.apply(completed)
    return reader


def state_of(reader: FakeReader, version: int) -> dict[str, Any]:
    log = LogBuilder()
    log.input("quote ACME")
    view = project(
        make_input(log, version=version, window="main", kv=reader.kv, revision=reader.revision)
    )
    (message,) = [m for m in view.messages if m.kind == "context_state"]
    return json.loads(message.content.split("\n", 1)[1])


def test_unified4_complete_hands_the_outcome_to_the_parent_as_its_entry_input() -> None:
    entry = _after_return(4).kv[KEY_CURRENT_WINDOW_ENTRY]
    assert entry["windowId"] == "main" and entry["fromWindowId"] == "quote"
    assert entry["input"] == {
        "completedWindowId": "quote",
        "goal": "prepare the ACME quote",
        "outcome": OUTCOME,
    }


def test_unified4_state_after_a_return_names_the_completed_window_and_its_outcome() -> None:
    state = state_of(_after_return(4), 4)
    assert state["windowId"] == "main" and state["enteredFrom"] == "quote"
    assert state["handoffInput"] == {
        "completedWindowId": "quote",
        "goal": "prepare the ACME quote",
        "outcome": OUTCOME,
    }


@pytest.mark.parametrize("version", [2, 3])
def test_earlier_versions_keep_the_parents_own_input(version: int) -> None:
    reader = _after_return(version)
    assert reader.kv[KEY_CURRENT_WINDOW_ENTRY]["input"] == "start of the session"
    state = state_of(reader, version)
    assert state["handoffInput"] == "start of the session"
    assert OUTCOME not in json.dumps(state)


def test_unified4_open_still_hands_over_its_input() -> None:
    protocol = get_version("unified", 4)
    reader = FakeReader({}, (), revision=3)
    reader.apply(
        run(
            reader,
            catalog.WINDOW_OPEN,
            {"windowId": "quote", "goal": "g", "input": "do it", "expectedWindowId": "main"},
            version=protocol,
        )
    )
    assert reader.kv[KEY_CURRENT_WINDOW_ENTRY]["input"] == "do it"
