"""A validated experiment plan as typed values (what `plan.load_plan` returns beside the JSON).

`plan.py` validates the JSON document (schema and cross-references); this module reads a
document that passed into frozen dataclasses, so the runner reads fields by name. Values the
runner hands on unread (protocol options, prices, session inputs, scripted steps, host tool
results) stay as the plan wrote them. Defaults here are the ones the runner always applied.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

GROUP_FAILS_STOP_EXPERIMENT = "stop_experiment"
# The agent's maintenance trigger when the plan names none (the AgentVersion's default).
DEFAULT_TRIGGER_RATIO = 0.75


@dataclass(frozen=True)
class ProtocolSpec:
    """A group's context protocol: catalog id, version and options ({} without)."""

    id: str
    version: int
    options: dict[str, Any]

    @property
    def key(self) -> str:
        return f"{self.id}@{self.version}"


@dataclass(frozen=True)
class GroupSpec:
    id: str
    label: str
    role: str | None
    protocol: ProtocolSpec


@dataclass(frozen=True)
class AgentSpec:
    """The agent every group shares; `maintainer_prompt` is None without a maintainer."""

    system_prompt: str
    session_inputs: dict[str, Any]
    max_input_tokens: int
    maintenance_trigger_ratio: float
    max_turns_per_run: int
    max_output_tokens: int | None
    maintainer_prompt: str | None


@dataclass(frozen=True)
class HostToolSpec:
    """A host tool and the fixed result the harness answers it with (as text)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    result: str


@dataclass(frozen=True)
class RunSpec:
    """One run of a stage's session: its input and the plan's checks (checks.plan_check)."""

    input: str
    expect: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class StageSpec:
    id: str
    title: str
    sessions: int
    runs: tuple[RunSpec, ...]


@dataclass(frozen=True)
class ScriptedStage:
    """A stage's scripted model steps: the default, and a group's own where it has them."""

    default: list[Any] | None
    groups: dict[str, list[Any]]

    def steps_for(self, group_id: str) -> list[Any] | None:
        return self.groups.get(group_id) or self.default


@dataclass(frozen=True)
class ScriptedSpec:
    """The plan's scripted section (what `--provider scripted` plays)."""

    wire_format: str | None
    maintainer_steps: list[Any] | None
    stages: dict[str, ScriptedStage]


@dataclass(frozen=True)
class Plan:
    name: str
    title: str
    registered_at: str | None
    agent: AgentSpec
    host_tools: tuple[HostToolSpec, ...]
    groups: tuple[GroupSpec, ...]
    # Per million tokens, as the plan wrote them (contract §8); None without.
    prices: dict[str, Any] | None
    budget_tokens: int
    stop_on_group_failure: bool
    provider_adaptation: dict[str, Any]
    stages: tuple[StageSpec, ...]
    scripted: ScriptedSpec | None

    @property
    def anthropic_prefill(self) -> bool:
        """Whether a trailing assistant state goes to Anthropic as a prefill."""
        return self.provider_adaptation.get("anthropicTrailingAssistantState") == "prefill"


def _host_tool(data: Mapping[str, Any]) -> HostToolSpec:
    result = data["result"]
    return HostToolSpec(
        name=data["name"],
        description=data["description"],
        input_schema=data.get("inputSchema") or {"type": "object"},
        result=result if isinstance(result, str) else json.dumps(result),
    )


def _group(data: Mapping[str, Any]) -> GroupSpec:
    protocol = data["protocol"]
    return GroupSpec(
        id=data["id"],
        label=data["label"],
        role=data.get("role"),
        protocol=ProtocolSpec(
            id=protocol["id"],
            version=protocol["version"],
            options=protocol.get("options") or {},
        ),
    )


def _agent(data: Mapping[str, Any]) -> AgentSpec:
    maintainer = data.get("maintainer")
    return AgentSpec(
        system_prompt=data["systemPrompt"],
        session_inputs=data.get("sessionInputs") or {},
        max_input_tokens=data["maxInputTokens"],
        maintenance_trigger_ratio=data.get("maintenanceTriggerRatio", DEFAULT_TRIGGER_RATIO),
        max_turns_per_run=data["maxTurnsPerRun"],
        max_output_tokens=data.get("maxOutputTokens") or None,
        maintainer_prompt=maintainer["systemPrompt"] if maintainer else None,
    )


def _stage(data: Mapping[str, Any]) -> StageSpec:
    return StageSpec(
        id=data["id"],
        title=data["title"],
        sessions=data["sessions"],
        runs=tuple(
            RunSpec(input=run["input"], expect=tuple(run.get("expect", []))) for run in data["runs"]
        ),
    )


def _scripted(data: Mapping[str, Any] | None) -> ScriptedSpec | None:
    if not data:
        return None
    return ScriptedSpec(
        wire_format=data.get("wireFormat") or None,
        maintainer_steps=data.get("maintainerSteps") or None,
        stages={
            stage_id: ScriptedStage(
                default=entry.get("default"), groups=dict(entry.get("groups") or {})
            )
            for stage_id, entry in data["stages"].items()
        },
    )


def plan_from(data: Mapping[str, Any]) -> Plan:
    """The typed plan of a document `plan.plan_errors` found nothing wrong with."""
    return Plan(
        name=data["name"],
        title=data["title"],
        registered_at=data.get("registeredAt"),
        agent=_agent(data["agent"]),
        host_tools=tuple(_host_tool(t) for t in data.get("hostTools", [])),
        groups=tuple(_group(g) for g in data["groups"]),
        prices=data.get("prices"),
        budget_tokens=int(data["budget"]["totalTokens"]),
        stop_on_group_failure=(
            data["stopConditions"]["groupFailsStage"] == GROUP_FAILS_STOP_EXPERIMENT
        ),
        provider_adaptation=data.get("providerAdaptation") or {},
        stages=tuple(_stage(s) for s in data["stages"]),
        scripted=_scripted(data.get("scripted")),
    )
