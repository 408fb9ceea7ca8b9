"""The quote → schedule → "budget is now 9000" scenario (docs/architecture.md: Labs) for the
scripted model.

Used by `manage.py demo` and by the end-to-end test. The scripts are built in Python so the
message indices the model "sees" (for context_fold_create) follow from the steps.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from contextproto.protocol.folds import fold_id_for
from contextproto.protocol.messages import KIND_TOOL_CALL, KIND_TOOL_RESULT
from contextproto.protocol.vocabulary import (
    PLACEMENT_BEFORE_HISTORY_ASSISTANT,
    PLACEMENT_TRAILING_ASSISTANT,
    PLACEMENT_TRAILING_USER,
    PREFIX,
    UNIFIED,
)
from sessions_app.models import Session
from sessions_app.reads.raw_log import log_page, log_run_inputs
from sessions_app.services.messages import NewMessage, message_write
from sessions_app.services.runs import run_start
from sessions_app.services.runtime import run_advance

RUN_INPUTS = (
    "Prepare a quote for 3 laptops for ACME; the budget is 5000.",
    "Now schedule the delivery of the laptops for next Tuesday.",
    "The budget is now 9000. Go back to the quote and confirm it; do not change it.",
)
QUOTE_MEMORY = "Quote: 3 laptops at 1300 + shipping 250 = 4150 total; within budget."
HOST_TOOLS = ("price_lookup", "shipping_lookup", "stock_lookup")
# prefix@2's stand-in for a context tool call in the long story (a tiny host tool).
NOTE_TOOL = "progress_note"


@dataclass(frozen=True)
class ProtocolView:
    """One protocol configuration the bench and the demo compare: a label, id@version, options.

    A windowed (unified) view runs the unified script; prefix runs its twin, which calls the
    tiny host tool `progress_note` where the unified agent calls a context tool.
    """

    label: str
    protocol_id: str
    version: int
    options: Mapping[str, Any] = field(default_factory=dict)
    # False: the agent never folds; where the script folds it notes progress instead (the
    # prefix twin's tiny host call), leaving old tool results to unified@4's masking tier.
    folds: bool = True

    @property
    def windowed(self) -> bool:
        return self.protocol_id == UNIFIED


# Every view the token economy compares; a new protocol version joins with one line.
PROTOCOL_VIEWS = (
    ProtocolView("unified@1", UNIFIED, 1),
    ProtocolView("unified@2", UNIFIED, 2),
    ProtocolView(
        "unified@3 A", UNIFIED, 3, {"stateMessagePlacement": PLACEMENT_TRAILING_ASSISTANT}
    ),
    ProtocolView(
        "unified@3 B", UNIFIED, 3, {"stateMessagePlacement": PLACEMENT_BEFORE_HISTORY_ASSISTANT}
    ),
    ProtocolView("unified@3 C", UNIFIED, 3, {"stateMessagePlacement": PLACEMENT_TRAILING_USER}),
    # The catalog's defaults (masking tier, cache-stable header): what an operator gets.
    ProtocolView("unified@4", UNIFIED, 4),
    # The same defaults with an agent that lets masking, not folds, shrink old lookups.
    ProtocolView("unified@4 no folds", UNIFIED, 4, folds=False),
    ProtocolView("prefix@2", PREFIX, 2),
    # Every other unified view with the agent that does not fold (issue 34): the same work,
    # a progress note where the script folds, so masking's own value shows against them.
    ProtocolView("unified@1 no folds", UNIFIED, 1, folds=False),
    ProtocolView("unified@2 no folds", UNIFIED, 2, folds=False),
    ProtocolView(
        "unified@3 A no folds",
        UNIFIED,
        3,
        {"stateMessagePlacement": PLACEMENT_TRAILING_ASSISTANT},
        folds=False,
    ),
    ProtocolView(
        "unified@3 B no folds",
        UNIFIED,
        3,
        {"stateMessagePlacement": PLACEMENT_BEFORE_HISTORY_ASSISTANT},
        folds=False,
    ),
    ProtocolView(
        "unified@3 C no folds",
        UNIFIED,
        3,
        {"stateMessagePlacement": PLACEMENT_TRAILING_USER},
        folds=False,
    ),
)

# The agents of `manage.py demo` (it runs each view's story once, so it stays short).
DEMO_VIEWS = ("unified@2", "unified@4", "prefix@2")


def protocol_view(label: str) -> ProtocolView:
    """The entry of PROTOCOL_VIEWS called `label` (KeyError if none)."""
    for view in PROTOCOL_VIEWS:
        if view.label == label:
            return view
    raise KeyError(
        f"no protocol view {label!r}; known: {', '.join(v.label for v in PROTOCOL_VIEWS)}"
    )


def host_result(tool_name: str, arguments: object) -> str:
    """Deterministic, bulky host tool output: the kind of text folds and checkpoints absorb."""
    rows = [
        f"{tool_name} row {n:03d}: item=laptop-{n % 7} region=EU price={1200 + n * 7} "
        f"stock={40 - n % 9} note=standard terms apply"
        for n in range(30)
    ]
    return json.dumps({"tool": tool_name, "query": arguments, "rows": rows})


@dataclass
class ScriptBuilder:
    """Appends scripted steps while tracking the MessageIndex each message will get."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    next_index: int = 1
    calls: int = 0

    def user_input(self) -> int:
        self.next_index += 1
        return self.next_index - 1

    def call(self, name: str, arguments: dict[str, Any], **step: Any) -> tuple[int, int, str]:
        self.calls += 1
        call_id = f"s{self.calls}"
        self.steps.append(
            {"toolCalls": [{"id": call_id, "name": name, "arguments": arguments}], **step}
        )
        first = self.next_index
        self.next_index += 2
        return first, first + 1, call_id

    def text(self, text: str, **step: Any) -> int:
        self.steps.append({"text": text, **step})
        self.next_index += 1
        return self.next_index - 1


def unified_script() -> dict[str, Any]:
    """unified@2: windows alpha/beta, a refused wrong-window write, a fold and its read-back."""
    b = ScriptBuilder()
    b.user_input()  # run 1
    b.call(
        "context_window_open",
        {
            "purpose": "separate the quote task",
            "expectedWindowId": "main",
            "windowId": "alpha",
            "goal": "Quote for 3 laptops for ACME",
            "input": "Prepare the quote; budget 5000.",
        },
    )
    first, _, _ = b.call(
        "price_lookup",
        {"item": "laptop", "qty": 3},
        expect={"contains": ["context_state", "Quote for 3 laptops"]},
    )
    b.call("shipping_lookup", {"to": "ACME"})
    _, last, _ = b.call("stock_lookup", {"item": "laptop"})
    b.call("context_history_list", {"purpose": "find finished lookups to fold"})
    _, _, fold_call = b.call(
        "context_fold_create",
        {
            "purpose": "lookups are done",
            "expectedWindowId": "alpha",
            "fromIndex": first,
            "throughIndex": last,
            "summary": "Looked up price (1300 each), shipping (250), stock.",
        },
    )
    b.call(
        "context_window_memory_set",
        {
            "purpose": "keep the quote",
            "expectedWindowId": "alpha",
            "memory": QUOTE_MEMORY,
        },
        expect={"contains": ["context_fold"]},
    )
    b.text("Quote ready: 4150 for 3 laptops including shipping.")
    b.user_input()  # run 2
    b.call(
        "context_window_open",
        {
            "purpose": "scheduling is a new task",
            "expectedWindowId": "alpha",
            "windowId": "beta",
            "goal": "Schedule the delivery",
            "input": "Quote in alpha is done (4150). Schedule delivery for Tuesday.",
        },
    )
    # The model still believes it is in alpha: the guard refuses the write.
    b.call(
        "context_window_memory_set",
        {
            "purpose": "note the schedule",
            "expectedWindowId": "alpha",
            "memory": "Delivery: Tuesday",
        },
    )
    b.call(
        "context_window_memory_set",
        {
            "purpose": "note the schedule",
            "expectedWindowId": "beta",
            "memory": "Delivery: Tuesday, 9:00-12:00",
        },
        expect={"contains": ["context_window_mismatch"]},
    )
    b.text("Delivery scheduled for Tuesday 9:00-12:00.")
    b.user_input()  # run 3
    b.call(
        "context_window_open",
        {
            "purpose": "back to the quote",
            "expectedWindowId": "beta",
            "windowId": "alpha",
            "resume": True,
            "input": "Scheduling done in beta. Re-check the quote against budget 9000; "
            "do not overwrite it.",
        },
    )
    b.call(
        "context_fold_read",
        {"purpose": "re-check the lookups", "foldId": fold_id_for(fold_call)},
        expect={"contains": ["budget is now 9000", "4150"]},
    )
    b.call(
        "context_maintainer_run",
        {"purpose": "compress finished quote work", "expectedWindowId": "alpha"},
    )
    b.text(
        "The quote stays at 4150, well within the new budget of 9000.",
        expect={"contains": ["4150"]},
    )
    return {"description": "quote/schedule/budget scenario, unified@2", "steps": b.steps}


def prefix_script() -> dict[str, Any]:
    """prefix@2: the same work without context tools; the host compresses history."""
    b = ScriptBuilder()
    b.user_input()
    b.call("price_lookup", {"item": "laptop", "qty": 3})
    b.call("shipping_lookup", {"to": "ACME"})
    b.call("stock_lookup", {"item": "laptop"})
    b.text("Quote ready: 4150 for 3 laptops including shipping.")
    b.user_input()
    b.text("Delivery scheduled for Tuesday 9:00-12:00.")
    b.user_input()
    b.text("The quote stays at 4150, well within the new budget of 9000.")
    return {"description": "quote/schedule/budget scenario, prefix@2", "steps": b.steps}


def maintainer_script(turns: int = 20) -> dict[str, Any]:
    """The context-maintainer: one checkpoint per call."""
    return {
        "description": "context-maintainer",
        "steps": [
            {
                "text": f"Checkpoint {n + 1}: quote for 3 laptops is 4150 (price 1300 each, "
                "shipping 250); lookups finished; the user said not to change the quote."
            }
            for n in range(turns)
        ],
    }


def answer_pending_host_calls(session_id: Any) -> int:
    """Play the host: write results for the unanswered host tool calls (hot or archived)."""

    session = Session.objects.select_related("current_run").get(pk=session_id)
    first = 1
    if session.current_run is not None:
        # Only the current run can have open calls: scan from its first input, not from #1.
        inputs = log_run_inputs(session.id, session.current_run.id.hex, session.last_index)
        first = inputs[0].index if inputs else 1
    log = log_page(
        session.id, window_id=None, after_index=first - 1, limit=session.last_index - first + 1
    )
    answered = {m.tool_call_id for m in log if m.kind == KIND_TOOL_RESULT}
    count = 0
    for call in log:
        if call.kind == KIND_TOOL_CALL and call.tool_name in (*HOST_TOOLS, NOTE_TOOL):
            if call.tool_call_id not in answered:
                content = (
                    "noted"
                    if call.tool_name == NOTE_TOOL
                    else host_result(call.tool_name, call.arguments or {})
                )
                message_write(
                    session_id=session.id,
                    message=NewMessage(
                        role="tool",
                        kind=KIND_TOOL_RESULT,
                        content=content,
                        tool_call_id=call.tool_call_id,
                    ),
                    host=True,
                )
                count += 1
    return count


def drive_run(session_id: Any, content: str, on_turn: Any = None) -> str:
    """Start a run and advance it in this process, answering host tools, until it ends."""

    run, _ = run_start(session_id=session_id, content=content)
    status = run_advance(run_id=run.id, on_turn=on_turn)
    while status == "waiting_for_host_tool":
        answer_pending_host_calls(session_id)
        status = run_advance(run_id=run.id, on_turn=on_turn)
    return status


# ---------------------------------------------------------------- the long story (manage.py demo)


@dataclass(frozen=True)
class Task:
    """One task of the long story: a run that works in its own window (unified@2).

    `folds` are ranges of this task's lookups (1-based, inclusive) the agent folds right after
    the last lookup of each range; lookups outside every range stay in view. `resume` opens
    the window again instead of creating it, and then reads back its first fold.
    """

    window: str
    request: str
    answer: str
    goal: str = ""
    lookups: int = 0
    folds: tuple[tuple[int, int], ...] = ()
    memory: str = ""
    outcome: str = ""
    resume: bool = False
    maintainer_run: bool = False
    expect_answer: tuple[str, ...] = ()


STORY = (
    Task(
        window="quote-acme",
        goal="Quote for 3 laptops for ACME (budget 5000)",
        request="Prepare a quote for 3 laptops for ACME; the budget is 5000.",
        lookups=15,
        folds=((1, 5), (6, 10), (11, 15)),
        memory=QUOTE_MEMORY,
        outcome="ACME quote: 3 laptops, 4150 EUR including shipping.",
        answer="Quote ready: 4150 for 3 laptops including shipping.",
    ),
    Task(
        # The agent compares every carrier slot, so nothing is folded until it books: the
        # view crosses the maintenance trigger and the worker compresses the oldest slots.
        window="delivery-acme",
        goal="Schedule the ACME laptop delivery for next Tuesday",
        request="Now schedule the delivery of the laptops for next Tuesday.",
        lookups=18,
        folds=((15, 18),),
        memory="Delivery: Tuesday 9:00-12:00, carrier C2, booking ref D-4471.",
        outcome="ACME delivery booked: Tuesday 9:00-12:00 (ref D-4471).",
        answer="Delivery scheduled for Tuesday 9:00-12:00.",
    ),
    Task(
        window="quote-globex",
        goal="Quote for 10 monitors for Globex (budget 3000)",
        request="Prepare a quote for 10 monitors for Globex; the budget is 3000.",
        lookups=15,
        folds=((1, 5), (6, 10), (11, 15)),
        memory="Quote: 10 monitors at 240 + shipping 250 = 2650 total; within budget.",
        outcome="Globex quote: 10 monitors, 2650 EUR including shipping.",
        answer="Quote ready: 2650 for 10 monitors including shipping.",
    ),
    Task(
        window="quote-initech",
        goal="Quote for 5 docking stations for Initech",
        request="Prepare a quote for 5 docking stations for Initech.",
        lookups=15,
        folds=((1, 5), (6, 10), (11, 15)),
        memory="Quote: 5 docking stations at 180 + shipping 250 = 1150 total.",
        outcome="Initech quote: 5 docking stations, 1150 EUR including shipping.",
        answer="Quote ready: 1150 for 5 docking stations including shipping.",
    ),
    Task(
        window="quote-acme",
        resume=True,
        request="The budget is now 9000. Go back to the ACME quote and confirm it; "
        "do not change it.",
        lookups=3,
        maintainer_run=True,
        memory="Quote: 4150 total, confirmed within the new budget of 9000; unchanged.",
        outcome="ACME quote confirmed at 4150 against the new budget of 9000.",
        answer="The quote stays at 4150, well within the new budget of 9000.",
        expect_answer=("4150", "budget is now 9000"),
    ),
)


def story_scripts(tasks: tuple[Task, ...] = STORY) -> tuple[dict[str, Any], dict[str, Any]]:
    """The unified@2 script of the long story and its prefix@2 twin, step for step.

    Where unified@2 calls a context tool, prefix@2 (which has none) calls the tiny host tool
    `progress_note`; host lookups and answers are the same. So both sessions take exactly
    the same turns and carry the same bulky tool output, and their token counts compare.
    """
    unified = ScriptBuilder()
    twin: list[dict[str, Any]] = []
    first_folds: dict[str, str] = {}

    def context(name: str, arguments: dict[str, Any], **step: Any) -> str:
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
        return unified.call(name, arguments, **step)[2]

    def lookup(task: int, n: int) -> tuple[int, int]:
        name = HOST_TOOLS[n % len(HOST_TOOLS)]
        arguments = {"item": f"task{task}-item{n}", "qty": n % 5 + 1}
        twin.append(
            {"toolCalls": [{"id": f"p{len(twin) + 1}", "name": name, "arguments": arguments}]}
        )
        first, last, _ = unified.call(name, arguments)
        return first, last

    for number, task in enumerate(tasks, start=1):
        unified.user_input()
        opening: dict[str, Any] = {
            "purpose": "this task gets its own window",
            "expectedWindowId": "main",
            "windowId": task.window,
            "input": f"{task.request} Come back to main with the outcome.",
        }
        if task.resume:
            opening["resume"] = True
        else:
            opening["goal"] = task.goal
        context("context_window_open", opening)
        if task.resume and task.window in first_folds:
            context(
                "context_fold_read",
                {"purpose": "re-check the earlier lookups", "foldId": first_folds[task.window]},
            )
        if task.maintainer_run:
            # Asked before the remaining work, so the worker's checkpoint reaches this
            # window's later views.
            context(
                "context_maintainer_run",
                {"purpose": "compress the finished quote work", "expectedWindowId": task.window},
            )
        indices: dict[int, tuple[int, int]] = {}
        for n in range(1, task.lookups + 1):
            indices[n] = lookup(number, n)
            for start, end in task.folds:
                if n == end:
                    call_id = context(
                        "context_fold_create",
                        {
                            "purpose": "these lookups are finished",
                            "expectedWindowId": task.window,
                            "fromIndex": indices[start][0],
                            "throughIndex": indices[end][1],
                            "summary": f"Lookups {start}-{end} of task {number}: prices "
                            "1200-1400, shipping 250, stock fine.",
                        },
                    )
                    first_folds.setdefault(task.window, fold_id_for(call_id))
        if task.memory:
            context(
                "context_window_memory_set",
                {
                    "purpose": "keep the result",
                    "expectedWindowId": task.window,
                    "memory": task.memory,
                },
            )
        context(
            "context_window_complete",
            {"purpose": "task done", "expectedWindowId": task.window, "outcome": task.outcome},
        )
        step: dict[str, Any] = {}
        if task.expect_answer:
            step["expect"] = {"contains": list(task.expect_answer)}
        unified.text(task.answer, **step)
        twin.append({"text": task.answer})
    return (
        {"description": "ACME sales desk, unified@2", "steps": unified.steps},
        {"description": "ACME sales desk, prefix@2 twin", "steps": twin},
    )


def story_inputs(tasks: tuple[Task, ...] = STORY) -> list[str]:
    """The user input of each run of the long story."""
    return [task.request for task in tasks]


def story_maintainer_script(turns: int = 100) -> dict[str, Any]:
    """The context-maintainer of the long story: one checkpoint per call."""
    return {
        "description": "context-maintainer (long story)",
        "steps": [
            {
                "text": f"Checkpoint {n + 1}: the user runs quotes and deliveries for EU "
                "customers. Lookups so far: prices 1200-1400 per unit, shipping 250 per "
                "order, stock sufficient, carrier slots compared. Standing rule: never change "
                "an agreed quote; re-check it against the current budget."
            }
            for n in range(turns)
        ],
    }


# The conversation `manage.py demo` holds through the gateway (contract §14) with the official
# openai client: the client declares its own tool, the model notes the task with a protocol
# tool (the gateway runs it), calls the client's tool, and answers from its result.
GATEWAY_SYSTEM = "You work for ACME's sales desk; answer in one sentence."
GATEWAY_QUESTION = "What do 5000 units of A-100 cost?"
GATEWAY_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "price_lookup",
        "description": "Look up the unit price of a product.",
        "parameters": {
            "type": "object",
            "properties": {"product": {"type": "string"}},
            "required": ["product"],
        },
    },
}
GATEWAY_PRICE = "A-100: 12.40 EUR per unit, 8% off from 1000 units."
GATEWAY_ANSWER = "5000 units of A-100 cost 57,040 EUR (12.40 EUR each, 8% volume discount)."
# Answers left for whoever continues the conversation (the demo prints how).
GATEWAY_SPARE_ANSWERS = (
    "The quote stands: 57,040 EUR for 5000 x A-100 (scripted answer 1 of 3).",
    "Still 57,040 EUR; the task memory holds the request (scripted answer 2 of 3).",
    "That was the last scripted answer; the session's log keeps the conversation "
    "(scripted answer 3 of 3).",
)


def gateway_script() -> dict[str, Any]:
    """The scripted model of the demo's gateway conversation (openai-chat requests)."""
    return {
        "description": "ACME sales desk through the gateway",
        "wireFormat": "openai-chat",
        "steps": [
            {
                "expect": {"contains": [GATEWAY_QUESTION, GATEWAY_SYSTEM, "price_lookup"]},
                "text": "I'll note the request first.",
                "toolCalls": [
                    {
                        "name": "context_task_memory_set",
                        "arguments": {
                            "purpose": "keep the request",
                            "memory": "Quote 5000 x A-100 for ACME.",
                        },
                    }
                ],
            },
            {"toolCalls": [{"name": "price_lookup", "arguments": {"product": "A-100"}}]},
            {"expect": {"contains": [GATEWAY_PRICE]}, "text": GATEWAY_ANSWER},
            *({"text": text} for text in GATEWAY_SPARE_ANSWERS),
        ],
    }
