"""Load and validate an experiment plan; every problem is reported at once.

The JSON Schema (experiments/experiment-plan.schema.json) checks the shape; this module
adds what a schema cannot express: the protocols and options against the catalog, group
and stage cross-references, and the scripted model's steps. Validation never stops at the
first problem: an operator fixes a plan in one pass.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from django.conf import settings
from jsonschema import Draft202012Validator

from contextproto.protocol import catalog
from contextproto.protocol.adapters import WireFormat
from contextproto.protocol.options import validate_options
from contextproto.protocol.vocabulary import SYSTEM_PLACEHOLDER
from contextproto.usage import prices_problems
from labs.experiments.spec import Plan, plan_from
from sessions_app.providers.base import ProviderError
from sessions_app.providers.scripted import validate_script

SCHEMA_FILE = "experiment-plan.schema.json"

# `--provider` values: the adapter wire formats of contract §4.5, plus the scripted model.
PROVIDER_SCRIPTED = "scripted"
PROVIDER_OPENAI = WireFormat.OPENAI_CHAT
PROVIDER_ANTHROPIC = WireFormat.ANTHROPIC_MESSAGES
PROVIDERS = (PROVIDER_SCRIPTED, PROVIDER_OPENAI, PROVIDER_ANTHROPIC)


class PlanInvalid(Exception):
    """A plan that cannot run; `errors` lists every problem as `path: message`."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__(f"the plan has {len(errors)} problem(s)")
        self.errors = errors


@dataclass(frozen=True)
class LoadedPlan:
    """A validated plan (the JSON document and its typed reading) and what identifies it in
    a report."""

    data: dict[str, Any]
    plan: Plan
    path: str
    sha256: str


def schema_path() -> Path:
    return Path(settings.BASE_DIR) / "experiments" / SCHEMA_FILE


@cache
def _validator() -> Draft202012Validator:
    schema = json.loads(schema_path().read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def load_plan(path: str | Path, *, provider: str) -> LoadedPlan:
    """Read, parse and validate the plan at `path` for `provider`.

    The hash is of the file's bytes: the report names exactly the plan that was registered.
    Raises PlanInvalid with every problem (unreadable file and bad JSON included).
    """
    file = Path(path)
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise PlanInvalid([f"{file}: cannot read the plan ({exc.strerror or exc})"]) from exc
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise PlanInvalid([f"{file}: not a JSON document ({exc})"]) from exc
    errors = plan_errors(data, provider=provider)
    if errors:
        raise PlanInvalid(errors)
    return LoadedPlan(
        data=data, plan=plan_from(data), path=str(file), sha256=hashlib.sha256(raw).hexdigest()
    )


def plan_errors(plan: Any, *, provider: str) -> list[str]:
    """Every problem of `plan` for `provider`, schema problems first; [] when it can run."""
    errors = [
        f"{error.json_path}: {error.message}"
        for error in sorted(_validator().iter_errors(plan), key=lambda e: list(e.absolute_path))
    ]
    if isinstance(plan, dict):
        errors.extend(_reference_errors(plan, provider))
    return errors


# --------------------------------------------------------------------------- references


def _objects(value: Any) -> list[dict[str, Any]]:
    # Tolerates shapes the schema already refused, so one pass reports everything.
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _duplicates(items: list[dict[str, Any]], key: str, where: str) -> list[str]:
    seen: set[Any] = set()
    errors = []
    for n, item in enumerate(items):
        value = item.get(key)
        if isinstance(value, str) and value in seen:
            errors.append(f"$.{where}[{n}].{key}: {value!r} is used twice")
        seen.add(value)
    return errors


def _reference_errors(plan: dict[str, Any], provider: str) -> list[str]:
    groups = _objects(plan.get("groups"))
    stages = _objects(plan.get("stages"))
    tools = _objects(plan.get("hostTools"))
    errors = _duplicates(groups, "id", "groups")
    errors += _duplicates(stages, "id", "stages")
    errors += _duplicates(tools, "name", "hostTools")
    for n, tool in enumerate(tools):
        if tool.get("name") in catalog.PROTOCOL_TOOL_NAMES:
            errors.append(
                f"$.hostTools[{n}].name: {tool['name']!r} is a protocol tool; host tools need "
                "other names"
            )
    errors += _group_errors(plan, groups)
    # The same checks and messages as an AgentVersion's model.prices (contract §8).
    errors += [
        f"$.{problem['field']}: {problem['message']} ({problem['code']})"
        for problem in prices_problems(plan.get("prices"), "prices")
    ]
    group_ids = {g.get("id") for g in groups}
    for s, stage in enumerate(stages):
        for r, run in enumerate(_objects(stage.get("runs"))):
            for c, check in enumerate(_objects(run.get("expect"))):
                where = f"$.stages[{s}].runs[{r}].expect[{c}]"
                for group_id in check.get("appliesTo") or []:
                    if group_id not in group_ids:
                        errors.append(f"{where}.appliesTo: no group {group_id!r} in $.groups")
                since = check.get("sinceRun")
                if isinstance(since, int) and since > r:
                    earlier = f"1..{r}" if r else "none: this is the session's first run"
                    errors.append(
                        f"{where}.sinceRun: must name an earlier run of the session "
                        f"({earlier}), got {since}"
                    )
    errors += _scripted_errors(plan, groups, stages, provider)
    return errors


def _group_errors(plan: dict[str, Any], groups: list[dict[str, Any]]) -> list[str]:
    errors: list[str] = []
    agent: dict[str, Any] = plan["agent"] if isinstance(plan.get("agent"), dict) else {}
    prompt = agent.get("systemPrompt")
    for n, group in enumerate(groups):
        protocol = group.get("protocol")
        if not isinstance(protocol, dict):
            continue
        pid, version = protocol.get("id"), protocol.get("version")
        if not isinstance(pid, str) or not isinstance(version, int):
            continue
        entry = catalog.find_version(pid, version)
        if entry is None:
            known = ", ".join(v.key for v in catalog.all_versions())
            errors.append(
                f"$.groups[{n}].protocol: {pid}@{version} is not in the catalog ({known})"
            )
            continue
        checked = validate_options(pid, version, protocol.get("options", {}))
        for problem in checked.errors:
            option = f".{problem['option']}" if problem.get("option") else ""
            errors.append(
                f"$.groups[{n}].protocol.options{option}: {problem['message']} ({problem['code']})"
            )
        if entry.windowed and isinstance(prompt, str) and prompt.count(SYSTEM_PLACEHOLDER) != 1:
            errors.append(
                f"$.agent.systemPrompt: group {group.get('id')!r} uses {entry.key}, whose "
                f"system prompt must contain {SYSTEM_PLACEHOLDER} exactly once "
                f"(found {prompt.count(SYSTEM_PLACEHOLDER)})"
            )
    return errors


def _script_error(where: str, steps: Any, wire: Any) -> list[str]:
    script: dict[str, Any] = {"steps": steps}
    if isinstance(wire, str):
        script["wireFormat"] = wire
    try:
        validate_script(script)
    except ProviderError as exc:
        return [f"{where}: {exc.message}"]
    return []


def _scripted_errors(
    plan: dict[str, Any],
    groups: list[dict[str, Any]],
    stages: list[dict[str, Any]],
    provider: str,
) -> list[str]:
    scripted = plan.get("scripted")
    if not isinstance(scripted, dict):
        if provider == PROVIDER_SCRIPTED:
            return ["$.scripted: --provider scripted needs the plan's scripted section"]
        return []
    errors: list[str] = []
    wire = scripted.get("wireFormat")
    stage_ids = [s.get("id") for s in stages]
    group_ids = {g.get("id") for g in groups}
    by_stage: dict[str, Any] = (
        scripted["stages"] if isinstance(scripted.get("stages"), dict) else {}
    )
    for stage_id, entry in by_stage.items():
        where = f"$.scripted.stages.{stage_id}"
        if stage_id not in stage_ids:
            errors.append(f"{where}: no stage {stage_id!r} in $.stages")
        if not isinstance(entry, dict):
            continue
        if isinstance(entry.get("default"), list):
            errors += _script_error(f"{where}.default", entry["default"], wire)
        overrides: dict[str, Any] = entry["groups"] if isinstance(entry.get("groups"), dict) else {}
        for group_id, steps in overrides.items():
            if group_id not in group_ids:
                errors.append(f"{where}.groups.{group_id}: no group {group_id!r} in $.groups")
            elif isinstance(steps, list):
                errors += _script_error(f"{where}.groups.{group_id}", steps, wire)
    if provider == PROVIDER_SCRIPTED:
        for named in stage_ids:
            if isinstance(named, str) and named not in by_stage:
                errors.append(
                    f"$.scripted.stages: --provider scripted needs steps for stage {named!r}"
                )
    if isinstance(scripted.get("maintainerSteps"), list):
        errors += _script_error("$.scripted.maintainerSteps", scripted["maintainerSteps"], None)
    return errors
