"""Drive a validated plan through its stages with the built-in runtime (SPEC §13).

Each experiment gets its own Application; each group an Agent whose AgentVersion carries
the group's protocol. Runs go through the same code as production (`run_start`,
`run_advance`, the dispatcher, maintenance); the harness only plays the host (answering
host tools with the plan's fixed results) and keeps the budget. With the scripted model
the versions carry the plan's scripts; with a real provider they carry the connection —
nothing else differs.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings

from agents.models import Agent, AgentVersion, Application, Tool
from agents.services import (
    agent_create,
    agent_version_create,
    agent_version_publish,
    application_create,
)
from contextproto.errors import EXPERIMENT_BUDGET_EXHAUSTED, ApplicationError
from contextproto.protocol import catalog
from contextproto.protocol.adapters import WireFormat
from contextproto.protocol.messages import KIND_TOOL_CALL, KIND_TOOL_RESULT
from contextproto.usage import TokenUsage, tokens_of, turn_cost
from labs.experiments import checks
from labs.experiments.plan import (
    PROVIDER_ANTHROPIC,
    PROVIDER_OPENAI,
    PROVIDER_SCRIPTED,
    LoadedPlan,
)
from sessions_app.maintenance import maintenance_execute
from sessions_app.models import MaintenanceJob, ProjectionSnapshot, Run, Session
from sessions_app.reads import raw_log
from sessions_app.services.messages import message_write
from sessions_app.services.runs import run_start, runs_driven_here
from sessions_app.services.runtime import TurnReport, run_advance
from sessions_app.services.sessions import session_create

STOP_BUDGET = "budget_exhausted"
STOP_GROUP_FAILED = "group_failed_stage"
# SPEC §4.5 wire format -> the AgentVersion's model.provider.
MODEL_PROVIDER: dict[str, str] = {PROVIDER_OPENAI: "openai", PROVIDER_ANTHROPIC: "anthropic"}
MAX_RETRY_WAIT_SECONDS = 120
SCRIPTED_LABEL = (
    "SCRIPTED REHEARSAL: every answer comes from the plan's script and token counts are "
    "estimates (characters / 4). This tests the instrument; it is not a model result."
)
MODEL_LABEL = "Real-model run: answers and token counts as the provider reported them."
DEFAULT_MAINTAINER_STEPS = [
    {"text": "Checkpoint: the work above is summarised; raw text stays readable."}
] * 50


def reports_root() -> Path:
    """Where experiment reports live (and where the admin page looks for them)."""
    configured = getattr(settings, "EXPERIMENT_REPORTS_DIR", None)
    return Path(configured) if configured else Path(settings.VAR_DIR) / "experiments"


def code_version() -> dict[str, Any]:
    """The commit the harness ran from, whether the tree had changes, the catalog's hash."""
    version: dict[str, Any] = {"commit": None, "dirty": None}
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=settings.BASE_DIR,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=settings.BASE_DIR,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
        version = {"commit": commit, "dirty": bool(status.strip())}
    except (OSError, subprocess.SubprocessError):
        pass  # no git (a deployed tree): the catalog fingerprint still identifies behaviour
    version["catalogFingerprint"] = catalog.fingerprint()
    return version


@dataclass(frozen=True)
class ProviderSetup:
    """What `--provider`, `--model`, `--base-url` and `--api-key-env` chose."""

    provider: str
    model: str
    base_url: str | None = None
    api_key_env: str | None = None


class BudgetExhausted(ApplicationError):
    """Raised from the turn callback: the runtime fails the run with this code and stops."""

    def __init__(self, spent: int, budget: int) -> None:
        super().__init__(
            EXPERIMENT_BUDGET_EXHAUSTED,
            f"the experiment's token budget is spent ({spent} of {budget}); the run stops here.",
            {"spentTokens": spent, "budgetTokens": budget},
        )


@dataclass
class Tokens:
    """Tokens of model calls as the provider reported them (or estimated, and then said).

    `input` counts every input token, cache reads and writes included (SPEC §15);
    `cache_read` and `cache_write` are the parts of it the provider read from or wrote to
    its prompt cache.
    """

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    calls: int = 0
    estimated_calls: int = 0

    def add(self, usage: dict[str, Any] | None) -> int:
        """Count one model call's usage; return the tokens it spent (input + output)."""
        usage = usage or {}
        # Lenient like the usage reports: missing counts are 0, cache counts fit the input.
        found = tokens_of(usage) or TokenUsage(0, 0)
        self.add_usage(found)
        self.estimated_calls += 1 if usage.get("estimated") else 0
        return found.input_tokens + found.output_tokens

    def add_usage(self, found: TokenUsage) -> None:
        """Count one model call's tokens by kind."""
        self.input += found.input_tokens
        self.output += found.output_tokens
        self.cache_read += found.cache_read_input_tokens
        self.cache_write += found.cache_write_input_tokens
        self.calls += 1

    def merge(self, other: Tokens) -> None:
        self.input += other.input
        self.output += other.output
        self.cache_read += other.cache_read
        self.cache_write += other.cache_write
        self.calls += other.calls
        self.estimated_calls += other.estimated_calls

    @property
    def usage(self) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.input,
            output_tokens=self.output,
            cache_read_input_tokens=self.cache_read,
            cache_write_input_tokens=self.cache_write,
        )

    def to_dict(self, scripted: bool) -> dict[str, Any]:
        if scripted:
            source = "scripted-estimate"
        elif self.estimated_calls:
            source = f"provider-reported; {self.estimated_calls} call(s) estimated (no usage sent)"
        else:
            source = "provider-reported"
        return {
            "input": self.input,
            "uncachedInput": self.usage.uncached_input_tokens,
            "cacheRead": self.cache_read,
            "cacheWrite": self.cache_write,
            "output": self.output,
            "total": self.input + self.output,
            "calls": self.calls,
            "source": source,
        }


def group_cost(
    tokens: Tokens, maintenance: Tokens, prices: dict[str, Any] | None
) -> dict[str, float] | None:
    """SPEC §15's cost of a group's model calls at the plan's prices; None without prices.

    The formula is linear in the token counts, so the cost of the summed calls is the sum
    of the calls' costs; uncached input is the input less cache reads and writes.
    """
    agent, upkeep = turn_cost(tokens.usage, prices), turn_cost(maintenance.usage, prices)
    if agent is None or upkeep is None:
        return None
    return {"agent": float(agent), "maintenance": float(upkeep), "total": float(agent + upkeep)}


@dataclass
class GroupState:
    spec: dict[str, Any]
    agent: Agent
    versions: dict[str, AgentVersion] = field(default_factory=dict)
    stages: list[dict[str, Any]] = field(default_factory=list)
    failed_stage: str | None = None
    tokens: Tokens = field(default_factory=Tokens)
    maintenance_tokens: Tokens = field(default_factory=Tokens)
    state_checks: list[dict[str, Any]] = field(default_factory=list)
    provider_errors: list[dict[str, Any]] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.spec["id"]


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
        self.plan = loaded.data
        self.setup = setup
        self.out_dir = out_dir
        self.progress = progress
        self.scripted = setup.provider == PROVIDER_SCRIPTED
        self.budget = int(self.plan["budget"]["totalTokens"])
        self.spent = 0
        self.stop: dict[str, Any] | None = None
        self.host_results = {
            t["name"]: t["result"] if isinstance(t["result"], str) else json.dumps(t["result"])
            for t in self.plan.get("hostTools", [])
        }
        self._charged_jobs: dict[str, int] = {}
        self._charged_usage: dict[str, TokenUsage] = {}

    # ------------------------------------------------------------------ entry point

    def run(self) -> dict[str, Any]:
        """Set up the Application and agents, run every stage, return the report."""
        started = datetime.now(UTC)
        # The harness advances runs in this process; a Celery worker must not race it.
        with runs_driven_here():
            self.application = self._application()
            self.groups = [self._group(spec) for spec in self.plan["groups"]]
            eligible = list(self.groups)
            for stage in self.plan["stages"]:
                eligible = self._stage(stage, eligible)
        return self._report(started, datetime.now(UTC))

    # ------------------------------------------------------------------ setup

    def _application(self) -> Application:
        name = f"experiment {self.plan['name']} {self.out_dir.name}"[:200]
        application, _key = application_create(name=name)  # the key is not needed: no API
        for tool in self.plan.get("hostTools", []):
            Tool.objects.create(
                application=application,
                name=tool["name"],
                description=tool["description"],
                input_schema=tool.get("inputSchema") or {"type": "object"},
            )
        self.maintainer = self._maintainer(application)
        return application

    def _connection_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {}
        if self.setup.base_url:
            config["baseUrl"] = self.setup.base_url
        if self.setup.api_key_env:
            config["apiKeyEnv"] = self.setup.api_key_env
        if self.plan["agent"].get("maxOutputTokens"):
            config["maxOutputTokens"] = self.plan["agent"]["maxOutputTokens"]
        if self.setup.provider == PROVIDER_ANTHROPIC:
            adaptation = self.plan.get("providerAdaptation") or {}
            # The adapter keeps a trailing assistant state in the assistant role (a prefill)
            # only for a model said to accept it (docs/decisions.md).
            config["assistantPrefill"] = (
                adaptation.get("anthropicTrailingAssistantState") == "prefill"
            )
        return config

    def _maintainer(self, application: Application) -> Agent | None:
        spec = self.plan["agent"].get("maintainer")
        if not spec:
            return None
        agent = agent_create(application=application, name="context-maintainer")
        if self.scripted:
            steps = (self.plan.get("scripted") or {}).get("maintainerSteps")
            config: dict[str, Any] = {"steps": steps or DEFAULT_MAINTAINER_STEPS}
        else:
            config = self._connection_config()
            config.pop("assistantPrefill", None)
        version = agent_version_create(
            agent=agent,
            fields={
                "system_prompt": spec["systemPrompt"],
                "context_protocol_id": "prefix",
                "context_protocol_version": 2,
                "model_provider": self._model_provider(),
                "model_name": self.setup.model,
                "max_input_tokens": self.plan["agent"]["maxInputTokens"],
                "model_config": config,
                # The plan's prices, so the sessions' usage shows the same cost everywhere.
                "prices": self.plan.get("prices"),
            },
        )
        agent_version_publish(version=version)
        return agent

    def _model_provider(self) -> str:
        return "scripted" if self.scripted else MODEL_PROVIDER[self.setup.provider]

    def _group(self, spec: dict[str, Any]) -> GroupState:
        agent = agent_create(application=self.application, name=f"{spec['id']}: {spec['label']}")
        return GroupState(spec=spec, agent=agent)

    def _model_config(self, group: GroupState, stage_id: str) -> dict[str, Any]:
        if not self.scripted:
            return self._connection_config()
        scripted = self.plan["scripted"]
        entry = scripted["stages"][stage_id]
        steps = (entry.get("groups") or {}).get(group.id) or entry["default"]
        config: dict[str, Any] = {
            "description": f"scripted: group {group.id}, stage {stage_id}",
            "steps": steps,
        }
        if scripted.get("wireFormat"):
            config["wireFormat"] = scripted["wireFormat"]
        return config

    def _version(self, group: GroupState, stage_id: str) -> AgentVersion:
        """The group's published version for this stage (one per distinct model config)."""
        config = self._model_config(group, stage_id)
        key = json.dumps(config, sort_keys=True)
        if key not in group.versions:
            agent = self.plan["agent"]
            protocol = group.spec["protocol"]
            version = agent_version_create(
                agent=group.agent,
                fields={
                    "system_prompt": agent["systemPrompt"],
                    "context_protocol_id": protocol["id"],
                    "context_protocol_version": protocol["version"],
                    "options": protocol.get("options") or {},
                    "model_provider": self._model_provider(),
                    "model_name": self.setup.model,
                    "max_input_tokens": agent["maxInputTokens"],
                    "maintenance_trigger_ratio": agent.get("maintenanceTriggerRatio", 0.75),
                    "model_config": config,
                    "prices": self.plan.get("prices"),
                    "max_turns_per_run": agent["maxTurnsPerRun"],
                },
                tool_ids=list(self.application.tools.values_list("id", flat=True)),
                maintainer_agent_id=self.maintainer.id if self.maintainer else None,
            )
            group.versions[key] = agent_version_publish(version=version)
        return group.versions[key]

    # ------------------------------------------------------------------ stages

    def _stage(self, stage: dict[str, Any], eligible: list[GroupState]) -> list[GroupState]:
        """Run one stage for the eligible groups; return the groups that passed it."""
        records = {
            g.id: {"id": stage["id"], "title": stage["title"], "sessions": []} for g in self.groups
        }
        ran = [g for g in eligible if self.stop is None]
        # Interleaved by repetition, so a budget stop or provider drift never hits one
        # group only.
        for repetition in range(1, stage["sessions"] + 1):
            for group in ran:
                if self.stop is not None:
                    break
                records[group.id]["sessions"].append(self._session(group, stage, repetition))
        passed = []
        for group in self.groups:
            record = records[group.id]
            if group not in ran or (self.stop is not None and not record["sessions"]):
                record["verdict"] = "not_run"
                record["reason"] = (
                    f"excluded: failed {group.failed_stage}"
                    if group.failed_stage
                    else f"experiment stopped: {self.stop['reason']}"
                    if self.stop
                    else "not eligible"
                )
            else:
                record["verdict"], record["reason"] = self._stage_verdict(record, stage)
                if record["verdict"] == checks.PASS:
                    passed.append(group)
                elif record["verdict"] == checks.FAIL:
                    group.failed_stage = stage["id"]
            group.stages.append(record)
        failed = [g.id for g in ran if g.failed_stage == stage["id"]]
        if (
            failed
            and self.stop is None
            and self.plan["stopConditions"]["groupFailsStage"] == "stop_experiment"
        ):
            self.stop = {"reason": STOP_GROUP_FAILED, "stage": stage["id"], "groups": failed}
        return passed if self.stop is None else []

    def _stage_verdict(self, record: dict[str, Any], stage: dict[str, Any]) -> tuple[str, str]:
        runs = [r for s in record["sessions"] for r in s["runs"]]
        expected = stage["sessions"] * len(stage["runs"])
        failed = [r for r in runs if r["verdict"] == checks.FAIL]
        done = [r for r in runs if r["verdict"] == checks.PASS]
        if failed:
            where = ", ".join(f"session {r['session']} run {r['number']}" for r in failed)
            return checks.FAIL, f"{len(failed)} of {expected} run(s) failed ({where})"
        if len(done) < expected:
            return "incomplete", f"{len(done)} of {expected} run(s) passed before the stop"
        return checks.PASS, f"all {expected} run(s) passed"

    def _session(self, group: GroupState, stage: dict[str, Any], repetition: int) -> dict[str, Any]:
        version = self._version(group, stage["id"])
        session, _key = session_create(
            agent_version=version, inputs=self.plan["agent"].get("sessionInputs") or {}
        )
        record: dict[str, Any] = {
            "repetition": repetition,
            "sessionId": str(session.id),
            "agentVersionId": str(version.id),
            "runs": [],
        }
        memories: dict[int, dict[str, str]] = {}
        for number, spec in enumerate(stage["runs"], start=1):
            if self.stop is not None:
                record["runs"].append(
                    {
                        "session": repetition,
                        "number": number,
                        "input": spec["input"],
                        "verdict": "not_run",
                        "reason": f"experiment stopped: {self.stop['reason']}",
                    }
                )
                continue
            run_record = self._run(group, stage, session, number, spec, memories)
            run_record["session"] = repetition
            record["runs"].append(run_record)
            self.progress(
                f"[{stage['id']} {repetition}/{stage['sessions']}] {group.id:<8} "
                f"run {number}/{len(stage['runs'])}  {run_record['verdict']:<8} "
                f"turns {run_record['turns']:>2}  tokens {run_record['tokens']['input']}+"
                f"{run_record['tokens']['output']} ({self._token_label()})  "
                f"spent {self.spent}/{self.budget}  session {str(session.id)[:8]}"
            )
        return record

    def _token_label(self) -> str:
        return "scripted est." if self.scripted else "reported"

    # ------------------------------------------------------------------ one run

    def _run(
        self,
        group: GroupState,
        stage: dict[str, Any],
        session: Session,
        number: int,
        spec: dict[str, Any],
        memories: dict[int, dict[str, str]],
    ) -> dict[str, Any]:
        run, _ = run_start(session_id=session.id, content=spec["input"])
        tokens, maintenance = Tokens(), Tokens()
        charged: set[str] = set()

        def on_turn(turn: TurnReport) -> None:
            # Maintenance a turn queued runs here, in order, so the next turn sees it (a
            # worker could race the harness; inside a test transaction nothing else runs it).
            for job_id in MaintenanceJob.objects.filter(
                session=session, status=MaintenanceJob.Status.QUEUED, external=False
            ).values_list("id", flat=True):
                maintenance_execute(job_id=job_id)
            for snapshot in ProjectionSnapshot.objects.filter(run=run, usage__isnull=False):
                if str(snapshot.id) not in charged:
                    charged.add(str(snapshot.id))
                    self.spent += tokens.add(snapshot.usage)
            self.spent += self._charge_maintenance(session, maintenance)
            if self.spent >= self.budget and turn.outcome != Run.Status.COMPLETED:
                raise BudgetExhausted(self.spent, self.budget)

        status = run_advance(run_id=run.id, on_turn=on_turn)
        while status in (Run.Status.WAITING_FOR_HOST_TOOL, Run.Status.QUEUED):
            if status == Run.Status.QUEUED:
                # A transient provider error re-queued the run (bounded by the runtime).
                run.refresh_from_db()
                wait = (run.error or {}).get("retryInSeconds", 5)
                time.sleep(min(float(wait), MAX_RETRY_WAIT_SECONDS))
            else:
                self._answer_host_calls(session)
            status = run_advance(run_id=run.id, on_turn=on_turn)
        self.spent += self._charge_maintenance(session, maintenance)
        group.tokens.merge(tokens)
        group.maintenance_tokens.merge(maintenance)

        facts = checks.run_facts(session, run)
        memories[number] = checks.memory_slots(session)
        protocol = group.spec["protocol"]
        designed = checks.designed_state(
            protocol["id"], protocol["version"], protocol.get("options") or {}
        )
        found = [
            checks.check_completed(facts),
            checks.check_state_message(facts, designed),
            checks.check_wrong_window_writes(facts),
            checks.check_read_back(facts),
            checks.check_repeated_calls(facts),
        ] + [
            checks.plan_check(c, facts, group_id=group.id, memories_after=memories)
            for c in spec.get("expect", [])
        ]
        group.state_checks += [c.to_dict() for c in found if c.name == "stateMessage"]
        stopped = (run.error or {}).get("code") == EXPERIMENT_BUDGET_EXHAUSTED
        if stopped and self.stop is None:
            self.stop = {
                "reason": STOP_BUDGET,
                "group": group.id,
                "stage": stage["id"],
                "sessionId": str(session.id),
                "run": number,
                "spentTokens": self.spent,
            }
        if run.status == Run.Status.FAILED and not stopped:
            group.provider_errors.append({"stage": stage["id"], "run": number, **(run.error or {})})
        return {
            "number": number,
            "input": spec["input"],
            "runId": run.id.hex,
            "status": run.status,
            "verdict": "stopped" if stopped else checks.verdict(found),
            "turns": run.turns,
            "answer": checks.answer_preview(facts),
            "toolCalls": [c.tool_name for c in facts.calls],
            "checks": [c.to_dict() for c in found],
            "tokens": tokens.to_dict(self.scripted),
            "maintenanceTokens": maintenance.to_dict(self.scripted),
            "snapshotIds": [str(s.id) for s in facts.snapshots],
        }

    def _charge_maintenance(self, session: Session, tokens: Tokens) -> int:
        """Charge the maintainer's calls of `session` not yet charged; return the new tokens."""
        spent = 0
        for job_id, usage in MaintenanceJob.objects.filter(
            session=session, summarizer_usage__isnull=False
        ).values_list("id", "summarizer_usage"):
            usage = usage or {}  # the filter excludes NULL; the JSON type allows it
            total = int(usage.get("inputTokens", 0)) + int(usage.get("outputTokens", 0))
            before = self._charged_jobs.get(str(job_id), 0)
            if total > before:
                # One job may call the maintainer twice (a shorter retry), its usage summed
                # over both: charge the delta, by kind, so nothing is counted twice.
                self._charged_jobs[str(job_id)] = total
                current = tokens_of(usage) or TokenUsage(0, 0)
                previous = self._charged_usage.get(str(job_id)) or TokenUsage(0, 0)
                self._charged_usage[str(job_id)] = current
                tokens.add_usage(
                    TokenUsage(
                        input_tokens=current.input_tokens - previous.input_tokens,
                        output_tokens=current.output_tokens - previous.output_tokens,
                        cache_read_input_tokens=current.cache_read_input_tokens
                        - previous.cache_read_input_tokens,
                        cache_write_input_tokens=current.cache_write_input_tokens
                        - previous.cache_write_input_tokens,
                    )
                )
                spent += total - before
        return spent

    def _answer_host_calls(self, session: Session) -> None:
        """Play the host: answer every unanswered host tool call with the plan's result."""
        session.refresh_from_db()
        log = raw_log.log_page(session.id, window_id=None, after_index=0, limit=session.last_index)
        answered = {m.tool_call_id for m in log if m.kind == KIND_TOOL_RESULT}
        for call in log:
            if (
                call.kind == KIND_TOOL_CALL
                and call.tool_call_id not in answered
                and call.tool_name in self.host_results
            ):
                message_write(
                    session_id=session.id,
                    role="tool",
                    kind=KIND_TOOL_RESULT,
                    content=self.host_results[call.tool_name],
                    tool_call_id=call.tool_call_id,
                )

    # ------------------------------------------------------------------ report

    def _wire_format(self) -> str:
        if self.scripted:
            return (self.plan.get("scripted") or {}).get("wireFormat") or WireFormat.NEUTRAL
        return self.setup.provider

    def _comparability(self, group: GroupState) -> dict[str, Any]:
        protocol = group.spec["protocol"]
        designed = checks.designed_state(
            protocol["id"], protocol["version"], protocol.get("options") or {}
        )
        wire = self._wire_format()
        if designed is None:
            return {
                "comparable": True,
                "reason": "no state message: compared on answers, tool calls and cost only",
            }
        observed: set[tuple[str, str]] = set()
        notes: set[str] = set()
        for check in group.state_checks:
            data = check.get("data") or {}
            observed |= {(o["role"], o["position"]) for o in data.get("observed", [])}
            notes |= set(data.get("adapterNotes", []))
        rejected = [
            e for e in group.provider_errors if e.get("code") == "provider_request_rejected"
        ]
        if not observed:
            reason = "no provider request was recorded"
            if rejected:
                reason = f"the provider rejected the request: {rejected[0].get('message')}"
            return {"comparable": None, "reason": reason, "designed": list(designed)}
        as_designed = observed == {designed}
        sent = ", ".join(f"{r}/{p}" for r, p in sorted(observed))
        result: dict[str, Any] = {
            "comparable": as_designed,
            "designed": {"role": designed[0], "position": designed[1]},
            "observed": [{"role": r, "position": p} for r, p in sorted(observed)],
            "adapterNotes": sorted(notes),
        }
        if as_designed:
            result["reason"] = f"state message sent as designed ({sent}) on {wire}"
            if any("prefill" in n for n in notes):
                result["reason"] += "; as an assistant prefill (the model continues that turn)"
        else:
            result["reason"] = (
                f"not comparable on {wire}: the state message was sent as {sent}, designed "
                f"{designed[0]}/{designed[1]}" + (f" ({'; '.join(sorted(notes))})" if notes else "")
            )
        return result

    def _report(self, started: datetime, finished: datetime) -> dict[str, Any]:
        prices = self.plan.get("prices")
        groups = []
        for group in self.groups:
            protocol = group.spec["protocol"]
            runs = [r for s in group.stages for ss in s["sessions"] for r in ss["runs"]]
            repeated = sum(
                (c.get("data") or {}).get("repeated", 0)
                for r in runs
                for c in r.get("checks", [])
                if c["name"] == "repeatedToolCalls"
            )
            last = next((s for s in reversed(group.stages) if s["verdict"] != "not_run"), None)
            if group.failed_stage:
                outcome = f"failed {group.failed_stage}"
            elif all(s["verdict"] == checks.PASS for s in group.stages):
                outcome = "passed every stage"
            elif last is None:
                outcome = "not run"
            else:
                outcome = f"stopped in {last['id']} ({last['verdict']})"
            groups.append(
                {
                    "id": group.id,
                    "label": group.spec["label"],
                    "role": group.spec.get("role"),
                    "protocol": f"{protocol['id']}@{protocol['version']}",
                    "options": protocol.get("options") or {},
                    "agentId": str(group.agent.id),
                    "agentVersionIds": [str(v.id) for v in group.versions.values()],
                    "outcome": outcome,
                    "failedStage": group.failed_stage,
                    "comparability": self._comparability(group),
                    "tokens": group.tokens.to_dict(self.scripted),
                    "maintenanceTokens": group.maintenance_tokens.to_dict(self.scripted),
                    "cost": group_cost(group.tokens, group.maintenance_tokens, prices),
                    "runs": {
                        "total": len([r for r in runs if r["verdict"] != "not_run"]),
                        "passed": len([r for r in runs if r["verdict"] == checks.PASS]),
                    },
                    "repeatedToolCalls": repeated,
                    "providerErrors": group.provider_errors,
                    "stages": group.stages,
                }
            )
        return {
            "reportVersion": 1,
            "resultsKind": "scripted" if self.scripted else "model",
            "label": SCRIPTED_LABEL if self.scripted else MODEL_LABEL,
            "plan": {
                "name": self.plan["name"],
                "title": self.plan["title"],
                "path": self.loaded.path,
                "sha256": self.loaded.sha256,
                "registeredAt": self.plan.get("registeredAt"),
            },
            "codeVersion": code_version(),
            "provider": self.setup.provider,
            "wireFormat": self._wire_format(),
            "model": self.setup.model,
            "providerAdaptation": self.plan.get("providerAdaptation") or {},
            "startedAt": started.isoformat(),
            "finishedAt": finished.isoformat(),
            "applicationId": str(self.application.id),
            "outDir": self.out_dir.name,
            "budget": {
                "totalTokens": self.budget,
                "spentTokens": self.spent,
                "exhausted": self.spent >= self.budget,
            },
            "stop": self.stop,
            # Per million tokens, SPEC §15; each group's `cost` uses them (null without).
            "prices": prices,
            "stages": [{"id": s["id"], "title": s["title"]} for s in self.plan["stages"]],
            "groups": groups,
        }


def new_out_dir(plan_name: str, provider: str) -> Path:
    """A fresh directory under the reports root: `<UTC time>-<plan>-<provider>-<id>`."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return reports_root() / f"{stamp}-{plan_name}-{provider}-{uuid.uuid4().hex[:6]}"
