"""The experiment's report as data (report.json): per group outcome, comparability and cost.

`report.py` writes and renders it; this module builds it from what the run recorded: the
groups' stage records and tokens, the budget, the stop, and what identifies the code and
the plan.
"""

from __future__ import annotations

import subprocess
from datetime import datetime
from typing import Any

from django.conf import settings

from contextproto.protocol import catalog
from labs.experiments import checks
from labs.experiments.ledger import Budget, group_cost
from labs.experiments.plan import LoadedPlan
from labs.experiments.records import NOT_RUN, Stop
from labs.experiments.setup import Group, Lab

SCRIPTED_LABEL = (
    "SCRIPTED REHEARSAL: every answer comes from the plan's script and token counts are "
    "estimates (characters / 4). This tests the instrument; it is not a model result."
)
MODEL_LABEL = "Real-model run: answers and token counts as the provider reported them."


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


def comparability(group: Group, wire: str) -> dict[str, Any]:
    """Whether the group's state message was sent as its protocol designs it, on `wire`."""
    protocol = group.spec.protocol
    designed = checks.designed_state(protocol.id, protocol.version, protocol.options)
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
    rejected = [e for e in group.provider_errors if e.get("code") == "provider_request_rejected"]
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


def _outcome(group: Group) -> str:
    last = next((s for s in reversed(group.stages) if s["verdict"] != NOT_RUN), None)
    if group.failed_stage:
        return f"failed {group.failed_stage}"
    if all(s["verdict"] == checks.PASS for s in group.stages):
        return "passed every stage"
    if last is None:
        return "not run"
    return f"stopped in {last['id']} ({last['verdict']})"


def group_entry(lab: Lab, group: Group) -> dict[str, Any]:
    """A group's part of the report: outcome, comparability, tokens, cost, runs, stages."""
    scripted = lab.provider.scripted
    protocol = group.spec.protocol
    runs = [r for s in group.stages for ss in s["sessions"] for r in ss["runs"]]
    repeated = sum(
        (c.get("data") or {}).get("repeated", 0)
        for r in runs
        for c in r.get("checks", [])
        if c["name"] == "repeatedToolCalls"
    )
    return {
        "id": group.id,
        "label": group.spec.label,
        "role": group.spec.role,
        "protocol": protocol.key,
        "options": protocol.options,
        "agentId": str(group.agent.id),
        "agentVersionIds": [str(v.id) for v in group.versions.values()],
        "outcome": _outcome(group),
        "failedStage": group.failed_stage,
        "comparability": comparability(group, lab.provider.wire_format(lab.plan)),
        "tokens": group.tokens.to_dict(scripted),
        "maintenanceTokens": group.maintenance_tokens.to_dict(scripted),
        "cost": group_cost(group.tokens, group.maintenance_tokens, lab.plan.prices),
        "runs": {
            "total": len([r for r in runs if r["verdict"] != NOT_RUN]),
            "passed": len([r for r in runs if r["verdict"] == checks.PASS]),
        },
        "repeatedToolCalls": repeated,
        "providerErrors": group.provider_errors,
        "stages": group.stages,
    }


def build_report(
    loaded: LoadedPlan,
    lab: Lab,
    budget: Budget,
    stop: Stop | None,
    *,
    out_dir_name: str,
    started: datetime,
    finished: datetime,
) -> dict[str, Any]:
    """report.json's content (a JSON-ready dict, rendered by `report.py`)."""
    plan, provider = lab.plan, lab.provider
    return {
        "reportVersion": 1,
        "resultsKind": "scripted" if provider.scripted else "model",
        "label": SCRIPTED_LABEL if provider.scripted else MODEL_LABEL,
        "plan": {
            "name": plan.name,
            "title": plan.title,
            "path": loaded.path,
            "sha256": loaded.sha256,
            "registeredAt": plan.registered_at,
        },
        "codeVersion": code_version(),
        "provider": provider.provider,
        "wireFormat": provider.wire_format(plan),
        "model": provider.model,
        "providerAdaptation": plan.provider_adaptation,
        "startedAt": started.isoformat(),
        "finishedAt": finished.isoformat(),
        "applicationId": str(lab.application.id),
        "outDir": out_dir_name,
        "budget": {
            "totalTokens": budget.total,
            "spentTokens": budget.spent,
            "exhausted": budget.exhausted,
        },
        "stop": stop,
        # Per million tokens, contract §8; each group's `cost` uses them (null without).
        "prices": plan.prices,
        "stages": [{"id": s.id, "title": s.title} for s in plan.stages],
        "groups": [group_entry(lab, group) for group in lab.groups],
    }
