"""Write an experiment report: report.json (the record) and report.md (for people).

The summary table is the same text in report.md and at the end of the command's output.
A scripted report says so in its first line, in the table's heading and in every token
column: it can never be mistaken for a model result.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPORT_JSON = "report.json"
REPORT_MD = "report.md"


def write_report(report: dict[str, Any], out_dir: Path) -> tuple[Path, Path]:
    """Write report.json and report.md into `out_dir`; return both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / REPORT_JSON
    md_path = out_dir / REPORT_MD
    json_path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    md_path.write_text(render_markdown(report), encoding="utf-8")
    return json_path, md_path


def _stage_cell(group: dict[str, Any], stage_id: str) -> str:
    stage = next((s for s in group["stages"] if s["id"] == stage_id), None)
    return stage["verdict"] if stage else "-"


def _estimated(tokens: dict[str, Any], scripted: bool) -> str:
    return " (est.)" if scripted or tokens["source"] != "provider-reported" else ""


def _tokens(tokens: dict[str, Any], scripted: bool) -> str:
    return f"{tokens['input']}+{tokens['output']}" + _estimated(tokens, scripted)


def _cache(tokens: dict[str, Any], scripted: bool) -> str:
    """Input tokens by kind: uncached / cache-read / cache-written (reports before the
    kinds were recorded count every input token as uncached)."""
    read, written = tokens.get("cacheRead", 0), tokens.get("cacheWrite", 0)
    uncached = tokens.get("uncachedInput", tokens["input"] - read - written)
    return f"{uncached}/{read}/{written}" + _estimated(tokens, scripted)


def _cost(cost: dict[str, float] | None, scripted: bool) -> str:
    if cost is None:
        return "-"
    return f"{cost['total']:.4f}" + (" (est.)" if scripted else "")


def summary_lines(report: dict[str, Any]) -> list[str]:
    """The per-group table: stage verdicts, runs, tokens, repeats, comparability."""
    scripted = report["resultsKind"] == "scripted"
    stages = [s["id"] for s in report["stages"]]
    priced = report.get("prices") is not None
    header = [
        "group",
        "protocol",
        *stages,
        "runs ok",
        "tokens in+out",
        "in: uncached/cache read/cache written",
        *(["cost"] if priced else []),
        "repeats",
        "comparable",
    ]
    rows = []
    for group in report["groups"]:
        comparable = group["comparability"]["comparable"]
        rows.append(
            [
                group["id"],
                group["protocol"]
                + (
                    f" {group['options'].get('stateMessagePlacement')}"
                    if group["options"].get("stateMessagePlacement")
                    else ""
                ),
                *[_stage_cell(group, s) for s in stages],
                f"{group['runs']['passed']}/{group['runs']['total']}",
                _tokens(group["tokens"], scripted),
                _cache(group["tokens"], scripted),
                *([_cost(group.get("cost"), scripted)] if priced else []),
                str(group["repeatedToolCalls"]),
                {True: "yes", False: "NO", None: "unknown"}[comparable],
            ]
        )
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    title = "Summary" + (" (SCRIPTED REHEARSAL, not model results)" if scripted else "")
    out = [title, "", line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in rows]
    budget = report["budget"]
    out += [
        "",
        f"Budget: {budget['spentTokens']} of {budget['totalTokens']} tokens spent"
        + (" (scripted estimates)" if scripted else " (as reported by the provider)")
        + (" - EXHAUSTED" if budget["exhausted"] else ""),
    ]
    if priced:
        prices = report["prices"]
        out.append(
            f"Cost: agent and maintainer calls at {prices['input']} input, "
            f"{prices['cacheRead']} cache read, {prices['cacheWrite']} cache write, "
            f"{prices['output']} output per million tokens (the plan's prices; contract §8)"
            + (" on scripted estimates" if scripted else "")
        )
    else:
        out.append("Cost: the plan gives no prices (add `prices` to price the tokens).")
    if report.get("stop"):
        out.append(f"Stopped: {_stop_text(report['stop'])}")
    return out


def _stop_text(stop: dict[str, Any]) -> str:
    if stop["reason"] == "budget_exhausted":
        return (
            f"budget exhausted during group {stop['group']}, stage {stop['stage']}, "
            f"run {stop['run']} (session {stop['sessionId']})"
        )
    return f"group(s) {', '.join(stop['groups'])} failed stage {stop['stage']}"


def render_markdown(report: dict[str, Any]) -> str:
    """The human-readable report: label, identity, summary, comparability, every run."""
    plan = report["plan"]
    code = report["codeVersion"]
    lines = [
        f"# Experiment report: {plan['title']}",
        "",
        f"**{report['label']}**",
        "",
        f"- plan: `{plan['path']}` (sha256 `{plan['sha256']}`, registered "
        f"{plan.get('registeredAt') or 'n/a'})",
        f"- code: commit `{code.get('commit') or 'unknown'}`"
        + (" (with uncommitted changes)" if code.get("dirty") else "")
        + f", catalog `{code['catalogFingerprint']}`",
        f"- provider: {report['provider']} (wire format {report['wireFormat']}), "
        f"model `{report['model']}`",
        f"- started {report['startedAt']}, finished {report['finishedAt']}",
        "",
        *summary_lines(report),
        "",
        "## Comparability of the state message",
        "",
    ]
    for group in report["groups"]:
        lines.append(f"- **{group['id']}** ({group['label']}): {group['comparability']['reason']}")
    scripted = report["resultsKind"] == "scripted"
    for group in report["groups"]:
        lines += ["", f"## Group {group['id']}: {group['label']}", ""]
        upkeep = group["maintenanceTokens"]
        cost = group.get("cost")
        lines.append(
            f"{group['protocol']} {json.dumps(group['options'], ensure_ascii=False)}; "
            f"outcome: **{group['outcome']}**; input tokens uncached/cache read/cache written "
            f"{_cache(group['tokens'], scripted)}; maintenance tokens "
            f"{upkeep['input']}+{upkeep['output']} (cache read/written "
            f"{upkeep.get('cacheRead', 0)}/{upkeep.get('cacheWrite', 0)})"
            + (
                f"; cost {cost['total']:.6f} (agent {cost['agent']:.6f}, maintenance "
                f"{cost['maintenance']:.6f})"
                if cost is not None
                else ""
            )
        )
        for error in group["providerErrors"]:
            lines.append(
                f"- provider error in {error['stage']} run {error['run']}: "
                f"{error.get('code')}: {error.get('message')}"
            )
        for stage in group["stages"]:
            lines += ["", f"### {stage['id']}: {stage['verdict']} ({stage.get('reason', '')})", ""]
            for session in stage["sessions"]:
                lines.append(
                    f"- session {session['sessionId']} (repetition {session['repetition']})"
                )
                for run in session["runs"]:
                    lines.append(_run_line(run))
    return "\n".join(lines) + "\n"


def _run_line(run: dict[str, Any]) -> str:
    if run["verdict"] == "not_run":
        return f"  - run {run['number']}: not run ({run.get('reason')})"
    failed = [
        f"{c['name']}: {c['detail']}"
        for c in run["checks"]
        if c["status"] == "fail" and c["required"]
    ]
    state = next((c for c in run["checks"] if c["name"] == "stateMessage"), None)
    exercised = [
        f"{c['name']} {c['status']}"
        for c in run["checks"]
        if c["status"] in ("pass", "fail") and c["name"] != "runCompleted"
    ]
    parts = [
        f"  - run {run['number']}: **{run['verdict']}**, {run['turns']} turn(s), "
        f"tokens {run['tokens']['input']}+{run['tokens']['output']} ({run['tokens']['source']})",
    ]
    if state and state["status"] != "n/a":
        parts.append(f"state {state['detail']}")
    if exercised:
        parts.append("checks: " + ", ".join(exercised))
    if failed:
        parts.append("failed: " + "; ".join(failed))
    answer = (run.get("answer") or "").replace("\n", " ")
    if answer:
        parts.append(f"answer: {answer[:200]}")
    return "; ".join(parts)
