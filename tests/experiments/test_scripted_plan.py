"""The example plan end to end with the scripted model (offline), and the stop conditions."""

from __future__ import annotations

from typing import Any

import pytest

from agents.models import Agent
from sessions_app.models import Run, Session
from tests.experiments.conftest import check, group, runs, stage

pytestmark = pytest.mark.django_db

WRONG_INTENT = [{"text": "I will schedule the delivery for Tuesday."}]


def keep_stages(plan: dict[str, Any], *stage_ids: str) -> None:
    plan["stages"] = [s for s in plan["stages"] if s["id"] in stage_ids]
    scripted = plan["scripted"]["stages"]
    for stage_id in list(scripted):
        if stage_id not in stage_ids:
            del scripted[stage_id]


def test_the_example_plan_runs_end_to_end_with_the_scripted_model(
    example_plan: dict[str, Any], run_plan: Any
) -> None:
    report, stdout = run_plan(example_plan)

    # Labelled as a rehearsal everywhere: never presented as model results.
    assert report["resultsKind"] == "scripted"
    assert "not a model result" in report["label"]
    assert "SCRIPTED REHEARSAL" in stdout and "(SCRIPTED REHEARSAL, not model results)" in stdout
    assert report["provider"] == "scripted" and report["wireFormat"] == "openai-chat"
    assert len(report["plan"]["sha256"]) == 64 and report["codeVersion"]["catalogFingerprint"]
    assert report["stop"] is None and not report["budget"]["exhausted"]
    assert stdout.count("[stage") == 18 + 10 + 15  # a progress line per run

    # The v2 sentinel is scripted to answer the wrong question: it fails stage 1 and is
    # excluded from stages 2 and 3 (no session created for it there).
    v2 = group(report, "v2")
    assert v2["failedStage"] == "stage1" and v2["outcome"] == "failed stage1"
    assert [s["verdict"] for s in v2["stages"]] == ["fail", "not_run", "not_run"]
    assert stage(report, "v2", "stage2")["sessions"] == []
    failed = runs(report, "v2", "stage1")[0]
    assert check(failed, "expect.contains")["status"] == "fail"
    assert check(failed, "expect.notContains")["status"] == "fail"
    assert Session.objects.filter(agent_version__agent_id=v2["agentId"]).count() == 3

    for group_id in ("A", "B", "C", "u4", "prefix"):
        entry = group(report, group_id)
        assert [s["verdict"] for s in entry["stages"]] == ["pass", "pass", "pass"], group_id
        assert entry["runs"] == {"total": 8, "passed": 8}
        assert entry["tokens"]["source"] == "scripted-estimate"
        # Stage 3 is one conversation: one session, three runs, a new input each.
        sessions = stage(report, group_id, "stage3")["sessions"]
        assert len(sessions) == 1
        session = Session.objects.get(pk=sessions[0]["sessionId"])
        stage3 = sessions[0]["runs"]
        assert [r["number"] for r in stage3] == [1, 2, 3]
        assert {r["runId"] for r in stage3} == {
            r.id.hex for r in Run.objects.filter(session=session)
        }
        assert len({r["runId"] for r in stage3}) == 3
        assert all(r["snapshotIds"] for r in stage3)

    designed = {
        "A": {"role": "assistant", "position": "trailing"},
        "B": {"role": "assistant", "position": "before_history"},
        "C": {"role": "user", "position": "trailing"},
        # unified@4 without options: its catalog default, the state trailing as user.
        "u4": {"role": "user", "position": "trailing"},
    }
    for group_id, sent in designed.items():
        entry = group(report, group_id)
        assert entry["comparability"]["comparable"] is True
        assert entry["comparability"]["observed"] == [sent]
        run1, run2, run3 = runs(report, group_id, "stage3")
        assert check(run1, "stateMessage")["data"]["observed"] == [sent]
        # The scripted model writes memory while still believing it is in `quote`.
        refused = check(run2, "wrongWindowWrites")
        assert refused["status"] == "pass"
        assert refused["data"]["refused"][0]["code"] == "context_window_mismatch"
        assert refused["data"]["refused"][0]["modelContinued"] is True
        assert check(run3, "expect.memoryKept")["status"] == "pass"
        read_back = check(run3, "readBack")
        assert read_back["status"] == "pass"
        assert read_back["data"]["folds"][0]["compressed"] is True
        assert read_back["data"]["compressedWindows"]["quote"]["coveredThrough"] > 0
        assert check(run3, "expect.kvEquals")["status"] == "pass"

    prefix = group(report, "prefix")
    assert prefix["comparability"]["comparable"] is True
    last = runs(report, "prefix", "stage3")[2]
    assert check(last, "stateMessage")["status"] == "n/a"
    assert check(last, "readBack")["status"] == "n/a"
    assert "nothing is claimed" in check(last, "readBack")["detail"]
    assert check(last, "expect.kvEquals")["status"] == "n/a"


def test_a_low_budget_ends_the_running_run_early_and_stops_the_experiment(
    example_plan: dict[str, Any], run_plan: Any
) -> None:
    keep_stages(example_plan, "stage3")  # straight to the conversation
    example_plan["budget"]["totalTokens"] = 9000
    report, stdout = run_plan(example_plan)

    assert report["budget"]["exhausted"] is True
    assert report["stop"]["reason"] == "budget_exhausted"
    assert report["stop"]["group"] == "A" and report["stop"]["run"] == 1
    assert "Stopped: budget exhausted during group A" in stdout
    first, second, third = runs(report, "A", "stage3")
    assert first["verdict"] == "stopped"
    assert 0 < first["turns"] < 8  # the script has 8 turns in run 1
    run = Run.objects.get(id=first["runId"])
    assert run.status == Run.Status.FAILED and run.error["code"] == "experiment_budget_exhausted"
    assert [second["verdict"], third["verdict"]] == ["not_run", "not_run"]
    assert stage(report, "A", "stage3")["verdict"] == "incomplete"
    for group_id in ("B", "C", "u4", "v2", "prefix"):
        entry = stage(report, group_id, "stage3")
        assert entry["verdict"] == "not_run" and entry["sessions"] == []
        assert "budget_exhausted" in entry["reason"]
    assert Session.objects.filter(application_id=report["applicationId"]).count() == 1


def test_a_group_failing_a_stage_stops_at_that_stage(
    example_plan: dict[str, Any], run_plan: Any
) -> None:
    keep_stages(example_plan, "stage1", "stage2")
    example_plan["stages"][0]["sessions"] = 1
    example_plan["stages"][1]["sessions"] = 1
    scripted = example_plan["scripted"]["stages"]
    scripted["stage1"]["groups"] = {"C": WRONG_INTENT}
    report, _ = run_plan(example_plan)

    c = group(report, "C")
    assert c["failedStage"] == "stage1"
    assert stage(report, "C", "stage2") == {
        "id": "stage2",
        "title": example_plan["stages"][1]["title"],
        "sessions": [],
        "verdict": "not_run",
        "reason": "excluded: failed stage1",
    }
    agent = Agent.objects.get(id=c["agentId"])
    assert Session.objects.filter(agent_version__agent=agent).count() == 1
    for group_id in ("A", "B", "u4", "v2", "prefix"):
        assert stage(report, group_id, "stage2")["verdict"] == "pass", group_id


def test_stop_experiment_on_a_failed_stage_runs_no_later_stage(
    example_plan: dict[str, Any], run_plan: Any
) -> None:
    keep_stages(example_plan, "stage1", "stage2")
    example_plan["stages"][0]["sessions"] = 1
    example_plan["stopConditions"]["groupFailsStage"] = "stop_experiment"
    report, _ = run_plan(example_plan)

    assert report["stop"] == {"reason": "group_failed_stage", "stage": "stage1", "groups": ["v2"]}
    assert all(stage(report, g["id"], "stage2")["verdict"] == "not_run" for g in report["groups"])
    assert group(report, "A")["outcome"] == "stopped in stage1 (pass)"


def test_with_prices_each_group_costs_its_agent_and_maintainer_tokens(
    example_plan: dict[str, Any], run_plan: Any
) -> None:
    keep_stages(example_plan, "stage3")  # the conversation: it asks the maintainer once
    example_plan["groups"] = [g for g in example_plan["groups"] if g["id"] in ("u4", "prefix")]
    for run in example_plan["stages"][0]["runs"]:
        for expect in run.get("expect", []):
            if "appliesTo" in expect:
                expect["appliesTo"] = ["u4"]
    example_plan["prices"] = {"input": 2, "cacheRead": 0.2, "cacheWrite": 2.5, "output": 8}
    report, stdout = run_plan(example_plan)

    for group_id in ("u4", "prefix"):
        entry = group(report, group_id)
        tokens, upkeep = entry["tokens"], entry["maintenanceTokens"]
        # The scripted model reports no cache: every input token is uncached.
        assert (tokens["cacheRead"], tokens["cacheWrite"]) == (0, 0)
        assert tokens["uncachedInput"] == tokens["input"] > 0
        agent = (tokens["input"] * 2 + tokens["output"] * 8) / 1_000_000
        maintenance = (upkeep["input"] * 2 + upkeep["output"] * 8) / 1_000_000
        assert entry["cost"] == {
            "agent": pytest.approx(agent),
            "maintenance": pytest.approx(maintenance),
            "total": pytest.approx(agent + maintenance),
        }
    assert group(report, "u4")["maintenanceTokens"]["calls"] >= 1
    # Scripted costs are labelled estimates like the tokens they come from.
    row = next(line for line in stdout.splitlines() if line.startswith("| u4 "))
    assert f"{group(report, 'u4')['cost']['total']:.4f} (est.)" in row
    assert "per million tokens (the plan's prices; contract §8) on scripted estimates" in stdout
