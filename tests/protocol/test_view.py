"""The one view builder (issue 35): plan → load → project, over any ViewSource.

Live turns read the database, replays the KV history; both go through `view_plan`, `freeze`
and `assemble`, so these tests pin what the builder asks a source for and that it projects
exactly what `project()` would from the same inputs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from contextproto.protocol import catalog, client_state, view
from contextproto.protocol.messages import DERIVED_STATE, Fold, RawMessage
from contextproto.protocol.projection import ReadPlan, project
from contextproto.protocol.state import (
    KEY_ACTIVE_WINDOW,
    MAIN_WINDOW,
    checkpoint_key,
    covered_key,
    new_window_record,
    window_key,
)
from contextproto.protocol.tokens import json_tokens
from tests.protocol.logbuilder import DEFAULT_OPTIONS, PREFIX_OPTIONS, RUN_1, LogBuilder
from tests.protocol.logbuilder import make_input as projection_input

PROTOCOL_TOOLS = [{"name": "context_fold_create", "description": "fold", "inputSchema": {}}]


class LogSource:
    """A ViewSource over an in-memory log, KV and folds, recording what it was asked."""

    def __init__(self, log: LogBuilder, kv: Mapping[str, Any], folds: Sequence[Fold] = ()):
        self.log = log
        self.state = dict(kv)
        self.all_folds = list(folds)
        self.asked: list[tuple[str, Any]] = []

    def kv(self, keys: Sequence[str]) -> Mapping[str, Any]:
        self.asked.append(("kv", tuple(keys)))
        return {k: self.state[k] for k in keys if k in self.state}

    def folds(self, window_id: str, after_index: int) -> Sequence[Fold]:
        self.asked.append(("folds", (window_id, after_index)))
        return [
            f for f in self.all_folds if f.window_id == window_id and f.first_index > after_index
        ]

    def rows(self, reads: ReadPlan) -> tuple[Sequence[RawMessage], Sequence[RawMessage]]:
        self.asked.append(("rows", reads))
        window = self.log.of_window(
            reads.window_id, after=reads.after_index, through=reads.through_index
        )
        inputs = (
            self.log.run_inputs(reads.run_id, through=reads.through_index) if reads.run_id else []
        )
        return window, inputs


def _worked_log() -> tuple[LogBuilder, list[Fold]]:
    """Window a: covered through 4, a fold above the bound, one below it; window b elsewhere."""
    log = LogBuilder(window="a")
    log.input("plan the trip")  # 1
    log.text()  # 2
    log.exchange()  # 3, 4
    log.exchange("flights")  # 5, 6
    log.exchange("hotels")  # 7, 8
    log.switch("b").text()  # 9
    call = log.switch("a").call("weather", call_id="call_w")  # 10
    log.result(call, "sunny " * 400)  # 11
    return log, [log.fold("a", 2, 4, "covered: never shown"), log.fold("a", 5, 8, "booked")]


def _state(window: str) -> dict[str, Any]:
    return {
        KEY_ACTIVE_WINDOW: window,
        window_key(window): new_window_record(goal=f"goal of {window}"),
        covered_key(window): 4,
        checkpoint_key(window): f"checkpoint of {window}",
    }


def _recipe(entry: catalog.ProtocolVersion, tools: Sequence[Mapping[str, Any]] = ()) -> Any:
    options = PREFIX_OPTIONS if entry.protocol_id == "prefix" else DEFAULT_OPTIONS[entry.version]
    return view.ViewRecipe(
        options=options,
        system_prompt="You are an agent.\n{{context_protocol}}",
        session_id="s1",
        session_inputs={"customer": "ACME"},
        tools=list(tools),
        tool_result_preview_chars=16000,
        max_input_tokens=None,
        trigger_tokens=None,
    )


@pytest.mark.parametrize("entry", catalog.all_versions(), ids=lambda v: v.key)
def test_a_windowed_version_plans_the_active_window_and_prefix_plans_main(
    entry: catalog.ProtocolVersion,
) -> None:
    plan = view.view_plan(entry, active_window="a", run_id=RUN_1, upper_bound=11, revision=7)
    assert plan.window_id == ("a" if entry.windowed else MAIN_WINDOW)
    assert covered_key(plan.window_id) in plan.kv_keys
    assert (plan.upper_bound, plan.revision, plan.run_id) == (11, 7, RUN_1)
    assert (
        view.view_plan(entry, active_window=None, run_id=None, upper_bound=1, revision=1).window_id
        == MAIN_WINDOW
    )


def test_freeze_reads_the_plan_the_covered_bound_and_only_the_folds_above_it() -> None:
    log, folds = _worked_log()
    source = LogSource(log, _state("a"), folds)
    entry = catalog.get_version("unified", 2)
    plan = view.view_plan(entry, active_window="a", run_id=RUN_1, upper_bound=11, revision=7)
    frozen = view.freeze(plan, source)
    assert source.asked == [("kv", plan.kv_keys), ("folds", ("a", 4))]
    assert (frozen.reads.after_index, frozen.reads.through_index) == (4, 11)
    assert [(f.first_index, f.last_index) for f in frozen.folds] == [(5, 8)]
    # Rows are read only when the view is assembled (after the lock, on the live path).
    view.assemble(frozen, source, _recipe(entry))
    assert source.asked[-1] == ("rows", frozen.reads)


@pytest.mark.parametrize("entry", catalog.all_versions(), ids=lambda v: v.key)
def test_the_builder_projects_exactly_what_project_would_from_the_same_inputs(
    entry: catalog.ProtocolVersion,
) -> None:
    log, folds = _worked_log()
    window = "a" if entry.windowed else MAIN_WINDOW
    if not entry.windowed:
        log = LogBuilder(window=MAIN_WINDOW)
        log.input("plan the trip")  # 1
        log.text()  # 2; the covered bound 4 falls between exchanges
        for _ in range(5):
            log.exchange("search", "found " * 300)
        folds = []
    source = LogSource(log, _state(window), folds)
    plan = view.view_plan(
        entry, active_window="a", run_id=RUN_1, upper_bound=len(log.messages), revision=7
    )
    built = view.assemble(
        view.freeze(plan, source), source, _recipe(entry), maintenance_pending=True
    )

    expected = project(
        projection_input(
            log,
            window=window,
            version=entry.version,
            protocol_id=entry.protocol_id,
            covered=4,
            folds=folds,
            protocol_prompt=entry.prompt,
            maintenance_pending=True,
        )
    )
    assert built.projection == expected
    assert built.run_inputs == tuple(log.run_inputs(RUN_1))


def test_a_gateway_clients_tools_are_read_with_the_state_and_follow_the_protocols() -> None:
    log, folds = _worked_log()
    client_tool = {"description": "Look it up.", "inputSchema": {"type": "object"}}
    kv = {
        **_state("a"),
        client_state.KEY_TOOLS: ["lookup"],
        client_state.tool_key("lookup"): client_tool,
    }
    source = LogSource(log, kv, folds)
    entry = catalog.get_version("unified", 2)
    plan = view.view_plan(entry, active_window="a", run_id=RUN_1, upper_bound=11, revision=7)
    frozen = view.freeze(plan, source)
    assert source.asked[1] == ("kv", (client_state.tool_key("lookup"),))

    built = view.assemble(frozen, source, _recipe(entry, PROTOCOL_TOOLS))
    assert [t["name"] for t in built.tools] == ["context_fold_create", "lookup"]
    assert built.tool_tokens == json_tokens(built.tools)


@pytest.mark.parametrize(("key", "state_is_header"), [("unified@2", False), ("unified@4", True)])
def test_protected_sizes_add_up_and_count_the_pressure_state_as_header(
    key: str, state_is_header: bool
) -> None:
    entry = catalog.by_key(key)
    assert entry is not None
    log, folds = _worked_log()
    source = LogSource(log, _state("a"), folds)
    plan = view.view_plan(entry, active_window="a", run_id=RUN_1, upper_bound=11, revision=7)
    built = view.assemble(view.freeze(plan, source), source, _recipe(entry, PROTOCOL_TOOLS))
    sizes = built.protected_sizes()

    state = [
        json_tokens(m.content)
        for m, s in zip(built.projection.messages, built.projection.sources, strict=True)
        if s.derived_type == DERIVED_STATE
    ]
    assert len(state) == 1
    without_state = dataclasses.replace(
        entry, layout=dataclasses.replace(entry.layout, state=catalog.StateStyle.FIELDS)
    )
    plain = dataclasses.replace(built, protocol=without_state).protected_sizes()
    assert sizes["header"] - plain["header"] == (state[0] if state_is_header else 0)
    assert sizes["toolSchemas"] == json_tokens(PROTOCOL_TOOLS)
    assert sizes["runInputs"] == json_tokens("plan the trip")
