"""A view's plan (issue 42): the window, the KV keys and the rows are derived once, from the
catalog entry the plan carries; nothing after the plan asks the catalog or the state's
`activeWindow` again."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from contextproto.protocol import catalog, view
from contextproto.protocol.catalog import ProtocolVersion
from contextproto.protocol.messages import DERIVED_FOLD
from contextproto.protocol.projection import project
from contextproto.protocol.prompt_cache import PROMPT_CACHE_OFF
from contextproto.protocol.state import KEY_ACTIVE_WINDOW
from contextproto.protocol.view_plan import ReadPlan, view_plan
from tests.protocol.logbuilder import RUN_1, LogBuilder, make_input
from tests.protocol.test_view import LogSource, _recipe, _state, _worked_log


class _CountingEntry(ProtocolVersion):
    """A catalog entry that counts how often a view asks it whether it is windowed."""

    asked: list[str]

    def __getattribute__(self, name: str) -> Any:
        if name == "windowed":
            object.__getattribute__(self, "asked").append(name)
        return object.__getattribute__(self, name)


def _counting(entry: ProtocolVersion) -> _CountingEntry:
    fields = {f.name: getattr(entry, f.name) for f in dataclasses.fields(entry)}
    counting = _CountingEntry(**fields)
    object.__setattr__(counting, "asked", [])
    return counting


def test_the_plan_reads_the_window_above_its_checkpoint() -> None:
    plan = view_plan(
        catalog.get_version("unified", 2),
        active_window="a",
        run_id=RUN_1,
        upper_bound=16,
        revision=3,
    )
    assert plan.reads(8) == ReadPlan(
        window_id="a",
        after_index=8,
        through_index=16,
        run_id=RUN_1,
        folds_window="a",
        folds_after_index=8,
    )


def test_prefix_plans_main_and_reads_no_folds() -> None:
    plan = view_plan(
        catalog.get_version("prefix", 2), active_window="a", run_id=None, upper_bound=9, revision=1
    )
    reads = plan.reads(3)
    assert (reads.window_id, reads.folds_window, reads.run_id) == ("main", None, None)
    assert plan.kv_keys == (
        "coveredThrough/main",
        "checkpoint/main",
        "gateway/system",
        "gateway/tools",
    )


def test_the_kv_keys_name_only_the_current_window() -> None:
    plan = view_plan(
        catalog.get_version("unified", 4), active_window="a", run_id=None, upper_bound=0, revision=0
    )
    assert plan.kv_keys == (
        "activeWindow",
        "taskMemory",
        "window/a",
        "checkpoint/a",
        "coveredThrough/a",
        "currentWindowEntry",
        "gateway/system",
        "gateway/tools",
    )


@pytest.mark.parametrize("entry", catalog.all_versions(), ids=lambda v: v.key)
def test_a_view_asks_its_catalog_entry_for_the_window_once(
    entry: ProtocolVersion, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plan, freeze, assemble and adapt a view: the entry is asked whether it is windowed once
    (by the plan), and no stage after the plan looks a version up in the catalog."""
    log, folds = _worked_log()
    source = LogSource(log, _state("a"), folds if entry.windowed else [])
    counting = _counting(entry)
    plan = view.view_plan(counting, active_window="a", run_id=RUN_1, upper_bound=9, revision=7)

    def no_lookup(*args: object, **kwargs: object) -> None:
        raise AssertionError("a view looked its version up in the catalog after its plan")

    for name in ("find_version", "get_version", "by_key"):
        monkeypatch.setattr(catalog, name, no_lookup)
    built = view.assemble(view.freeze(plan, source), source, _recipe(entry))
    view.request_for(
        built,
        view.WireRecipe(
            provider="openai-chat",
            prompt_cache=PROMPT_CACHE_OFF,
            assistant_prefill=False,
            cache_key="k",
        ),
    )
    assert counting.asked == ["windowed"]
    assert built.projection.protocol == entry.key


def test_the_view_shows_the_plans_window_whatever_the_state_says() -> None:
    """`project` takes the window from the plan: a state whose `activeWindow` names another
    window (a plan made from the session row) does not move the view."""
    log = LogBuilder(window="a")
    log.input("go")  # 1
    log.text("in a")  # 2
    log.switch("b").text("in b")  # 3
    inp = make_input(log, window="a", version=4)
    moved = dataclasses.replace(inp, kv={**inp.kv, KEY_ACTIVE_WINDOW: "b"})
    shown = project(moved)
    assert shown.window_id == "a"
    assert shown == project(inp)


def test_a_version_outside_the_catalog_projects_from_its_plan() -> None:
    """The entry travels in the plan, so `project` never looks it up: an engine build whose
    catalog lacks the version still projects what the plan says."""
    log = LogBuilder(window="a")
    log.input("go")  # 1
    call = log.call("lookup")  # 2
    log.result(call, "found")  # 3
    log.exchange()  # 4, 5
    inp = make_input(log, window="a", version=2, folds=[log.fold("a", 4, 5, "looked up")])
    beyond = dataclasses.replace(inp.plan.protocol, version=99)
    shown = project(dataclasses.replace(inp, plan=dataclasses.replace(inp.plan, protocol=beyond)))
    assert shown.protocol == "unified@99"
    assert [s.derived_type for s in shown.sources].count(DERIVED_FOLD) == 1
