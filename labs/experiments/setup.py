"""Set an experiment up: its Application, host tools, maintainer, and an Agent per group.

Each experiment gets its own Application; each group an Agent whose AgentVersion carries the
group's protocol, one published version per distinct model config (with the scripted model,
a stage's script; with a real provider, the connection). Also where reports live.
"""

from __future__ import annotations

import json
import uuid
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
from contextproto.protocol.adapters import WireFormat
from labs.experiments.ledger import Tokens
from labs.experiments.plan import PROVIDER_ANTHROPIC, PROVIDER_OPENAI, PROVIDER_SCRIPTED
from labs.experiments.records import StageRecord
from labs.experiments.spec import GroupSpec, Plan

# contract §4.5 wire format -> the AgentVersion's model.provider.
MODEL_PROVIDER: dict[str, str] = {PROVIDER_OPENAI: "openai", PROVIDER_ANTHROPIC: "anthropic"}
DEFAULT_MAINTAINER_STEPS = [
    {"text": "Checkpoint: the work above is summarised; raw text stays readable."}
] * 50


def reports_root() -> Path:
    """Where experiment reports live (and where the admin page looks for them)."""
    configured = getattr(settings, "EXPERIMENT_REPORTS_DIR", None)
    return Path(configured) if configured else Path(settings.VAR_DIR) / "experiments"


def new_out_dir(plan_name: str, provider: str) -> Path:
    """A fresh directory under the reports root: `<UTC time>-<plan>-<provider>-<id>`."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return reports_root() / f"{stamp}-{plan_name}-{provider}-{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class ProviderSetup:
    """What `--provider`, `--model`, `--base-url` and `--api-key-env` chose."""

    provider: str
    model: str
    base_url: str | None = None
    api_key_env: str | None = None

    @property
    def scripted(self) -> bool:
        return self.provider == PROVIDER_SCRIPTED

    @property
    def model_provider(self) -> str:
        """The AgentVersion's model.provider."""
        return "scripted" if self.scripted else MODEL_PROVIDER[self.provider]

    def wire_format(self, plan: Plan) -> str:
        """The wire format the requests were built for."""
        if self.scripted:
            return (plan.scripted.wire_format if plan.scripted else None) or WireFormat.NEUTRAL
        return self.provider


@dataclass
class Group:
    """A group as it runs: its Agent, versions, stage records and what it spent."""

    spec: GroupSpec
    agent: Agent
    versions: dict[str, AgentVersion] = field(default_factory=dict)
    stages: list[StageRecord] = field(default_factory=list)
    failed_stage: str | None = None
    tokens: Tokens = field(default_factory=Tokens)
    maintenance_tokens: Tokens = field(default_factory=Tokens)
    state_checks: list[dict[str, Any]] = field(default_factory=list)
    provider_errors: list[dict[str, Any]] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.spec.id


@dataclass
class Lab:
    """What the setup created for one experiment run."""

    plan: Plan
    provider: ProviderSetup
    application: Application
    maintainer: Agent | None
    groups: list[Group]

    def version(self, group: Group, stage_id: str) -> AgentVersion:
        """The group's published version for this stage (one per distinct model config)."""
        config = self._model_config(group, stage_id)
        key = json.dumps(config, sort_keys=True)
        if key not in group.versions:
            agent = self.plan.agent
            protocol = group.spec.protocol
            version = agent_version_create(
                agent=group.agent,
                fields={
                    "system_prompt": agent.system_prompt,
                    "context_protocol_id": protocol.id,
                    "context_protocol_version": protocol.version,
                    "options": protocol.options,
                    "model_provider": self.provider.model_provider,
                    "model_name": self.provider.model,
                    "max_input_tokens": agent.max_input_tokens,
                    "maintenance_trigger_ratio": agent.maintenance_trigger_ratio,
                    "model_config": config,
                    "prices": self.plan.prices,
                    "max_turns_per_run": agent.max_turns_per_run,
                },
                tool_ids=list(self.application.tools.values_list("id", flat=True)),
                maintainer_agent_id=self.maintainer.id if self.maintainer else None,
            )
            group.versions[key] = agent_version_publish(version=version)
        return group.versions[key]

    def _model_config(self, group: Group, stage_id: str) -> dict[str, Any]:
        scripted = self.plan.scripted
        if not self.provider.scripted or scripted is None:
            return connection_config(self.plan, self.provider)
        config: dict[str, Any] = {
            "description": f"scripted: group {group.id}, stage {stage_id}",
            "steps": scripted.stages[stage_id].steps_for(group.id),
        }
        if scripted.wire_format:
            config["wireFormat"] = scripted.wire_format
        return config


def connection_config(plan: Plan, provider: ProviderSetup) -> dict[str, Any]:
    """A real provider's model config: where to connect and the output bound."""
    config: dict[str, Any] = {}
    if provider.base_url:
        config["baseUrl"] = provider.base_url
    if provider.api_key_env:
        config["apiKeyEnv"] = provider.api_key_env
    if plan.agent.max_output_tokens:
        config["maxOutputTokens"] = plan.agent.max_output_tokens
    if provider.provider == PROVIDER_ANTHROPIC:
        # The adapter keeps a trailing assistant state in the assistant role (a prefill)
        # only for a model said to accept it (docs/decisions.md).
        config["assistantPrefill"] = plan.anthropic_prefill
    return config


def _maintainer(plan: Plan, provider: ProviderSetup, application: Application) -> Agent | None:
    prompt = plan.agent.maintainer_prompt
    if prompt is None:
        return None
    agent = agent_create(application=application, name="context-maintainer")
    if provider.scripted:
        steps = plan.scripted.maintainer_steps if plan.scripted else None
        config: dict[str, Any] = {"steps": steps or DEFAULT_MAINTAINER_STEPS}
    else:
        config = connection_config(plan, provider)
        config.pop("assistantPrefill", None)
    version = agent_version_create(
        agent=agent,
        fields={
            "system_prompt": prompt,
            "context_protocol_id": "prefix",
            "context_protocol_version": 2,
            "model_provider": provider.model_provider,
            "model_name": provider.model,
            "max_input_tokens": plan.agent.max_input_tokens,
            "model_config": config,
            # The plan's prices, so the sessions' usage shows the same cost everywhere.
            "prices": plan.prices,
        },
    )
    agent_version_publish(version=version)
    return agent


def build_lab(plan: Plan, provider: ProviderSetup, out_dir: Path) -> Lab:
    """Create the Application (with the host tools), the maintainer and the groups' agents."""
    name = f"experiment {plan.name} {out_dir.name}"[:200]
    application, _key = application_create(name=name)  # the key is not needed: no API
    for tool in plan.host_tools:
        Tool.objects.create(
            application=application,
            name=tool.name,
            description=tool.description,
            input_schema=tool.input_schema,
        )
    maintainer = _maintainer(plan, provider, application)
    groups = [
        Group(
            spec=spec,
            agent=agent_create(application=application, name=f"{spec.id}: {spec.label}"),
        )
        for spec in plan.groups
    ]
    return Lab(plan, provider, application, maintainer, groups)
