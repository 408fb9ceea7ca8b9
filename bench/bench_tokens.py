"""Token economy: input tokens per turn over a long scripted session (300 turns), and what
each view costs once the provider caches.

unified@2 works through 10 tasks, each in its own window (two are resumed later): it
opens the window, runs bulky host lookups, folds every 5 finished lookups, keeps a working
memory, asks for maintenance twice, completes the window and answers in `main`. Every
unified view of `scenario.PROTOCOL_VIEWS` (unified@1, @2, @3 A/B/C, @4) runs that same script;
prefix@2 gets the same inputs and the same host lookups turn for turn; where unified calls
a context tool, prefix@2 (which has none) calls a tiny host tool `progress_note`, so every
session has exactly the same number of turns and the same bulky tool output. All have
maxInputTokens 16000 and a scripted maintainer; maintenance runs inline (no REDIS_URL:
Celery is eager), triggered at 0.75 x maxInputTokens or by `context_maintainer_run`.

Raw token counts are the scripted model's usage (characters / 4 of the request as sent).
"Full history" is what an append-only agent would send: every raw message of the prefix@2
session (the same work without context tools) up to the turn's upper bound.

With caching (`sessions_app/cache_economy.py`): each turn's view is rebuilt for openai-chat
and anthropic-messages with prompt caching on, a turn every CACHE_THINK_SECONDS, replayed
through the cache simulator and counted with cl100k_base (an estimate).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

from benchlib import BENCH_DIR, banner, log, table
from economy import economy_section

from contextproto.protocol.messages import DERIVED_MASKED

APPLICATION = "bench-tokens"
TURNS = 300
TASKS = 10
LOOKUPS_PER_TASK = 20
FOLD_EVERY = 5
MAX_INPUT_TOKENS = 16000
RESUMES = {6: 1, 9: 3}  # task 6 resumes task 1's window, task 9 task 3's
MAINTAINER_RUN_AT = {4: 12, 8: 12}  # task -> after this many lookups
LOOKUP_TOOLS = ("price_lookup", "shipping_lookup", "stock_lookup")
NOTE_TOOL = "progress_note"
SVG_PATH = BENCH_DIR / "token_economy.svg"
# The full history is the prefix@2 session's log: the same work, without context tools.
FULL_HISTORY_OF = "prefix@2"
FULL_HISTORY = "full history"
# Seconds between turns in the cache replay (a model answer plus the host's work): the
# scripted turns run milliseconds apart, which would keep every cache entry alive.
CACHE_THINK_SECONDS = 20.0


def _task_input(task: int) -> str:
    if task in RESUMES:
        return (
            f"Task {task + 1}: go back to task {RESUMES[task] + 1} and re-check its figures "
            "against the new budget; do not change what was agreed."
        )
    return f"Task {task + 1}: prepare the quote for customer C{task + 1:02d} (laptops, EU)."


def build_scripts() -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """The unified@2 script, its prefix@2 twin and the run inputs (300 steps each)."""
    from labs.scenario import ScriptBuilder

    unified = ScriptBuilder()
    twin: list[dict[str, Any]] = []
    inputs: list[str] = []

    def protocol(name: str, arguments: dict[str, Any]) -> tuple[int, int, str]:
        twin.append(
            {
                "toolCalls": [
                    {
                        "id": f"p{len(twin) + 1}",
                        "name": NOTE_TOOL,
                        "arguments": {"step": name.removeprefix("context_")},
                    }
                ]
            }
        )
        return unified.call(name, {"purpose": arguments.pop("purpose"), **arguments})

    def host(name: str, arguments: dict[str, Any]) -> tuple[int, int, str]:
        twin.append(
            {"toolCalls": [{"id": f"p{len(twin) + 1}", "name": name, "arguments": arguments}]}
        )
        return unified.call(name, arguments)

    def text(content: str) -> None:
        twin.append({"text": content})
        unified.text(content)

    for task in range(TASKS):
        last_task = task == TASKS - 1
        inputs.append(_task_input(task))
        unified.user_input()
        window = f"task-{(RESUMES.get(task, task)) + 1:02d}"
        opening: dict[str, Any] = {
            "purpose": "a new task gets its own window",
            "expectedWindowId": "main",
            "windowId": window,
            "input": f"{inputs[-1]} Come back to main with the outcome.",
        }
        if task in RESUMES:
            opening["resume"] = True
        else:
            opening["goal"] = f"Quote for customer C{task + 1:02d}"
        protocol("context_window_open", opening)
        batch_first = None
        n = 0
        while True:
            # The last task runs on until only its complete + answer turns are left.
            if last_task:
                if len(unified.steps) >= TURNS - 2:
                    break
            elif n >= LOOKUPS_PER_TASK:
                break
            name = LOOKUP_TOOLS[n % len(LOOKUP_TOOLS)]
            first, last, _ = host(name, {"item": f"laptop-{task}-{n}", "qty": n % 5 + 1})
            batch_first = batch_first or first
            n += 1
            if n % FOLD_EVERY == 0 and len(unified.steps) < TURNS - 2:
                protocol(
                    "context_fold_create",
                    {
                        "purpose": "these lookups are finished",
                        "expectedWindowId": window,
                        "fromIndex": batch_first,
                        "throughIndex": last,
                        "summary": f"Lookups {n - FOLD_EVERY + 1}-{n} of task {task + 1}: "
                        "prices 1200-1400, shipping 250, stock fine.",
                    },
                )
                batch_first = None
            if n % 10 == 0 and len(unified.steps) < TURNS - 2:
                protocol(
                    "context_window_memory_set",
                    {
                        "purpose": "keep the running quote",
                        "expectedWindowId": window,
                        "memory": f"Task {task + 1}: {n} lookups done; running total "
                        f"{4150 + 37 * n} EUR.",
                    },
                )
            if MAINTAINER_RUN_AT.get(task) == n:
                protocol(
                    "context_maintainer_run",
                    {"purpose": "compress the finished part", "expectedWindowId": window},
                )
        lookups = n
        protocol(
            "context_window_complete",
            {
                "purpose": "task done",
                "expectedWindowId": window,
                "outcome": f"Task {task + 1} quote ready: {4150 + 37 * lookups} EUR.",
            },
        )
        text(f"Task {task + 1} is done: the quote is {4150 + 37 * lookups} EUR.")
    return (
        {"description": "bench: token economy, unified@2", "steps": unified.steps},
        {"description": "bench: token economy, prefix@2", "steps": twin},
        inputs,
    )


def script_for_version(script: dict[str, Any], version: int) -> dict[str, Any]:
    """`script` with each context tool call's arguments cut to what unified@`version` knows.

    The script is written for unified@2; unified@1's tools have no `expectedWindowId` guard
    (and refuse unknown arguments), so the same work needs the same calls without it.
    """
    from contextproto.protocol import catalog

    tools = catalog.get_version("unified", version).tools
    steps = []
    for step in script["steps"]:
        calls = []
        for call in step.get("toolCalls", []):
            schema = tools.get(call["name"], {}).get("inputSchema")
            if schema is not None:
                known = schema.get("properties", {})
                call = {
                    **call,
                    "arguments": {k: v for k, v in call["arguments"].items() if k in known},
                }
            calls.append(call)
        steps.append({**step, "toolCalls": calls} if calls else step)
    return {**script, "steps": steps}


def script_for_view(script: dict[str, Any], view: Any) -> dict[str, Any]:
    """`script` for a unified `view`: cut to its version's tools, and for a view that does not
    fold, each `context_fold_create` turned into the tiny `progress_note` host call (the same
    turn count and the same lookups; old results are then left to the masking tier)."""
    script = script_for_version(script, view.version)
    if view.folds:
        return script
    steps = []
    for step in script["steps"]:
        calls = [
            {"id": call["id"], "name": NOTE_TOOL, "arguments": {"step": "fold"}}
            if call["name"] == "context_fold_create"
            else call
            for call in step.get("toolCalls", [])
        ]
        steps.append({**step, "toolCalls": calls} if calls else step)
    return {**script, "description": f"{script['description']}, no folds", "steps": steps}


def _maintainer_script() -> dict[str, Any]:
    return {
        "description": "bench: context-maintainer",
        "steps": [
            {
                "text": (
                    f"Checkpoint {n + 1}: the user runs a series of laptop quotes for EU "
                    "customers. Each task opens its own window, looks up price, shipping and "
                    "stock, and ends with a quote in EUR. Prices seen so far range 1200-1400 "
                    "per unit, shipping is 250 per order, stock is sufficient. Standing rule: "
                    "never change an agreed quote; re-check it against the current budget. "
                )
                * 2
            }
            for n in range(200)
        ],
    }


def _versions() -> dict[str, Any]:
    """A published AgentVersion per entry of `scenario.PROTOCOL_VIEWS`, by label."""
    from agents.models import Agent, AgentVersion, Application, Tool
    from labs.scenario import PROTOCOL_VIEWS

    application, _ = Application.objects.get_or_create(name=APPLICATION)
    tools = []
    for name in (*LOOKUP_TOOLS, NOTE_TOOL):
        tool, _ = Tool.objects.get_or_create(
            application=application,
            name=name,
            defaults={"description": f"Host tool {name}.", "input_schema": {"type": "object"}},
        )
        tools.append(tool)
    unified_script, prefix_script, _inputs = build_scripts()

    def version(name: str, **fields: Any) -> AgentVersion:
        agent, _ = Agent.objects.get_or_create(application=application, name=name)
        return AgentVersion.objects.create(
            agent=agent,
            number=(agent.versions.count() or 0) + 1,
            status=AgentVersion.Status.PUBLISHED,
            model_provider="scripted",
            model_name="scripted-bench",
            max_input_tokens=MAX_INPUT_TOKENS,
            max_turns_per_run=60,
            **fields,
        )

    maintainer = version(
        "context-maintainer",
        system_prompt="You write checkpoints of agent conversations.",
        context_protocol_id="prefix",
        context_protocol_version=2,
        model_config=_maintainer_script(),
    )
    prompt = "You are ACME's sales assistant. You prepare quotes.\n\n{{context_protocol}}"
    made = {}
    for view in PROTOCOL_VIEWS:
        made[view.label] = version(
            f"quote-assistant ({view.label})",
            system_prompt=prompt,
            context_protocol_id=view.protocol_id,
            context_protocol_version=view.version,
            options=dict(view.options),
            model_config=(
                script_for_view(unified_script, view) if view.windowed else prefix_script
            ),
            maintainer_agent=maintainer.agent,
        )
        made[view.label].tools.set(tools)
    return made


def _answer_host_calls(session_id: Any) -> None:
    from labs.scenario import host_result
    from sessions_app.models import Message, Session
    from sessions_app.services.messages import message_write

    session = Session.objects.get(pk=session_id)
    calls = Message.objects.filter(
        session=session, run_id=session.current_run_id, kind="tool_call"
    ).exclude(tool_name__startswith="context_")
    answered = set(
        Message.objects.filter(
            session=session, kind="tool_result", tool_call_id__in=[c.tool_call_id for c in calls]
        ).values_list("tool_call_id", flat=True)
    )
    for call in calls.order_by("index"):
        if call.tool_call_id in answered:
            continue
        content = (
            "noted"
            if call.tool_name == NOTE_TOOL
            else host_result(call.tool_name, call.arguments or {})
        )
        message_write(
            session_id=session.id,
            role="tool",
            kind="tool_result",
            content=content,
            tool_call_id=call.tool_call_id,
        )


def _drive(version: Any, inputs: list[str]) -> Any:
    from sessions_app.services.runs import run_start
    from sessions_app.services.runtime import run_advance
    from sessions_app.services.sessions import session_create

    session, _ = session_create(agent_version=version, inputs={"customer": "ACME"})
    for content in inputs:
        run, _ = run_start(session_id=session.id, content=content)
        status = run_advance(run_id=run.id)
        while status == "waiting_for_host_tool":
            _answer_host_calls(session.id)
            status = run_advance(run_id=run.id)
        if status != "completed":
            raise RuntimeError(f"run ended {status}: {run.id.hex}")
    return session


def _turns(session: Any) -> list[Any]:
    from sessions_app.models import ProjectionSnapshot

    return list(ProjectionSnapshot.objects.filter(session=session).order_by("created_at", "id"))


def _full_history_tokens(session: Any, snapshots: list[Any]) -> list[int]:
    """The demo's full-history estimate per turn, computed incrementally (same numbers)."""
    from sessions_app.providers.base import canonical_json, estimate_tokens
    from sessions_app.reads import raw_log

    last = snapshots[-1].upper_bound
    history = raw_log.log_page(session.id, window_id=None, after_index=0, limit=last)
    keep = ("role", "content", "toolName", "toolCallId", "arguments")
    sizes = [
        len(canonical_json({k: v for k, v in m.to_wire().items() if k in keep})) for m in history
    ]
    prefix = [0]
    for size in sizes:
        prefix.append(prefix[-1] + size)

    def request_of(snapshot: Any, messages: list[Any]) -> dict[str, Any]:
        request = dict(snapshot.request)
        request["messages"] = messages
        request.pop("system", None)
        return request

    tokens = []
    for snapshot in snapshots:
        system = snapshot.messages[0] if snapshot.messages else {}
        base = len(canonical_json(request_of(snapshot, [system])))
        n = snapshot.upper_bound
        # "[s]" grows by ", " + message for each of the n raw messages
        tokens.append(-(-(base + prefix[n] + 2 * n) // 4))
    # Self-check against the direct computation on the last turn.
    final = snapshots[-1]
    direct = request_of(
        final,
        [final.messages[0]]
        + [{k: v for k, v in m.to_wire().items() if k in keep} for m in history],
    )
    assert tokens[-1] == estimate_tokens(canonical_json(direct)), "full-history estimate drift"
    return tokens


def _nice_step(peak: float) -> int:
    for step in (500, 1000, 2000, 2500, 5000, 10_000, 20_000, 25_000, 50_000, 100_000):
        if peak / step <= 8:
            return step
    return 200_000


def _panel(
    out: list[str],
    *,
    box: tuple[float, float, float, float],
    series: dict[str, list[int]],
    marks: dict[str, list[int]],
    title: str,
    show_x_label: bool,
) -> None:
    """One line chart in `box` (left, top, width, height) of the SVG being written."""
    left, top, plot_w, plot_h = box
    turns = max(len(v) for v in series.values())
    peak = max(max(v) for v in series.values())
    step = _nice_step(peak)
    y_max = -(-peak // step) * step

    def x(turn: int) -> float:
        return left + plot_w * (turn - 1) / max(turns - 1, 1)

    def y(tokens: float) -> float:
        return top + plot_h * (1 - tokens / y_max)

    out.append(f'<text x="{left}" y="{top - 8}" font-size="13">{title}</text>')
    for tick in range(0, y_max + 1, step):
        out.append(
            f'<line x1="{left}" y1="{y(tick):.1f}" x2="{left + plot_w}" y2="{y(tick):.1f}" '
            'stroke="#e6e6e6"/>'
        )
        out.append(f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:,}</text>')
    for tick in range(0, turns + 1, 50):
        at = x(max(tick, 1))
        out.append(
            f'<line x1="{at:.1f}" y1="{top + plot_h}" x2="{at:.1f}" y2="{top + plot_h + 5}" '
            'stroke="#333"/>'
        )
        out.append(
            f'<text x="{at:.1f}" y="{top + plot_h + 18}" text-anchor="middle">{max(tick, 1)}</text>'
        )
    out.append(
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'stroke="#333"/>'
    )
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#333"/>')
    if show_x_label:
        out.append(
            f'<text x="{left + plot_w / 2}" y="{top + plot_h + 36}" text-anchor="middle">'
            "turn</text>"
        )
    for name, values in series.items():
        points = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in enumerate(values, start=1))
        out.append(
            f'<polyline fill="none" stroke="{COLOURS[name]}" stroke-width="1.6" points="{points}"/>'
        )
    for name, marked in marks.items():
        if name not in series:
            continue
        for turn in marked:
            out.append(
                f'<circle cx="{x(turn):.1f}" cy="{y(series[name][turn - 1]):.1f}" r="3.5" '
                f'fill="none" stroke="{COLOURS[name]}" stroke-width="1.5"/>'
            )


COLOURS = {
    "full history": "#888888",
    "prefix@2": "#d95f02",
    "unified@2": "#1b9e77",
    "unified@4": "#7570b3",
}


def _svg(series: dict[str, list[int]], marks: dict[str, list[int]]) -> str:
    """A hand-written chart: every curve, then all but the full history zoomed in."""
    width, height = 900, 760
    left, right = 80, 24
    plot_w = width - left - right
    turns = max(len(v) for v in series.values())
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="24" text-anchor="middle" font-size="16">Input tokens per '
        f"turn over {turns} scripted turns (estimate: characters / 4)</text>",
    ]
    _panel(
        out,
        box=(left, 80, plot_w, 250),
        series=series,
        marks={},
        title="All views",
        show_x_label=False,
    )
    zoomed = {k: v for k, v in series.items() if k != "full history"}
    _panel(
        out,
        box=(left, 420, plot_w, 260),
        series=zoomed,
        marks=marks,
        title="Without the full history (circles: first turn after a committed checkpoint)",
        show_x_label=True,
    )
    for n, name in enumerate(series):
        lx = left + 20 + 170 * n
        out.append(
            f'<line x1="{lx}" y1="50" x2="{lx + 24}" y2="50" stroke="{COLOURS[name]}" '
            'stroke-width="3"/>'
        )
        out.append(f'<text x="{lx + 30}" y="54">{name}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _masked_results(snapshot: Any) -> int:
    """How many tool results this turn's view shows as masked stubs (unified@4)."""
    return sum(1 for s in snapshot.sources or [] if s.get("derivedType") == DERIVED_MASKED)


def _commit_turns(session: Any, snapshots: list[Any]) -> list[int]:
    """Turns whose view is the first one built after a committed checkpoint."""
    from sessions_app.models import MaintenanceJob

    commits = sorted(
        MaintenanceJob.objects.filter(
            session=session, status=MaintenanceJob.Status.COMMITTED
        ).values_list("finished_at", flat=True)
    )
    marked = []
    for finished in commits:
        for turn, snapshot in enumerate(snapshots, start=1):
            if snapshot.created_at > finished:
                marked.append(turn)
                break
    return marked


def run() -> dict[str, Any]:
    from django.test.utils import override_settings

    from sessions_app.cache_economy import session_cache_economy
    from sessions_app.models import FoldRecord, MaintenanceJob

    labels = ", ".join(_versions_labels())
    banner(f"3. Token economy: {TURNS} scripted turns, {labels} and the full history")
    started = time.perf_counter()
    _unified, _prefix, inputs = build_scripts()
    with override_settings(RUNTIME_AUTOSTART=False, CELERY_TASK_ALWAYS_EAGER=True):
        versions = _versions()
        sessions = {}
        for label, v in versions.items():
            began = time.perf_counter()
            sessions[label] = _drive(v, inputs)
            log(f"{label}: {TURNS} turns driven in {time.perf_counter() - began:.1f} s")
    driven = time.perf_counter() - started
    snaps = {label: _turns(s) for label, s in sessions.items()}
    for label, found in snaps.items():
        if len(found) != TURNS:
            raise RuntimeError(f"{label}: {len(found)} turns, expected {TURNS}")
    tokens = {
        label: [int((s.usage or {}).get("inputTokens") or 0) for s in found]
        for label, found in snaps.items()
    }
    full = _full_history_tokens(sessions[FULL_HISTORY_OF], snaps[FULL_HISTORY_OF])
    unified = tokens["unified@2"]
    rows = []
    for turn in [1, *range(10, TURNS + 1, 10)]:
        i = turn - 1
        rows.append(
            (
                turn,
                snaps["unified@2"][i].window_id,
                *(found[i] for found in tokens.values()),
                full[i],
            )
        )
    headers = ("turn", "unified@2 window", *tokens, "full history")
    text = table(headers, rows)
    print(text)
    stats = {}
    for label, session in sessions.items():
        jobs = MaintenanceJob.objects.filter(session=session)
        masked = [_masked_results(s) for s in snaps[label]]
        stats[label] = {
            "folds": FoldRecord.objects.filter(session=session).count(),
            "committed": jobs.filter(status=MaintenanceJob.Status.COMMITTED).count(),
            "jobs": jobs.count(),
            "triggers": dict(Counter(jobs.values_list("trigger", flat=True))),
            "windows": len({s.window_id for s in snaps[label]}),
            # unified@4's masking tier: views showing stubs, and the most stubs in one.
            "turns": len(masked),
            "masked_turns": sum(1 for n in masked if n),
            "most_masked": max(masked, default=0),
        }
    totals = [
        (
            label,
            sum(found),
            sum(found) // TURNS,
            max(found),
            f"{100 - 100 * sum(found) / sum(full):.0f}%",
            stats[label]["windows"],
            stats[label]["folds"],
            f"{stats[label]['committed']} / {stats[label]['jobs']}",
            stats[label]["masked_turns"],
        )
        for label, found in tokens.items()
    ]
    totals.append(
        ("full history", sum(full), sum(full) // TURNS, max(full), "0%", "-", "-", "-", "-")
    )
    summary = table(
        (
            "view",
            f"tokens, {TURNS} turns",
            "per turn",
            "max turn",
            "saved vs full",
            "windows seen",
            "folds",
            "checkpoints committed / jobs",
            "views with masked results",
        ),
        totals,
    )
    print(summary)
    marks = {
        "unified@2": _commit_turns(sessions["unified@2"], snaps["unified@2"]),
        "prefix@2": _commit_turns(sessions["prefix@2"], snaps["prefix@2"]),
    }
    SVG_PATH.write_text(
        _svg(
            {
                "full history": full,
                "prefix@2": tokens["prefix@2"],
                "unified@2": unified,
                "unified@4": tokens["unified@4"],
            },
            marks,
        )
    )
    log(f"chart written to {SVG_PATH.relative_to(BENCH_DIR.parent)}")
    sessions_text = ", ".join(f"{label} {s.id}" for label, s in sessions.items())
    log(f"sessions: {sessions_text}")

    # What every view costs once the provider caches (the full history from the prefix@2 log).
    replay_started = time.perf_counter()
    economies = {}
    for label, session in sessions.items():
        began = time.perf_counter()
        report = session_cache_economy(
            session.id,
            think_seconds=CACHE_THINK_SECONDS,
            full_history=label == FULL_HISTORY_OF,
            view=label,
        )
        economies[label] = report.view
        if report.full_history is not None:
            economies[FULL_HISTORY] = report.full_history
        log(f"{label}: replayed with caching in {time.perf_counter() - began:.1f} s")
    cached = economy_section(economies, stats, think_seconds=CACHE_THINK_SECONDS)
    print(cached["table"])
    print(cached["breaks"])
    replayed = time.perf_counter() - replay_started
    log(f"sessions driven in {driven:.1f} s; {len(economies)} views replayed in {replayed:.1f} s")
    return {
        "table": text,
        "summary": summary,
        "stats": stats,
        "sessions": {label: str(s.id) for label, s in sessions.items()},
        "json": json.dumps({"tokens": tokens, "full": full}),
        "cache": cached,
        "drive_seconds": driven,
        "replay_seconds": replayed,
        "seconds": time.perf_counter() - started,
    }


def _versions_labels() -> list[str]:
    from labs.scenario import PROTOCOL_VIEWS

    return [view.label for view in PROTOCOL_VIEWS]
