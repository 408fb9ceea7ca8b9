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
