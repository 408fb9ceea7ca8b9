"""Protocol tool dispatch over the in-memory reader (contract §5, §5.2)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextproto.protocol import catalog
from contextproto.protocol.catalog import get_version
from contextproto.protocol.folds import fold_id_for
from contextproto.protocol.foldtext import FOLD_READ_SLICE_UNITS, render_fold_text, utf16_len
from contextproto.protocol.messages import Fold, Frame
from contextproto.protocol.state import (
    KEY_ACTIVE_WINDOW,
    KEY_CURRENT_WINDOW_ENTRY,
    KEY_TASK_MEMORY,
    checkpoint_key,
    covered_key,
    new_window_record,
    window_key,
)
from contextproto.protocol.tools import (
    ToolCall,
    ToolContext,
    ToolOutcome,
    dispatch,
    handled_tools,
)
from tests.protocol.fakereader import FakeReader
from tests.protocol.logbuilder import LogBuilder

V1 = get_version("unified", 1)
V2 = get_version("unified", 2)
V3 = get_version("unified", 3)
PREFIX = get_version("prefix", 2)
REV = 7


def run(
    reader: FakeReader,
    name: str,
    args: dict[str, Any] | None = None,
    *,
    version: catalog.ProtocolVersion = V2,
    frozen: int | None = None,
    window: str | None = None,
    bound: int | None = None,
    index: int | None = None,
    call_id: str = "tc1",
    maintainer: bool = False,
    options: dict[str, Any] | None = None,
) -> ToolOutcome:
    """Dispatch `name` as if the model had just called it from a view of the current state."""
    arguments = {"purpose": "test", **(args or {})}
    bound = len(reader.messages) if bound is None else bound
    call = ToolCall(
        tool_call_id=call_id,
        tool_name=name,
        arguments=arguments,
        call_index=bound + 1 if index is None else index,
        call_window_id=window or reader.kv[KEY_ACTIVE_WINDOW],
        frame=Frame(reader.revision if frozen is None else frozen, bound),
    )
    ctx = ToolContext(
        version=version,
        options={**version.defaults, **(options or {})},
        current_revision=reader.revision,
        maintainer_bound=maintainer,
    )
    return dispatch(call, ctx, reader)


def ok(outcome: ToolOutcome) -> dict[str, Any]:
    assert outcome.result["success"] is True, outcome.result
    return outcome.result


def err(outcome: ToolOutcome) -> dict[str, Any]:
    assert outcome.result["success"] is False, outcome.result
    # Nothing to commit (no fold/<id> or other KV write) and nothing to do after.
    assert outcome.kv_writes == {} and not outcome.mutated and outcome.effects == ()
    error = outcome.result["error"]
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["correctable"], bool)
    return error


def _reader(log: LogBuilder | None = None, kv: dict[str, Any] | None = None) -> FakeReader:
    return FakeReader(kv or {}, log.messages if log else (), revision=REV)


def _with_window(reader: FakeReader, window_id: str, **fields: Any) -> FakeReader:
    record = new_window_record(goal=f"goal of {window_id}", created_at_index=1)
    record.update(fields)
    reader.kv[window_key(window_id)] = record
    return reader


# ---------------------------------------------------------------- dispatcher checks


def test_every_catalog_tool_has_a_handler() -> None:
    assert handled_tools() == catalog.PROTOCOL_TOOL_NAMES
    assert set(V2.tools) <= handled_tools()


@pytest.mark.parametrize(
    ("case", "args", "frozen", "expected_code"),
    [
        ("bad argument beats everything", {"outcome": ""}, REV - 1, "invalid_arguments"),
        (
            "missing expectedWindowId beats stale",
            {"outcome": "x"},
            REV - 1,
            "context_window_expectation_required",
        ),
        (
            "stale beats mismatch",
            {"outcome": "x", "expectedWindowId": "elsewhere"},
            REV - 1,
            "context_state_stale",
        ),
        (
            "mismatch beats the tool rule",
            {"outcome": "x", "expectedWindowId": "elsewhere"},
            REV,
            "context_window_mismatch",
        ),
        (
            "the tool rule answers last",
            {"outcome": "x", "expectedWindowId": "main"},
            REV,
            "context_window_main_not_completable",
        ),
    ],
)
def test_checks_run_in_the_specified_order(
    case: str, args: dict[str, Any], frozen: int, expected_code: str
) -> None:
    # Completing main breaks the tool's own rule, so every earlier check gets its chance.
    outcome = run(_reader(), catalog.WINDOW_COMPLETE, args, frozen=frozen)
    assert err(outcome)["code"] == expected_code, case


def test_invalid_arguments_name_the_argument() -> None:
    error = err(run(_reader(), catalog.TASK_MEMORY_SET, {"memory": 3}))
    assert error["code"] == "invalid_arguments"
    assert error["argument"] == "memory"
    assert error["tool"] == catalog.TASK_MEMORY_SET
    assert error["correctable"] is True


def test_arguments_that_are_not_an_object_are_an_error_result() -> None:
    reader = _reader()
    call = ToolCall("tc1", catalog.TASK_MEMORY_GET, ["junk"], 1, "main", Frame(REV, 0))
    ctx = ToolContext(V2, V2.defaults, REV, False)
    assert err(dispatch(call, ctx, reader))["code"] == "invalid_arguments"


def test_prefix_protocol_has_no_tools() -> None:
    for name in (catalog.TASK_MEMORY_GET, catalog.HISTORY_LIST, "context_anything"):
        error = err(run(_reader(), name, version=PREFIX))
        assert error["code"] == "tool_unknown"


def test_stale_mutating_call_reports_both_revisions_and_changes_nothing() -> None:
    error = err(run(_reader(), catalog.TASK_MEMORY_SET, {"memory": "m"}, frozen=REV - 2))
    assert error["code"] == "context_state_stale"
    assert error["currentRevision"] == REV
    assert error["frozenRevision"] == REV - 2
    assert error["correctable"] is True


@pytest.mark.parametrize(
    ("name", "args"),
    [
        (catalog.HISTORY_LIST, {}),
        (catalog.FOLD_LIST, {}),
        (catalog.WINDOW_LIST, {}),
        (catalog.WINDOW_READ, {"windowId": "main"}),
        (catalog.TASK_MEMORY_GET, {}),
        (catalog.WINDOW_SEARCH, {"query": "main"}),
    ],
)
def test_read_only_tools_are_not_stale_checked(name: str, args: dict[str, Any]) -> None:
    ok(run(_reader(), name, args, frozen=REV - 3))


def test_v2_window_mismatch_reports_the_actual_window_and_writes_nothing() -> None:
    reader = _with_window(_reader(), "quote")
    reader.kv[KEY_ACTIVE_WINDOW] = "quote"
    outcome = run(reader, catalog.WINDOW_MEMORY_SET, {"memory": "m", "expectedWindowId": "main"})
    error = err(outcome)
    assert error["code"] == "context_window_mismatch"
    assert error["currentWindowId"] == "quote"
    assert error["stateRevision"] == REV
    assert error["expectedWindowId"] == "main"
    assert error["correctable"] is True
    assert outcome.mutated is False


@pytest.mark.parametrize("version", [V2, V3])
@pytest.mark.parametrize(
    ("name", "args"),
    [
        (catalog.WINDOW_OPEN, {"windowId": "a", "goal": "g", "input": "i"}),
        (catalog.WINDOW_MEMORY_SET, {"memory": "m"}),
        (catalog.WINDOW_COMPLETE, {"outcome": "o"}),
        (catalog.FOLD_CREATE, {"fromIndex": 1, "throughIndex": 1, "summary": "s"}),
        (catalog.MAINTAINER_RUN, {}),
    ],
)
def test_v2_guarded_tools_require_expected_window(
    version: catalog.ProtocolVersion, name: str, args: dict[str, Any]
) -> None:
    error = err(run(_reader(), name, args, version=version, maintainer=True))
    assert error["code"] == "context_window_expectation_required"
    assert error["argument"] == "expectedWindowId"


def test_v1_does_not_require_expected_window() -> None:
    result = ok(run(_reader(), catalog.WINDOW_MEMORY_SET, {"memory": "m"}, version=V1))
    assert result == {"success": True, "windowId": "main", "memory": "m"}


def test_v1_refuses_expected_window_where_its_schema_has_none() -> None:
    args = {"memory": "m", "expectedWindowId": "main"}
    error = err(run(_reader(), catalog.WINDOW_MEMORY_SET, args, version=V1))
    assert error["code"] == "invalid_arguments"
    assert error["argument"] == "expectedWindowId"


def test_v1_maintainer_run_guards_the_window_when_expected_window_is_given() -> None:
    reader = _reader()
    args = {"expectedWindowId": "other"}
    error = err(run(reader, catalog.MAINTAINER_RUN, args, version=V1, maintainer=True))
    assert error["code"] == "context_window_mismatch"
    assert ok(run(reader, catalog.MAINTAINER_RUN, version=V1, maintainer=True))["queued"] is True


# ---------------------------------------------------------------- windows


def test_open_new_window_writes_record_suspends_the_old_one_and_records_the_entry() -> None:
    log = LogBuilder()
    log.input()
    log.text()
    reader = _reader(log)
    args = {"windowId": "quote", "goal": "price it", "input": "start", "expectedWindowId": "main"}
    outcome = run(reader, catalog.WINDOW_OPEN, args, index=3, bound=2)
    assert ok(outcome) == {
        "success": True,
        "windowId": "quote",
        "previousWindowId": "main",
        "created": True,
        "goal": "price it",
        "status": "active",
    }
    writes = outcome.kv_writes
    assert writes[window_key("quote")] == new_window_record(
        goal="price it", input="start", opened_from="main", created_at_index=3
    )
    assert writes[window_key("main")]["status"] == "suspended"
    assert writes[KEY_ACTIVE_WINDOW] == "quote"
    assert writes[KEY_CURRENT_WINDOW_ENTRY] == {
        "windowId": "quote",
        "fromWindowId": "main",
        "upperBoundBeforeEntry": 2,
        "input": "start",
        "enteredAtRevision": REV + 1,
    }


def test_v1_open_records_no_window_entry() -> None:
    outcome = run(_reader(), catalog.WINDOW_OPEN, {"windowId": "a", "goal": "g"}, version=V1)
    ok(outcome)
    assert KEY_CURRENT_WINDOW_ENTRY not in outcome.kv_writes
    assert outcome.kv_writes[window_key("a")]["input"] == ""


def test_v2_open_needs_a_non_empty_input() -> None:
    args = {"windowId": "a", "goal": "g", "input": "", "expectedWindowId": "main"}
    error = err(run(_reader(), catalog.WINDOW_OPEN, args))
    assert (error["code"], error["argument"]) == ("invalid_arguments", "input")


def test_resume_reactivates_the_window_and_keeps_its_memory() -> None:
    reader = _with_window(
        _reader(),
        "quote",
        status="suspended",
        memory="price 9000",
        outcomes=["o1"],
        openedFrom="main",
        input="old",
    )
    args = {
        "windowId": "quote",
        "resume": True,
        "input": "budget changed",
        "expectedWindowId": "main",
    }
    outcome = run(reader, catalog.WINDOW_OPEN, args)
    assert ok(outcome)["created"] is False
    record = outcome.kv_writes[window_key("quote")]
    assert record["status"] == "active"
    assert record["memory"] == "price 9000"
    assert record["outcomes"] == ["o1"]
    assert record["input"] == "budget changed"
    assert record["goal"] == "goal of quote"
    assert outcome.kv_writes[KEY_CURRENT_WINDOW_ENTRY]["input"] == "budget changed"


def test_a_completed_window_can_be_resumed() -> None:
    reader = _with_window(_reader(), "done", status="completed", outcomes=["ok"])
    args = {"windowId": "done", "resume": True, "input": "one more", "expectedWindowId": "main"}
    outcome = run(reader, catalog.WINDOW_OPEN, args)
    assert outcome.kv_writes[window_key("done")]["status"] == "active"


def test_leaving_a_completed_window_keeps_it_completed() -> None:
    reader = _with_window(_reader(), "done", status="completed")
    reader.kv[KEY_ACTIVE_WINDOW] = "done"
    args = {"windowId": "main", "resume": True, "input": "back", "expectedWindowId": "done"}
    outcome = run(reader, catalog.WINDOW_OPEN, args)
    ok(outcome)
    assert window_key("done") not in outcome.kv_writes


def test_opening_an_existing_window_without_resume_is_refused() -> None:
    reader = _with_window(_reader(), "quote", status="suspended")
    args = {"windowId": "quote", "goal": "g", "input": "i", "expectedWindowId": "main"}
    error = err(run(reader, catalog.WINDOW_OPEN, args))
    assert error["code"] == "context_window_exists"
    assert error["correctable"] is True
    assert "resume: true" in error["message"]


def test_resuming_an_unknown_window_is_refused() -> None:
    args = {"windowId": "nope", "resume": True, "input": "i", "expectedWindowId": "main"}
    assert err(run(_reader(), catalog.WINDOW_OPEN, args))["code"] == "context_window_not_found"


def test_a_new_window_needs_a_goal() -> None:
    args = {"windowId": "a", "input": "i", "expectedWindowId": "main"}
    assert err(run(_reader(), catalog.WINDOW_OPEN, args))["code"] == "context_window_goal_required"
    args["goal"] = "   "
    assert err(run(_reader(), catalog.WINDOW_OPEN, args))["code"] == "context_window_goal_required"


def test_window_limit_counts_main() -> None:
    reader = _with_window(_reader(), "a")
    args = {"windowId": "b", "goal": "g", "input": "i", "expectedWindowId": "main"}
    error = err(run(reader, catalog.WINDOW_OPEN, args, options={"maxWindows": 2}))
    assert error["code"] == "context_window_limit_reached"
    assert (error["windowCount"], error["maxWindows"]) == (2, 2)
    assert error["correctable"] is False
    ok(run(reader, catalog.WINDOW_OPEN, args, options={"maxWindows": 3}))


def test_opening_the_active_window_is_refused() -> None:
    args = {"windowId": "main", "input": "i", "expectedWindowId": "main"}
    error = err(run(_reader(), catalog.WINDOW_OPEN, args))
    assert error["code"] == "context_window_already_active"


def test_memory_set_replaces_the_active_windows_memory() -> None:
    reader = _with_window(_reader(), "quote", memory="old")
    reader.kv[KEY_ACTIVE_WINDOW] = "quote"
    args = {"memory": "new", "expectedWindowId": "quote"}
    outcome = run(reader, catalog.WINDOW_MEMORY_SET, args)
    assert ok(outcome) == {"success": True, "windowId": "quote", "memory": "new"}
    assert outcome.kv_writes == {
        window_key("quote"): {**reader.kv[window_key("quote")], "memory": "new"}
    }


def _chain(version: catalog.ProtocolVersion = V2) -> FakeReader:
    """main -> a -> b, committed through the dispatcher."""
    reader = _reader()
    for target, came_from in (("a", "main"), ("b", "a")):
        args: dict[str, Any] = {
            "windowId": target,
            "goal": f"goal {target}",
            "input": f"into {target}",
        }
        if version is not V1:
            args["expectedWindowId"] = came_from
        reader.apply(ok_outcome(run(reader, catalog.WINDOW_OPEN, args, version=version)))
    return reader


def ok_outcome(outcome: ToolOutcome) -> ToolOutcome:
    ok(outcome)
    return outcome


def test_complete_returns_to_the_window_it_was_entered_from() -> None:
    reader = _chain()
    assert reader.kv[KEY_ACTIVE_WINDOW] == "b" and reader.revision == REV + 2
    outcome = run(reader, catalog.WINDOW_COMPLETE, {"outcome": "b done", "expectedWindowId": "b"})
    assert ok(outcome) == {
        "success": True,
        "windowId": "a",
        "previousWindowId": "b",
        "outcome": "b done",
    }
    writes = outcome.kv_writes
    assert writes[window_key("b")]["status"] == "completed"
    assert writes[window_key("b")]["outcomes"] == ["b done"]
    assert writes[window_key("a")]["status"] == "active"
    assert writes[KEY_ACTIVE_WINDOW] == "a"
    assert writes[KEY_CURRENT_WINDOW_ENTRY] == {
        "windowId": "a",
        "fromWindowId": "b",
        "upperBoundBeforeEntry": 0,
        "input": "into a",
        "enteredAtRevision": REV + 3,
    }


def test_v1_complete_records_no_window_entry() -> None:
    reader = _chain(V1)
    outcome = run(reader, catalog.WINDOW_COMPLETE, {"outcome": "o"}, version=V1)
    assert ok(outcome)["windowId"] == "a"
    assert KEY_CURRENT_WINDOW_ENTRY not in outcome.kv_writes


def test_complete_falls_back_to_main_when_the_origin_is_completed() -> None:
    reader = _chain()
    reader.kv[window_key("a")]["status"] = "completed"
    outcome = run(reader, catalog.WINDOW_COMPLETE, {"outcome": "o", "expectedWindowId": "b"})
    assert ok(outcome)["windowId"] == "main"
    assert outcome.kv_writes[window_key("main")]["status"] == "active"


def test_complete_can_return_to_a_named_window() -> None:
    reader = _chain()
    args = {"outcome": "o", "returnToWindowId": "main", "expectedWindowId": "b"}
    assert ok(run(reader, catalog.WINDOW_COMPLETE, args))["windowId"] == "main"


@pytest.mark.parametrize(
    ("target", "code"),
    [
        ("b", "context_window_return_to_self"),
        ("ghost", "context_window_not_found"),
        ("done", "context_window_return_completed"),
    ],
)
def test_complete_refuses_a_bad_return_target(target: str, code: str) -> None:
    reader = _with_window(_chain(), "done", status="completed")
    args = {"outcome": "o", "returnToWindowId": target, "expectedWindowId": "b"}
    error = err(run(reader, catalog.WINDOW_COMPLETE, args))
    assert (error["code"], error["argument"]) == (code, "returnToWindowId")


def test_main_cannot_be_completed() -> None:
    error = err(
        run(_reader(), catalog.WINDOW_COMPLETE, {"outcome": "o", "expectedWindowId": "main"})
    )
    assert error["code"] == "context_window_main_not_completable"


def test_window_list_pages_and_filters_by_status() -> None:
    reader = _chain()
    reader.apply(
        run(reader, catalog.WINDOW_COMPLETE, {"outcome": "x" * 300, "expectedWindowId": "b"})
    )
    first = ok(run(reader, catalog.WINDOW_LIST, {"limit": 2}))
    assert [w["windowId"] for w in first["windows"]] == ["main", "a"]
    assert first["nextOffset"] == 2
    second = ok(run(reader, catalog.WINDOW_LIST, {"offset": 2, "limit": 2}))
    assert second["windows"] == [
        {
            "windowId": "b",
            "goal": "goal b",
            "status": "completed",
            "outcomePreview": "x" * 119 + "…",
        }
    ]
    assert second["nextOffset"] is None
    done = ok(run(reader, catalog.WINDOW_LIST, {"status": "completed"}))
    assert [w["windowId"] for w in done["windows"]] == ["b"]
    assert done["windows"][0]["outcomePreview"] is not None
    assert first["windows"][0]["outcomePreview"] is None


def test_window_search_matches_goal_memory_outcomes_and_checkpoint() -> None:
    reader = _reader()
    _with_window(reader, "g", goal="Quote for ACME")
    _with_window(reader, "m", memory="budget 9000")
    _with_window(reader, "o", outcomes=["shipped the SCHEDULE"])
    _with_window(reader, "c")
    reader.kv[checkpoint_key("c")] = "talked about acme pricing"
    found = ok(run(reader, catalog.WINDOW_SEARCH, {"query": "acme"}))
    assert [w["windowId"] for w in found["windows"]] == ["c", "g"]
    assert found["nextOffset"] is None
    assert [
        w["windowId"]
        for w in ok(run(reader, catalog.WINDOW_SEARCH, {"query": "schedule"}))["windows"]
    ] == ["o"]
    assert [
        w["windowId"] for w in ok(run(reader, catalog.WINDOW_SEARCH, {"query": "9000"}))["windows"]
    ] == ["m"]


def test_window_read_returns_record_checkpoint_and_coverage_without_switching() -> None:
    reader = _with_window(_reader(), "quote", memory="mem")
    reader.kv[checkpoint_key("quote")] = "summary"
    reader.kv[covered_key("quote")] = 12
    outcome = run(reader, catalog.WINDOW_READ, {"windowId": "quote"})
    result = ok(outcome)
    assert result["window"] == {"id": "quote", **reader.kv[window_key("quote")]}
    assert (result["checkpoint"], result["coveredThrough"]) == ("summary", 12)
    assert outcome.mutated is False
    fresh = ok(run(reader, catalog.WINDOW_READ, {"windowId": "main"}))
    assert (fresh["checkpoint"], fresh["coveredThrough"]) == (None, 0)
    error = err(run(reader, catalog.WINDOW_READ, {"windowId": "ghost"}))
    assert error["code"] == "context_window_not_found"


def test_task_memory_round_trip() -> None:
    reader = _reader()
    assert ok(run(reader, catalog.TASK_MEMORY_GET)) == {"success": True, "memory": ""}
    outcome = run(reader, catalog.TASK_MEMORY_SET, {"memory": "budget 9000"})
    assert ok(outcome) == {"success": True, "memory": "budget 9000"}
    assert outcome.kv_writes == {KEY_TASK_MEMORY: "budget 9000"}
    reader.apply(outcome)
    assert ok(run(reader, catalog.TASK_MEMORY_GET))["memory"] == "budget 9000"


def test_maintainer_run_queues_maintenance_of_the_active_window() -> None:
    reader = _with_window(_reader(), "quote")
    reader.kv[KEY_ACTIVE_WINDOW] = "quote"
    outcome = run(reader, catalog.MAINTAINER_RUN, {"expectedWindowId": "quote"}, maintainer=True)
    assert ok(outcome) == {"success": True, "windowId": "quote", "queued": True}
    assert outcome.effects == (("queue_maintenance", {"windowId": "quote"}),)
    assert outcome.kv_writes == {}


def test_maintainer_run_without_a_bound_maintainer_is_refused() -> None:
    outcome = run(_reader(), catalog.MAINTAINER_RUN, {"expectedWindowId": "main"})
    error = err(outcome)
    assert error["code"] == "context_maintainer_not_bound"
    assert error["correctable"] is False
    assert "No maintainer Agent is bound to this AgentVersion" in error["message"]


# ---------------------------------------------------------------- history and folds


def _work_log() -> LogBuilder:
    """main: #1 input, #2 text, #3/#4 exchange, #5-#8 two calls + results, #9 text,
    #10 in window b, #11/#12 exchange, #13 orphan result, #14 text.
    """
    log = LogBuilder()
    log.input("please price it")  # 1
    log.text("Let me look.")  # 2
    log.exchange("search", "found 3 offers")  # 3, 4
    x = log.call("fetch", {"url": "a"})  # 5
    y = log.call("fetch", {"url": "b"})  # 6
    log.result(x, "page a")  # 7
    log.result(y, "page b")  # 8
    log.text("Two pages read.")  # 9
    log.switch("b").text("in b")  # 10
    log.switch("main")
    log.exchange("calc", "42")  # 11, 12
    log.result("ghost", "who called?")  # 13
    log.text("done")  # 14
    return log


def _folds_reader(log: LogBuilder, *folds: Fold) -> FakeReader:
    reader = _with_window(_reader(log), "b")
    for fold in folds:
        reader.add_fold(fold)
    return reader


def test_history_list_groups_only_the_windows_messages_with_previews_and_foldability() -> None:
    reader = _folds_reader(_work_log())
    result = ok(run(reader, catalog.HISTORY_LIST, {"limit": 50}))
    groups = result["groups"]
    assert [(g["firstIndex"], g["lastIndex"]) for g in groups] == [
        (1, 1),
        (2, 2),
        (3, 4),
        (5, 8),
        (9, 9),
        (11, 12),
        (13, 13),
        (14, 14),
    ]
    assert all(10 not in g["indices"] for g in groups)
    assert groups[3]["indices"] == [5, 6, 7, 8]
    assert groups[0] | {"preview": None} == {
        "firstIndex": 1,
        "lastIndex": 1,
        "indices": [1],
        "kind": "user_message",
        "preview": None,
        "foldable": False,
        "reason": "contains_user_input",
        "foldId": None,
    }
    assert groups[0]["preview"] == "please price it"
    assert groups[2]["preview"] == 'search({"q":"x"}) → found 3 offers'
    assert groups[2]["kind"] == "tool_interaction" and groups[2]["foldable"] is True
    assert groups[2]["reason"] is None
    assert groups[6]["kind"] == "orphan_result" and groups[6]["reason"] == "orphan_result"
    assert result["nextAfterIndex"] is None
    assert (result["windowId"], result["coveredThrough"], result["upperBound"]) == ("main", 0, 14)


def test_history_list_previews_show_an_answers_text_not_its_thinking() -> None:
    log = LogBuilder()
    log.input("please price it")
    thinking = {"type": "thinking", "thinking": "secret plan", "signature": "c2ln"}
    log.text(
        [thinking, {"type": "redacted_thinking", "data": "ZW5j"}, {"type": "text", "text": "42."}]
    )
    result = ok(run(_reader(log, {KEY_ACTIVE_WINDOW: "main"}), catalog.HISTORY_LIST, {}))
    assert [g["preview"] for g in result["groups"]] == ["please price it", "42."]


def test_history_list_pages_with_next_after_index() -> None:
    reader = _folds_reader(_work_log())
    first = ok(run(reader, catalog.HISTORY_LIST, {"limit": 3}))
    assert [g["firstIndex"] for g in first["groups"]] == [1, 2, 3]
    assert first["nextAfterIndex"] == 4
    second = ok(run(reader, catalog.HISTORY_LIST, {"afterIndex": 4, "limit": 3}))
    assert [g["firstIndex"] for g in second["groups"]] == [5, 9, 11]
    assert second["nextAfterIndex"] == 12
    last = ok(run(reader, catalog.HISTORY_LIST, {"afterIndex": 12, "limit": 3}))
    assert [g["firstIndex"] for g in last["groups"]] == [13, 14]
    assert last["nextAfterIndex"] is None
    # an afterIndex inside a group starts at the next group, the group is never cut
    middle = ok(run(reader, catalog.HISTORY_LIST, {"afterIndex": 6, "limit": 1}))
    assert middle["groups"][0]["firstIndex"] == 9


def test_history_list_respects_coverage_and_the_frozen_bound() -> None:
    reader = _folds_reader(_work_log())
    reader.kv[covered_key("main")] = 4
    result = ok(run(reader, catalog.HISTORY_LIST, {"limit": 50}, bound=9))
    assert [(g["firstIndex"], g["lastIndex"]) for g in result["groups"]] == [(5, 8), (9, 9)]
    assert (result["coveredThrough"], result["upperBound"]) == (4, 9)


def test_history_list_marks_folded_groups_with_their_fold() -> None:
    log = _work_log()
    fold = log.fold("main", 3, 8)
    reader = _folds_reader(log, fold)
    groups = ok(run(reader, catalog.HISTORY_LIST, {"limit": 50}))["groups"]
    by_first = {g["firstIndex"]: g for g in groups}
    for first in (3, 5):
        assert by_first[first]["foldId"] == fold.id
        assert by_first[first]["foldable"] is False
        assert by_first[first]["reason"] == "already_folded"
    assert by_first[2]["foldId"] is None and by_first[2]["foldable"] is True
    assert by_first[9]["foldId"] is None


def test_history_list_reads_the_calls_window_not_the_window_active_now() -> None:
    reader = _folds_reader(_work_log())
    reader.kv[KEY_ACTIVE_WINDOW] = "b"
    result = ok(run(reader, catalog.HISTORY_LIST, {"limit": 50}, window="main"))
    assert result["windowId"] == "main" and len(result["groups"]) == 8
    in_b = ok(run(reader, catalog.HISTORY_LIST, {"limit": 50}, window="b"))
    assert [g["indices"] for g in in_b["groups"]] == [[10]]


def _fold_args(first: int, last: int, summary: str = "read two pages") -> dict[str, Any]:
    return {
        "fromIndex": first,
        "throughIndex": last,
        "summary": summary,
        "expectedWindowId": "main",
    }


def test_fold_create_writes_the_fold_with_ordered_message_ids() -> None:
    log = _work_log()
    reader = _folds_reader(log)
    outcome = run(reader, catalog.FOLD_CREATE, _fold_args(2, 9), call_id="call-fold-1")
    fold_id = fold_id_for("call-fold-1")
    assert ok(outcome) == {
        "success": True,
        "foldId": fold_id,
        "windowId": "main",
        "firstIndex": 2,
        "lastIndex": 9,
        "messageCount": 8,
    }
    expected = Fold(
        id=fold_id,
        window_id="main",
        first_index=2,
        last_index=9,
        message_ids=tuple(f"m{i}" for i in range(2, 10)),
        summary="read two pages",
        created_at_index=15,
    )
    assert outcome.kv_writes == {f"fold/{fold_id}": expected.to_kv()}
    # The fold as the service reads it back from that write (selectors.folds_*).
    assert Fold.from_kv(fold_id, outcome.kv_writes[f"fold/{fold_id}"]) == expected


def test_fold_create_skips_other_windows_messages_inside_its_range() -> None:
    log = _work_log()
    outcome = run(_folds_reader(log), catalog.FOLD_CREATE, _fold_args(9, 12))
    assert ok(outcome)["messageCount"] == 3
    fold_id = fold_id_for("tc1")  # run()'s call id
    assert list(outcome.kv_writes) == [f"fold/{fold_id}"]
    written = Fold.from_kv(fold_id, outcome.kv_writes[f"fold/{fold_id}"])
    assert (written.window_id, written.first_index, written.last_index) == ("main", 9, 12)
    assert written.message_ids == ("m9", "m11", "m12")


@pytest.mark.parametrize(
    ("first", "last", "code"),
    [
        (1, 4, "context_fold_contains_user_input"),
        (4, 9, "context_fold_partial_group"),
        (11, 13, "context_fold_orphan_result"),
        (2, 10, "context_fold_other_window"),
        (2, 99, "context_fold_above_bound"),
    ],
)
def test_fold_rule_refusals_become_correctable_error_results(
    first: int, last: int, code: str
) -> None:
    error = err(run(_folds_reader(_work_log()), catalog.FOLD_CREATE, _fold_args(first, last)))
    assert error["code"] == code
    assert error["correctable"] is True


def test_fold_create_stays_at_or_below_the_frozen_bound() -> None:
    reader = _folds_reader(_work_log())
    error = err(run(reader, catalog.FOLD_CREATE, _fold_args(2, 9), bound=8))
    assert error["code"] == "context_fold_above_bound"
    assert error["upperBound"] == 8


def test_fold_create_refuses_overlap_and_the_fold_limit() -> None:
    log = _work_log()
    reader = _folds_reader(log, log.fold("main", 3, 4))
    assert err(run(reader, catalog.FOLD_CREATE, _fold_args(2, 9)))["code"] == "context_fold_nested"
    error = err(run(reader, catalog.FOLD_CREATE, _fold_args(5, 9), options={"maxFolds": 1}))
    assert error["code"] == "context_fold_limit_reached"
    assert error["correctable"] is False


def test_fold_create_refuses_a_range_below_the_checkpoint() -> None:
    reader = _folds_reader(_work_log())
    reader.kv[covered_key("main")] = 4
    error = err(run(reader, catalog.FOLD_CREATE, _fold_args(3, 9)))
    assert error["code"] == "context_fold_below_checkpoint"


def test_fold_list_flags_compressed_folds_and_pages() -> None:
    log = _work_log()
    folds = [log.fold("main", 2, 2), log.fold("main", 3, 4), log.fold("main", 5, 8)]
    reader = _folds_reader(log, *folds, log.fold("b", 10, 10))
    reader.kv[covered_key("main")] = 4
    first = ok(run(reader, catalog.FOLD_LIST, {"limit": 2}))
    assert [(f["firstIndex"], f["compressed"]) for f in first["folds"]] == [(2, True), (3, True)]
    assert first["nextOffset"] == 2
    assert first["folds"][0] == {
        "foldId": folds[0].id,
        "windowId": "main",
        "firstIndex": 2,
        "lastIndex": 2,
        "summary": "did the search",
        "compressed": True,
    }
    second = ok(run(reader, catalog.FOLD_LIST, {"offset": 2, "limit": 2}))
    assert [(f["firstIndex"], f["compressed"]) for f in second["folds"]] == [(5, False)]
    assert second["nextOffset"] is None
    other = ok(run(reader, catalog.FOLD_LIST, {"windowId": "b"}))
    assert [f["windowId"] for f in other["folds"]] == ["b"]
    error = err(run(reader, catalog.FOLD_LIST, {"windowId": "ghost"}))
    assert error["code"] == "context_window_not_found"


def test_fold_read_serves_a_compressed_fold_of_another_window() -> None:
    log = _work_log()
    log.switch("b")
    call = log.call("lookup", {"q": "漢字 😀"})  # 15 (b)
    log.result(call, "結果 🎉")  # 16 (b)
    fold = log.fold("b", 10, 16)
    reader = _folds_reader(log, fold)
    reader.kv[covered_key("b")] = 16
    outcome = run(reader, catalog.FOLD_READ, {"foldId": fold.id})
    result = ok(outcome)
    full = render_fold_text([log.at(10), log.at(15), log.at(16)])
    assert result == {
        "success": True,
        "foldId": fold.id,
        "windowId": "b",
        "firstIndex": 10,
        "lastIndex": 16,
        "compressed": True,
        "text": full,
        "cursor": 0,
        "nextCursor": None,
        "totalLength": utf16_len(full),
    }
    assert [m["index"] for m in json.loads(result["text"])] == [10, 15, 16]
    assert outcome.mutated is False and outcome.effects == ()
    assert reader.kv[KEY_ACTIVE_WINDOW] == "main"


def test_fold_read_pages_a_long_fold_in_utf16_slices() -> None:
    log = LogBuilder()
    call = log.call("scrape")
    log.result(call, ("漢字😀" * 3000 + "x") * 4)
    fold = log.fold("main", 1, 2)
    reader = _folds_reader(log, fold)
    texts, cursor = [], 0
    while cursor is not None:
        result = ok(run(reader, catalog.FOLD_READ, {"foldId": fold.id, "cursor": cursor}))
        assert result["cursor"] == cursor
        assert utf16_len(result["text"]) <= FOLD_READ_SLICE_UNITS
        texts.append(result["text"])
        cursor = result["nextCursor"]
    full = render_fold_text(log.messages)
    assert len(texts) > 4
    assert "".join(texts) == full
    assert result["totalLength"] == utf16_len(full)


def test_fold_read_refuses_a_cursor_inside_a_pair_or_past_the_end() -> None:
    log = LogBuilder()
    log.text("😀")
    fold = log.fold("main", 1, 1)
    reader = _folds_reader(log, fold)
    text = render_fold_text(log.messages)
    inside = text.encode("utf-16-le").index("😀".encode("utf-16-le")) // 2 + 1
    for cursor in (inside, utf16_len(text) + 1):
        error = err(run(reader, catalog.FOLD_READ, {"foldId": fold.id, "cursor": cursor}))
        assert (error["code"], error["argument"]) == ("invalid_arguments", "cursor")


def test_fold_read_of_an_unknown_fold_is_not_found() -> None:
    error = err(run(_reader(), catalog.FOLD_READ, {"foldId": "f_000000000000"}))
    assert error["code"] == "context_fold_not_found"
    assert error["correctable"] is True


def test_a_fold_whose_messages_are_gone_is_reported_not_served_partially() -> None:
    log = _work_log()
    fold = log.fold("main", 3, 4)
    reader = _folds_reader(log, fold)
    reader.messages = [m for m in reader.messages if m.index != 4]
    error = err(run(reader, catalog.FOLD_READ, {"foldId": fold.id}))
    assert error["code"] == "context_fold_messages_missing"
    assert error["missing"] == ["m4"]
    assert error["correctable"] is False


def test_a_created_fold_reads_back_through_the_dispatcher() -> None:
    log = _work_log()
    reader = _folds_reader(log)
    created = run(reader, catalog.FOLD_CREATE, _fold_args(5, 8))
    reader.apply(created)
    fold_id = ok(created)["foldId"]
    listed = ok(run(reader, catalog.FOLD_LIST))["folds"]
    assert [f["foldId"] for f in listed] == [fold_id]
    text = ok(run(reader, catalog.FOLD_READ, {"foldId": fold_id}))["text"]
    assert [m["index"] for m in json.loads(text)] == [5, 6, 7, 8]
    # the same call id again names the same fold, and the range is now taken
    again = err(run(reader, catalog.FOLD_CREATE, _fold_args(5, 8)))
    assert again["code"] == "context_fold_nested" and again["foldId"] == fold_id


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 30) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
_ARG_NAMES = st.sampled_from(
    [
        "purpose",
        "expectedWindowId",
        "windowId",
        "goal",
        "input",
        "resume",
        "memory",
        "outcome",
        "fromIndex",
        "throughIndex",
        "summary",
        "foldId",
        "cursor",
        "offset",
        "limit",
        "query",
        "afterIndex",
        "status",
        "returnToWindowId",
        "bogus",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from([*sorted(catalog.PROTOCOL_TOOL_NAMES), "context_nope"]),
    arguments=st.dictionaries(_ARG_NAMES, _JSON, max_size=6) | _JSON,
    frozen=st.sampled_from([REV, REV - 1]),
    version=st.sampled_from([V1, V2, V3, PREFIX]),
)
def test_dispatch_never_raises_for_whatever_the_model_sends(
    name: str, arguments: object, frozen: int, version: catalog.ProtocolVersion
) -> None:
    log = _work_log()
    reader = _folds_reader(log, log.fold("main", 3, 4))
    call = ToolCall("tc1", name, arguments, 15, "main", Frame(frozen, 14))
    outcome = dispatch(call, ToolContext(version, version.defaults, REV, True), reader)
    assert outcome.result["success"] in (True, False)
    if not outcome.success:
        assert outcome.kv_writes == {}
    json.dumps(outcome.result)  # results are JSON
