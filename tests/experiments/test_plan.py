"""Plan validation: the example plan is valid; an invalid plan is refused with every error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from labs.experiments.plan import PROVIDERS, PlanInvalid, load_plan, plan_errors
from labs.experiments.spec import plan_from
from tests.experiments.conftest import EXAMPLE_PLAN


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_example_plan_is_valid_for_every_provider(provider: str) -> None:
    loaded = load_plan(EXAMPLE_PLAN, provider=provider)
    assert [g["id"] for g in loaded.data["groups"]] == ["A", "B", "C", "u4", "v2", "prefix"]
    assert len(loaded.sha256) == 64


def test_a_valid_plan_reads_into_typed_values_with_the_runners_defaults(
    example_plan: dict[str, Any],
) -> None:
    loaded = load_plan(EXAMPLE_PLAN, provider="scripted")
    plan = loaded.plan
    assert [g.id for g in plan.groups] == [g["id"] for g in loaded.data["groups"]]
    assert plan.budget_tokens == loaded.data["budget"]["totalTokens"]
    assert [g.protocol.key for g in plan.groups][:4] == ["unified@3"] * 3 + ["unified@4"]
    assert plan.groups[3].protocol.options == {} and plan.agent.maintainer_prompt
    assert plan.anthropic_prefill and not plan.stop_on_group_failure
    stages = [(s.id, s.sessions, len(s.runs)) for s in plan.stages]
    assert stages == [("stage1", 3, 1), ("stage2", 2, 1), ("stage3", 1, 3)]
    tool = plan.host_tools[0]
    assert tool.result == (
        tool_data["result"]
        if isinstance((tool_data := loaded.data["hostTools"][0])["result"], str)
        else json.dumps(tool_data["result"])
    )
    assert plan.scripted is not None and plan.scripted.wire_format == "openai-chat"
    stage1 = plan.scripted.stages["stage1"]
    assert stage1.steps_for("v2") == example_plan["scripted"]["stages"]["stage1"]["groups"]["v2"]
    assert stage1.steps_for("A") == example_plan["scripted"]["stages"]["stage1"]["default"]

    # What a plan leaves out takes the defaults the runner always applied.
    for key in ("sessionInputs", "maintenanceTriggerRatio", "maxOutputTokens", "maintainer"):
        example_plan["agent"].pop(key, None)
    example_plan.pop("providerAdaptation")
    example_plan["stopConditions"]["groupFailsStage"] = "stop_experiment"
    bare = plan_from(example_plan)
    assert (bare.agent.session_inputs, bare.agent.maintenance_trigger_ratio) == ({}, 0.75)
    assert bare.agent.max_output_tokens is None and bare.agent.maintainer_prompt is None
    assert bare.provider_adaptation == {} and not bare.anthropic_prefill
    assert bare.stop_on_group_failure


def test_the_example_plan_matches_the_seed_experiment(example_plan: dict[str, Any]) -> None:
    placements = {
        g["id"]: (g["protocol"]["id"], g["protocol"]["version"], g["protocol"]["options"])
        for g in example_plan["groups"]
    }
    assert placements == {
        "A": ("unified", 3, {"stateMessagePlacement": "trailing_assistant"}),
        "B": ("unified", 3, {"stateMessagePlacement": "before_history_assistant"}),
        "C": ("unified", 3, {"stateMessagePlacement": "trailing_user"}),
        # Issue 25: unified@4 with the catalog's defaults on the same stages.
        "u4": ("unified", 4, {}),
        "v2": ("unified", 2, {}),
        "prefix": ("prefix", 2, {}),
    }
    stages = [(s["id"], s["sessions"], len(s["runs"])) for s in example_plan["stages"]]
    assert stages == [("stage1", 3, 1), ("stage2", 2, 1), ("stage3", 1, 3)]
    inputs = [r["input"] for r in example_plan["stages"][2]["runs"]]
    assert "quote" in inputs[0] and "schedule" in inputs[1] and "9000" in inputs[2]


def _broken(plan: dict[str, Any]) -> dict[str, Any]:
    del plan["budget"]
    plan["groups"][1]["protocol"]["options"] = {"stateMessagePlacement": "system"}
    plan["groups"][2]["protocol"]["version"] = 9
    plan["groups"].append(dict(plan["groups"][0]))
    plan["stages"][0]["runs"][0]["expect"].append(
        {"type": "contains", "text": "x", "appliesTo": ["Z"]}
    )
    plan["stages"][2]["runs"][0]["expect"].append(
        {"type": "memoryKept", "text": "x", "sinceRun": 1}
    )
    plan["stages"][1]["runs"][0]["expect"].append({"type": "kvEquals", "key": "k"})
    plan["scripted"]["stages"]["stage1"]["default"] = [{"txt": "typo"}]
    del plan["scripted"]["stages"]["stage2"]
    return plan


def test_an_invalid_plan_lists_every_error_at_once(example_plan: dict[str, Any]) -> None:
    errors = plan_errors(_broken(example_plan), provider="scripted")
    expected = [
        "$: 'budget' is a required property",
        "$.groups[1].protocol.options.stateMessagePlacement:",
        "$.groups[2].protocol: unified@9 is not in the catalog",
        "$.groups[6].id: 'A' is used twice",
        "$.stages[0].runs[0].expect[2].appliesTo: no group 'Z'",
        "$.stages[2].runs[0].expect[1].sinceRun: must name an earlier run",
        "$.stages[1].runs[0].expect[2]: 'equals' is a required property",
        "$.scripted.stages.stage1.default: scripted model: steps[0]: unknown key(s) txt",
        "$.scripted.stages: --provider scripted needs steps for stage 'stage2'",
    ]
    for text in expected:
        assert any(e.startswith(text) for e in errors), (text, errors)
    assert len(errors) == len(expected)


def test_the_command_refuses_an_invalid_plan_naming_every_error(
    example_plan: dict[str, Any], tmp_path: Path
) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(_broken(example_plan)), encoding="utf-8")
    with pytest.raises(CommandError) as refused:
        call_command("run_experiment", str(path), "--provider", "scripted")
    message = str(refused.value)
    assert "the plan has 9 problem(s)" in message
    assert message.count("\n  - ") == 9
    assert "'budget' is a required property" in message and "unified@9" in message


def test_scripted_steps_are_only_required_for_the_scripted_provider(
    example_plan: dict[str, Any],
) -> None:
    del example_plan["scripted"]
    assert plan_errors(example_plan, provider="openai-chat") == []
    assert plan_errors(example_plan, provider="scripted") == [
        "$.scripted: --provider scripted needs the plan's scripted section"
    ]


def test_a_file_that_is_not_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(PlanInvalid) as refused:
        load_plan(path, provider="scripted")
    assert "not a JSON document" in refused.value.errors[0]
    with pytest.raises(PlanInvalid) as missing:
        load_plan(tmp_path / "absent.json", provider="scripted")
    assert "cannot read the plan" in missing.value.errors[0]


def test_a_real_provider_needs_a_model(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="--model is required"):
        call_command("run_experiment", str(EXAMPLE_PLAN), "--provider", "openai-chat")


PRICES = {"input": 3, "cacheRead": 0.3, "cacheWrite": 3.75, "output": 15}


@pytest.mark.parametrize("prices", [PRICES, {**PRICES, "input": 0}, None])
def test_prices_are_optional_and_take_the_model_configs_shape(
    example_plan: dict[str, Any], prices: dict[str, Any] | None
) -> None:
    example_plan["prices"] = prices
    assert plan_errors(example_plan, provider="scripted") == []


@pytest.mark.parametrize(
    ("prices", "expected"),
    [
        (
            "3 per million",
            "$.prices: prices must be an object {input, cacheRead, cacheWrite, output} of "
            "prices per million tokens, or null. (prices_not_object)",
        ),
        (
            {k: v for k, v in PRICES.items() if k != "cacheWrite"},
            "$.prices.cacheWrite: prices.cacheWrite is required when prices are given (per "
            "million tokens; 0 if it is free). (price_required)",
        ),
        (
            {**PRICES, "output": -1},
            "$.prices.output: prices.output must be between 0 and 1,000,000,000 per million "
            "tokens, got -1. (price_out_of_range)",
        ),
        (
            {**PRICES, "cacheRead": "0.3"},
            "$.prices.cacheRead: prices.cacheRead must be a number (per million tokens), not "
            "str. (price_wrong_type)",
        ),
        (
            {**PRICES, "cached": 0.3},
            "$.prices.cached: prices has no price 'cached'; the prices are input, cacheRead, "
            "cacheWrite, output. (price_unknown)",
        ),
    ],
)
def test_bad_prices_are_refused_saying_what_to_fix(
    example_plan: dict[str, Any], prices: Any, expected: str
) -> None:
    example_plan["prices"] = prices
    assert plan_errors(example_plan, provider="scripted") == [expected]


def test_the_command_refuses_bad_prices_before_running_anything(
    example_plan: dict[str, Any], tmp_path: Path
) -> None:
    example_plan["prices"] = {**PRICES, "input": -3}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(example_plan), encoding="utf-8")
    with pytest.raises(CommandError) as refused:
        call_command("run_experiment", str(path), "--provider", "scripted")
    assert "$.prices.input: prices.input must be between 0 and" in str(refused.value)
