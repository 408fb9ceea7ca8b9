"""Drive a validated plan through its stages with the built-in runtime (docs/architecture.md: Labs).

The runner walks the stages: per stage, the eligible groups' sessions interleaved by
repetition, then each group's verdict and whether the experiment stops. `setup` creates the
Application and the agents, `host` plays the host for each run, `ledger` keeps the budget,
`results` builds the report. With the scripted model the versions carry the plan's scripts;
with a real provider they carry the connection — nothing else differs.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from labs.experiments import checks
from labs.experiments.host import play_run
from labs.experiments.ledger import Budget
from labs.experiments.plan import LoadedPlan
from labs.experiments.records import (
    NOT_RUN,
    STOP_BUDGET,
    STOP_GROUP_FAILED,
    RunRecord,
    SessionRecord,
    StageRecord,
    Stop,
)
from labs.experiments.results import build_report
from labs.experiments.setup import Group, Lab, ProviderSetup, build_lab
from labs.experiments.spec import StageSpec
from sessions_app.services.runs import runs_driven_here
from sessions_app.services.sessions import session_create


class ExperimentRunner:
    """Run one plan once; `run()` returns the report (a JSON-ready dict)."""

    def __init__(
        self,
        loaded: LoadedPlan,
        setup: ProviderSetup,
        *,
        out_dir: Path,
        progress: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.loaded = loaded
        self.plan = loaded.plan
        self.setup = setup
        self.out_dir = out_dir
        self.progress = progress
        self.budget = Budget(total=self.plan.budget_tokens)
        self.stop: Stop | None = None
        self.host_results = {t.name: t.result for t in self.plan.host_tools}

    def run(self) -> dict[str, Any]:
        """Set up the Application and agents, run every stage, return the report."""
        started = datetime.now(UTC)
        # The harness advances runs in this process; a Celery worker must not race it.
        with runs_driven_here():
            lab = build_lab(self.plan, self.setup, self.out_dir)
            eligible = list(lab.groups)
            for stage in self.plan.stages:
                eligible = self._stage(lab, stage, eligible)
        return build_report(
            self.loaded,
            lab,
            self.budget,
            self.stop,
            out_dir_name=self.out_dir.name,
            started=started,
            finished=datetime.now(UTC),
        )

    # ------------------------------------------------------------------ stages

    def _stage(self, lab: Lab, stage: StageSpec, eligible: list[Group]) -> list[Group]:
        """Run one stage for the eligible groups; return the groups that passed it."""
        records: dict[str, StageRecord] = {
            g.id: {"id": stage.id, "title": stage.title, "sessions": []} for g in lab.groups
        }
        ran = [g for g in eligible if self.stop is None]
        # Interleaved by repetition, so a budget stop or provider drift never hits one
        # group only.
        for repetition in range(1, stage.sessions + 1):
            for group in ran:
                if self.stop is not None:
                    break
                records[group.id]["sessions"].append(self._session(lab, group, stage, repetition))
        passed = []
        for group in lab.groups:
            record = records[group.id]
            if group not in ran or (self.stop is not None and not record["sessions"]):
                record["verdict"] = NOT_RUN
                record["reason"] = (
                    f"excluded: failed {group.failed_stage}"
                    if group.failed_stage
                    else f"experiment stopped: {self.stop['reason']}"
                    if self.stop
                    else "not eligible"
                )
            else:
                record["verdict"], record["reason"] = _stage_verdict(record, stage)
                if record["verdict"] == checks.PASS:
                    passed.append(group)
                elif record["verdict"] == checks.FAIL:
                    group.failed_stage = stage.id
            group.stages.append(record)
        failed = [g.id for g in ran if g.failed_stage == stage.id]
        if failed and self.stop is None and self.plan.stop_on_group_failure:
            self.stop = {"reason": STOP_GROUP_FAILED, "stage": stage.id, "groups": failed}
        return passed if self.stop is None else []

    def _session(self, lab: Lab, group: Group, stage: StageSpec, repetition: int) -> SessionRecord:
        version = lab.version(group, stage.id)
        session, _key = session_create(agent_version=version, inputs=self.plan.agent.session_inputs)
        record: SessionRecord = {
            "repetition": repetition,
            "sessionId": str(session.id),
            "agentVersionId": str(version.id),
            "runs": [],
        }
        memories: dict[int, dict[str, str]] = {}
        for number, spec in enumerate(stage.runs, start=1):
            if self.stop is not None:
                not_run: RunRecord = {
                    "session": repetition,
                    "number": number,
                    "input": spec.input,
                    "verdict": NOT_RUN,
                    "reason": f"experiment stopped: {self.stop['reason']}",
                }
                record["runs"].append(not_run)
                continue
            played = play_run(
                group,
                stage.id,
                session,
                number,
                spec,
                memories,
                budget=self.budget,
                host_results=self.host_results,
                scripted=self.setup.scripted,
            )
            if played.stopped and self.stop is None:
                self.stop = {
                    "reason": STOP_BUDGET,
                    "group": group.id,
                    "stage": stage.id,
                    "sessionId": str(session.id),
                    "run": number,
                    "spentTokens": self.budget.spent,
                }
            run_record = played.record
            run_record["session"] = repetition
            record["runs"].append(run_record)
            label = "scripted est." if self.setup.scripted else "reported"
            self.progress(
                f"[{stage.id} {repetition}/{stage.sessions}] {group.id:<8} "
                f"run {number}/{len(stage.runs)}  {run_record['verdict']:<8} "
                f"turns {run_record['turns']:>2}  tokens {run_record['tokens']['input']}+"
                f"{run_record['tokens']['output']} ({label})  "
                f"spent {self.budget.spent}/{self.budget.total}  session {str(session.id)[:8]}"
            )
        return record


def _stage_verdict(record: StageRecord, stage: StageSpec) -> tuple[str, str]:
    runs = [r for s in record["sessions"] for r in s["runs"]]
    expected = stage.sessions * len(stage.runs)
    failed = [r for r in runs if r["verdict"] == checks.FAIL]
    done = [r for r in runs if r["verdict"] == checks.PASS]
    if failed:
        where = ", ".join(f"session {r['session']} run {r['number']}" for r in failed)
        return checks.FAIL, f"{len(failed)} of {expected} run(s) failed ({where})"
    if len(done) < expected:
        return "incomplete", f"{len(done)} of {expected} run(s) passed before the stop"
    return checks.PASS, f"all {expected} run(s) passed"
