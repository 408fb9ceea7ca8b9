"""The bench's 300-turn script and the demo's story validate under every unified view.

Every view of scenario.PROTOCOL_VIEWS runs the same script (cut to what its version's tools
accept); a call its version refused would answer with an error and quietly change what the
bench measures. unified@4 is checked like the others.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from contextproto.protocol import catalog
from contextproto.protocol.arguments import validate_tool_arguments
from labs import scenario

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import bench_tokens  # noqa: E402  (bench/ is a script directory, not a package)

UNIFIED_VIEWS = [v for v in scenario.PROTOCOL_VIEWS if v.windowed]


def _context_calls(script: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        call
        for step in script["steps"]
        for call in step.get("toolCalls", [])
        if call["name"].startswith("context_")
    ]


def test_unified4_is_measured_with_its_catalog_defaults() -> None:
    assert "unified@4" in [v.label for v in scenario.PROTOCOL_VIEWS]
    view = scenario.protocol_view("unified@4")
    assert (view.protocol_id, view.version, dict(view.options)) == ("unified", 4, {})
    assert scenario.DEMO_VIEWS == ("unified@2", "unified@4", "prefix@2")


@pytest.mark.parametrize("view", UNIFIED_VIEWS, ids=lambda v: v.label)
def test_every_context_call_of_the_bench_script_validates(view: scenario.ProtocolView) -> None:
    unified, twin, inputs = bench_tokens.build_scripts()
    script = bench_tokens.script_for_view(unified, view)
    version = catalog.get_version(view.protocol_id, view.version)
    calls = _context_calls(script)
    assert len(script["steps"]) == len(twin["steps"]) == bench_tokens.TURNS
    assert len(inputs) == bench_tokens.TASKS and calls
    for call in calls:
        validate_tool_arguments(version, call["name"], call["arguments"])
        if view.version >= 2 and call["name"] in version.expected_window_tools:
            assert "expectedWindowId" in call["arguments"], call


@pytest.mark.parametrize(
    "view", [v for v in UNIFIED_VIEWS if v.label in scenario.DEMO_VIEWS], ids=lambda v: v.label
)
def test_every_context_call_of_the_demo_story_validates(view: scenario.ProtocolView) -> None:
    unified, _twin = scenario.story_scripts()
    version = catalog.get_version(view.protocol_id, view.version)
    for call in _context_calls(unified):
        validate_tool_arguments(version, call["name"], call["arguments"])


def test_the_no_folds_view_notes_progress_where_the_others_fold() -> None:
    unified, _twin, _inputs = bench_tokens.build_scripts()
    folding = bench_tokens.script_for_view(unified, scenario.protocol_view("unified@4"))
    view = scenario.protocol_view("unified@4 no folds")
    script = bench_tokens.script_for_view(unified, view)
    assert (view.version, dict(view.options), view.folds) == (4, {}, False)
    assert len(script["steps"]) == len(folding["steps"]) == bench_tokens.TURNS
    names = [[c["name"] for c in step.get("toolCalls", [])] for step in script["steps"]]
    before = [[c["name"] for c in step.get("toolCalls", [])] for step in folding["steps"]]
    assert sum(n.count("context_fold_create") for n in before) > 0
    assert not any("context_fold_create" in n for n in names)
    # Every other call is the same call at the same turn.
    for turn, (now, then) in enumerate(zip(names, before, strict=True)):
        expected = [bench_tokens.NOTE_TOOL if n == "context_fold_create" else n for n in then]
        assert now == expected, turn


def test_the_1000_turn_script_repeats_the_first_ten_tasks_pattern() -> None:
    unified, twin, inputs = bench_tokens.build_scripts(1000, 34)
    assert len(unified["steps"]) == len(twin["steps"]) == 1000 and len(inputs) == 34
    # Every block of 10 tasks resumes two earlier windows and asks for maintenance twice.
    assert bench_tokens._resumes(34) == {6: 1, 9: 3, 16: 11, 19: 13, 26: 21, 29: 23}
    assert bench_tokens._resumes(10) == bench_tokens.RESUMES
    assert bench_tokens._maintainer_runs(10) == bench_tokens.MAINTAINER_RUN_AT
    for view in UNIFIED_VIEWS:
        version = catalog.get_version(view.protocol_id, view.version)
        for call in _context_calls(bench_tokens.script_for_view(unified, view)):
            validate_tool_arguments(version, call["name"], call["arguments"])


def test_every_unified_view_runs_with_both_agents_in_the_realistic_setting() -> None:
    labels = bench_tokens.SETTING_128K.views
    folding = [v.label for v in UNIFIED_VIEWS if v.folds]
    assert len(folding) == 6
    for label in folding:
        assert label in labels and f"{label} no folds" in labels
    assert "prefix@2" in labels
    # Today's 16k script keeps its views (and their figures) and adds unified@2 without folds.
    before = [v.label for v in scenario.PROTOCOL_VIEWS[:8]]
    assert [v for v in bench_tokens.SETTING_16K.views if v in before] == before
    assert set(bench_tokens.SETTING_16K.views) - set(before) == {"unified@2 no folds"}
    assert bench_tokens.SETTING_16K.sizes == bench_tokens.SIZES_FIXED


def test_long_tail_sizes_are_seeded_per_lookup_and_mostly_small() -> None:
    items = [f"laptop-{task}-{n}" for task in range(10) for n in range(80)]
    sizes = [bench_tokens.lookup_chars(item) for item in items]
    assert sizes == [bench_tokens.lookup_chars(item) for item in items]  # the same every run
    assert all(300 <= n <= 60_000 for n in sizes)
    small = sum(n < 2_000 for n in sizes) / len(sizes)
    large = sum(n >= 20_000 for n in sizes) / len(sizes)
    assert 0.7 < small < 0.9 and 0.02 < large < 0.09
    text = bench_tokens.host_content("price_lookup", {"item": items[0], "qty": 1}, "long-tail")
    assert abs(len(text) - sizes[0]) < 150
    fixed = bench_tokens.host_content("price_lookup", {"item": items[0], "qty": 1}, "fixed")
    assert fixed == scenario.host_result("price_lookup", {"item": items[0], "qty": 1})
