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
import math
import random
import time
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

from benchlib import BENCH_DIR, banner, log, table
from economy import STRATEGIES, Baseline, comparison_section, economy_section

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


def _resumes(tasks: int) -> dict[int, int]:
    """Task -> the earlier task whose window it resumes: RESUMES in every block of 10 tasks."""
    return {
        block + task: block + earlier
        for block in range(0, tasks, 10)
        for task, earlier in RESUMES.items()
        if block + task < tasks
    }


def _maintainer_runs(tasks: int) -> dict[int, int]:
    """Task -> after how many lookups it asks for maintenance: MAINTAINER_RUN_AT per block."""
    return {
        block + task: after
        for block in range(0, tasks, 10)
        for task, after in MAINTAINER_RUN_AT.items()
        if block + task < tasks
    }


def _task_input(task: int, resumes: dict[int, int] = RESUMES) -> str:
    if task in resumes:
        return (
            f"Task {task + 1}: go back to task {resumes[task] + 1} and re-check its figures "
            "against the new budget; do not change what was agreed."
        )
    return f"Task {task + 1}: prepare the quote for customer C{task + 1:02d} (laptops, EU)."


def build_scripts(
    turns: int = TURNS, tasks: int = TASKS
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """The unified@2 script, its prefix@2 twin and the run inputs (`turns` steps each).

    `tasks` tasks of LOOKUPS_PER_TASK lookups; the last runs on until the turns are used.
    Every block of 10 tasks resumes and asks for maintenance as the first 10 do.
    """
    from labs.scenario import ScriptBuilder

    resumes = _resumes(tasks)
    maintainer_runs = _maintainer_runs(tasks)
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

    for task in range(tasks):
        last_task = task == tasks - 1
        inputs.append(_task_input(task, resumes))
        unified.user_input()
        window = f"task-{(resumes.get(task, task)) + 1:02d}"
        opening: dict[str, Any] = {
            "purpose": "a new task gets its own window",
            "expectedWindowId": "main",
            "windowId": window,
            "input": f"{inputs[-1]} Come back to main with the outcome.",
        }
        if task in resumes:
            opening["resume"] = True
        else:
            opening["goal"] = f"Quote for customer C{task + 1:02d}"
        protocol("context_window_open", opening)
        batch_first = None
        n = 0
        while True:
            # The last task runs on until only its complete + answer turns are left.
            if last_task:
                if len(unified.steps) >= turns - 2:
                    break
            elif n >= LOOKUPS_PER_TASK:
                break
            name = LOOKUP_TOOLS[n % len(LOOKUP_TOOLS)]
            first, last, _ = host(name, {"item": f"laptop-{task}-{n}", "qty": n % 5 + 1})
            batch_first = batch_first or first
            n += 1
            if n % FOLD_EVERY == 0 and len(unified.steps) < turns - 2:
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
            if n % 10 == 0 and len(unified.steps) < turns - 2:
                protocol(
                    "context_window_memory_set",
                    {
                        "purpose": "keep the running quote",
                        "expectedWindowId": window,
                        "memory": f"Task {task + 1}: {n} lookups done; running total "
                        f"{4150 + 37 * n} EUR.",
                    },
                )
            if maintainer_runs.get(task) == n:
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


# --------------------------------------------------------------------------- settings

SIZES_FIXED = "fixed"  # scenario.host_result: ~3 KB per lookup (the economy before issue 34)
SIZES_LONG_TAIL = "long-tail"  # lookup_chars: seeded, most under 2 KB, some 20-60 KB
SIZE_SEED = "bench-tokens-34"


@dataclass(frozen=True)
class Setting:
    """One economy run: the budget, the turns, the tool results' sizes and the views."""

    key: str
    max_input_tokens: int
    turns: int
    tasks: int
    sizes: str
    views: tuple[str, ...]

    @property
    def title(self) -> str:
        sizes = "~3 KB lookups" if self.sizes == SIZES_FIXED else "long-tail lookups (seeded)"
        return f"maxInputTokens {self.max_input_tokens // 1000}k, {self.turns} turns, {sizes}"


# The views before issue 34, plus unified@2 without folds (masking's own value at 16k).
VIEWS_16K = (
    "unified@1",
    "unified@2",
    "unified@3 A",
    "unified@3 B",
    "unified@3 C",
    "unified@4",
    "unified@4 no folds",
    "unified@2 no folds",
    "prefix@2",
)
# Every view with both agent behaviours (issue 34), the folding one first.
VIEWS_ALL = (
    "unified@1",
    "unified@2",
    "unified@3 A",
    "unified@3 B",
    "unified@3 C",
    "unified@4",
    "unified@1 no folds",
    "unified@2 no folds",
    "unified@3 A no folds",
    "unified@3 B no folds",
    "unified@3 C no folds",
    "unified@4 no folds",
    "prefix@2",
)
VIEWS_LONG = ("unified@2", "unified@4", "unified@2 no folds", "unified@4 no folds", "prefix@2")
# Today's script at 16k (its figures unchanged), the realistic one at 128k, and the long one
# (`make bench-long`).
SETTING_16K = Setting("16k", 16_000, TURNS, TASKS, SIZES_FIXED, VIEWS_16K)
SETTING_128K = Setting("128k", 128_000, TURNS, TASKS, SIZES_LONG_TAIL, VIEWS_ALL)
SETTING_LONG = Setting("128k-1000", 128_000, 1000, 34, SIZES_LONG_TAIL, VIEWS_LONG)


def lookup_chars(item: str) -> int:
    """The size of a lookup's result in the long-tail setting: a seeded draw per item.

    80% log-uniform in 300-2,000 characters, 15% log-uniform in 2,000-20,000, 5% uniform in
    20,000-60,000: most results under 2 KB, a few of 20-60 KB. Every view gets the same size
    for the same lookup (the item names it).
    """
    rng = random.Random(f"{SIZE_SEED}:{item}")
    u = rng.random()
    if u < 0.80:
        return int(math.exp(rng.uniform(math.log(300), math.log(2_000))))
    if u < 0.95:
        return int(math.exp(rng.uniform(math.log(2_000), math.log(20_000))))
    return int(rng.uniform(20_000, 60_000))


def sized_host_result(tool_name: str, arguments: dict[str, Any], chars: int) -> str:
    """A lookup result of about `chars` characters: scenario.host_result's rows, as many as fit."""
    length = len(json.dumps({"tool": tool_name, "query": arguments, "rows": []}))
    rows: list[str] = []
    while length < chars:
        n = len(rows)
        row = (
            f"{tool_name} row {n:04d}: item=laptop-{n % 7} region=EU price={1200 + n * 7} "
            f"stock={40 - n % 9} note=standard terms apply"
        )
        length += len(json.dumps(row)) + (2 if rows else 0)
        rows.append(row)
    return json.dumps({"tool": tool_name, "query": arguments, "rows": rows})


def host_content(tool_name: str, arguments: dict[str, Any], sizes: str) -> str:
    """What the bench's host answers to a lookup under `sizes`."""
    from labs.scenario import host_result

    if sizes == SIZES_FIXED:
        return host_result(tool_name, arguments)
    return sized_host_result(tool_name, arguments, lookup_chars(str(arguments.get("item"))))


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


def _versions(setting: Setting) -> dict[str, Any]:
    """A published AgentVersion per view of `setting` (`scenario.PROTOCOL_VIEWS`), by label."""
    from agents.models import Agent, AgentVersion, Application, Tool
    from labs.scenario import protocol_view

    application, _ = Application.objects.get_or_create(name=APPLICATION)
    tools = []
    for name in (*LOOKUP_TOOLS, NOTE_TOOL):
        tool, _ = Tool.objects.get_or_create(
            application=application,
            name=name,
            defaults={"description": f"Host tool {name}.", "input_schema": {"type": "object"}},
        )
        tools.append(tool)
    unified_script, prefix_script, _inputs = build_scripts(setting.turns, setting.tasks)

    def version(name: str, **fields: Any) -> AgentVersion:
        agent, _ = Agent.objects.get_or_create(application=application, name=name)
        return AgentVersion.objects.create(
            agent=agent,
            number=(agent.versions.count() or 0) + 1,
            status=AgentVersion.Status.PUBLISHED,
            model_provider="scripted",
            model_name="scripted-bench",
            max_input_tokens=setting.max_input_tokens,
            max_turns_per_run=1000,
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
    for view in map(protocol_view, setting.views):
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


def _answer_host_calls(session_id: Any, sizes: str) -> None:
    """Write a result for each host call of the current run that has none (one read)."""
    from django.db.models import Exists, OuterRef

    from sessions_app.models import Message, Session
    from sessions_app.services.messages import NewMessage, message_write

    session = Session.objects.only("id", "current_run_id").get(pk=session_id)
    answers = Message.objects.filter(
        session=session, kind="tool_result", tool_call_id=OuterRef("tool_call_id")
    )
    calls = (
        Message.objects.filter(session=session, run_id=session.current_run_id, kind="tool_call")
        .exclude(tool_name__startswith="context_")
        .filter(~Exists(answers))
        .order_by("index")
    )
    for call in calls:
        content = (
            "noted"
            if call.tool_name == NOTE_TOOL
            else host_content(call.tool_name, call.arguments or {}, sizes)
        )
        message_write(
            session_id=session.id,
            message=NewMessage(
                role="tool", kind="tool_result", content=content, tool_call_id=call.tool_call_id
            ),
            host=True,
        )


def _drive(version: Any, inputs: list[str], sizes: str) -> Any:
    from sessions_app.services.runs import run_start
    from sessions_app.services.runtime import run_advance
    from sessions_app.services.sessions import session_create

    session, _ = session_create(agent_version=version, inputs={"customer": "ACME"})
    for content in inputs:
        run, _ = run_start(session_id=session.id, content=content)
        status = run_advance(run_id=run.id)
        while status == "waiting_for_host_tool":
            _answer_host_calls(session.id, sizes)
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
    "unified@2 no folds": "#1b9e77",
    "unified@4 no folds": "#7570b3",
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
    """Section 3: today's script at 16k (`make bench`)."""
    return measure(SETTING_16K)


def run_realistic() -> dict[str, Any]:
    """Section 3b: the realistic setting, 128k and long-tail results (`make bench`)."""
    return measure(SETTING_128K)


def run_long() -> dict[str, Any]:
    """Section 3c: 1000 turns at 128k (`make bench-long`)."""
    return measure(SETTING_LONG)


def _every(turns: int) -> list[int]:
    step = 10 if turns <= 300 else 50
    return [1, *range(step, turns + 1, step)]


def measure(setting: Setting) -> dict[str, Any]:
    """Drive every view of `setting`, then replay each with caching, with the baselines."""
    from django.test.utils import override_settings

    from sessions_app.models import FoldRecord, MaintenanceJob

    turns = setting.turns
    banner(
        f"Token economy ({setting.title}): {', '.join(setting.views)}, the full history "
        "and the provider baselines"
    )
    started = time.perf_counter()
    _unified, _prefix, inputs = build_scripts(setting.turns, setting.tasks)
    with override_settings(RUNTIME_AUTOSTART=False, CELERY_TASK_ALWAYS_EAGER=True):
        versions = _versions(setting)
        sessions = {}
        for label, v in versions.items():
            began = time.perf_counter()
            sessions[label] = _drive(v, inputs, setting.sizes)
            log(f"{label}: {turns} turns driven in {time.perf_counter() - began:.1f} s")
    driven = time.perf_counter() - started
    snaps = {label: _turns(s) for label, s in sessions.items()}
    for label, found in snaps.items():
        if len(found) != turns:
            raise RuntimeError(f"{label}: {len(found)} turns, expected {turns}")
    tokens = {
        label: [int((s.usage or {}).get("inputTokens") or 0) for s in found]
        for label, found in snaps.items()
    }
    full = _full_history_tokens(sessions[FULL_HISTORY_OF], snaps[FULL_HISTORY_OF])
    rows = []
    for turn in _every(turns):
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
            sum(found) // turns,
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
        ("full history", sum(full), sum(full) // turns, max(full), "0%", "-", "-", "-", "-")
    )
    summary = table(
        (
            "view",
            f"tokens, {turns} turns",
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
    _chart(setting, sessions, snaps, tokens, full)
    sessions_text = ", ".join(f"{label} {s.id}" for label, s in sessions.items())
    log(f"sessions: {sessions_text}")

    # What every view costs once the provider caches (the full history from the prefix@2
    # log), and what the providers' own strategies make of that full history.
    replay_started = time.perf_counter()
    economies, baselines = _replay(sessions)
    cached = economy_section(economies, stats, think_seconds=CACHE_THINK_SECONDS)
    compared = comparison_section(economies, stats, baselines)
    print(cached["table"])
    print(cached["breaks"])
    print(compared["table"])
    replayed = time.perf_counter() - replay_started
    log(f"sessions driven in {driven:.1f} s; {len(economies)} views replayed in {replayed:.1f} s")
    return {
        "setting": {
            "key": setting.key,
            "title": setting.title,
            "max_input_tokens": setting.max_input_tokens,
            "turns": turns,
            "sizes": setting.sizes,
            "views": list(setting.views),
        },
        "table": text,
        "summary": summary,
        "stats": stats,
        "sizes": _size_stats(setting, sessions[FULL_HISTORY_OF]),
        "sessions": {label: str(s.id) for label, s in sessions.items()},
        "json": json.dumps({"tokens": tokens, "full": full}),
        "cache": cached,
        "compared": compared,
        "drive_seconds": driven,
        "replay_seconds": replayed,
        "seconds": time.perf_counter() - started,
    }


def _replay(sessions: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every view's cache economy, the full history's, and each provider baseline's."""
    from contextproto import tokens as token_count
    from contextproto.economics.cache_report import cache_economy
    from contextproto.economics.cache_sim import CacheSimulator
    from contextproto.economics.strategies import strategy_turns
    from contextproto.protocol.adapters import PROVIDER_ANTHROPIC_MESSAGES as ANTHROPIC
    from contextproto.protocol.adapters import adapt
    from sessions_app.cache_economy import session_cache_economy, session_turns

    economies = {}
    for label, session in sessions.items():
        if label == FULL_HISTORY_OF:
            continue
        began = time.perf_counter()
        report = session_cache_economy(
            session.id, think_seconds=CACHE_THINK_SECONDS, full_history=False, view=label
        )
        economies[label] = report.view
        log(f"{label}: replayed with caching in {time.perf_counter() - began:.1f} s")
    began = time.perf_counter()
    loaded = session_turns(sessions[FULL_HISTORY_OF].id, think_seconds=CACHE_THINK_SECONDS)
    label_of = token_count.tokenizer_label()

    def economy(turns: list[Any], view: str, providers: tuple[str, ...] | None = None) -> Any:
        settings = loaded.settings
        if providers is not None:
            settings = replace(settings, providers=providers)
        return cache_economy(
            turns, token_count.count_tokens, view=view, tokenizer=label_of, settings=settings
        )

    # In PROTOCOL_VIEWS order: prefix@2 before the full history, as before.
    ordered = {}
    for label in sessions:
        if label == FULL_HISTORY_OF:
            ordered[label] = economy(loaded.views, label)
            ordered[FULL_HISTORY] = economy(loaded.full_history, FULL_HISTORY)
        else:
            ordered[label] = economies[label]
    log(f"{FULL_HISTORY_OF} and the full history replayed in {time.perf_counter() - began:.1f} s")
    # The triggers compare a request's input tokens as the simulator counts them (Anthropic's
    # rendering, the same counter), so "over 100,000" means what the cost columns count.
    counter = CacheSimulator(token_count.count_tokens)
    anthropic_settings = replace(loaded.settings, providers=(ANTHROPIC,))

    def request_tokens(turn: Any) -> int:
        body = adapt(
            turn.projection,
            ANTHROPIC,
            list(turn.tools),
            prompt_cache=anthropic_settings.prompt_cache,
            cache_key=anthropic_settings.cache_key,
        ).body
        return counter.linearise(ANTHROPIC, body).total_tokens

    baselines = {}
    for strategy in STRATEGIES:
        began = time.perf_counter()
        applied = strategy_turns(
            loaded.full_history,
            strategy,
            token_count.count_tokens,
            request_tokens=request_tokens,
        )
        baselines[strategy.label] = Baseline(
            strategy=strategy,
            economy=economy(applied.turns, strategy.label, strategy.providers),
            summary_output_tokens=applied.summary_output_tokens,
            compactions=applied.compactions,
            cleared_turns=applied.cleared_turns,
            largest_request=applied.largest_request,
        )
        log(f"{strategy.label}: replayed in {time.perf_counter() - began:.1f} s")
    return ordered, baselines


def _size_stats(setting: Setting, session: Any) -> dict[str, Any]:
    """How large the lookups' results were in this run (characters)."""
    from sessions_app.models import Message

    sizes = sorted(
        len(m.content) if isinstance(m.content, str) else len(json.dumps(m.content))
        for m in Message.objects.filter(session=session, kind="tool_result").exclude(
            tool_name__in=[NOTE_TOOL]
        )
        if m.tool_name in LOOKUP_TOOLS
    )
    if not sizes:
        return {}
    return {
        "sizes": setting.sizes,
        "count": len(sizes),
        "median": sizes[len(sizes) // 2],
        "p90": sizes[int(len(sizes) * 0.9)],
        "max": sizes[-1],
        "under_2k": sum(1 for n in sizes if n < 2_000),
        "over_20k": sum(1 for n in sizes if n >= 20_000),
        "total": sum(sizes),
    }


def _chart(
    setting: Setting,
    sessions: dict[str, Any],
    snaps: dict[str, list[Any]],
    tokens: dict[str, list[int]],
    full: list[int],
) -> None:
    """The input-token chart: token_economy.svg at 16k, token_economy_<key>.svg otherwise."""
    if setting.key == SETTING_16K.key:
        path = SVG_PATH
        names = ("prefix@2", "unified@2", "unified@4")
    else:
        path = SVG_PATH.with_name(f"token_economy_{setting.key}.svg")
        names = ("prefix@2", "unified@2 no folds", "unified@4 no folds")
    series = {"full history": full, **{n: tokens[n] for n in names if n in tokens}}
    marks = {
        n: _commit_turns(sessions[n], snaps[n]) for n in ("unified@2", "prefix@2") if n in sessions
    }
    path.write_text(_svg(series, marks))
    log(f"chart written to {path.relative_to(BENCH_DIR.parent)}")
