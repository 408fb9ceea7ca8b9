"""The quote → schedule → "budget is now 9000" scenario (SPEC §13 stage 3) for the scripted model.

Used by `manage.py demo` and by the end-to-end test. The scripts are built in Python so the
message indices the model "sees" (for context_fold_create) follow from the steps.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from contextproto.protocol.folds import fold_id_for

RUN_INPUTS = (
    "Prepare a quote for 3 laptops for ACME; the budget is 5000.",
    "Now schedule the delivery of the laptops for next Tuesday.",
    "The budget is now 9000. Go back to the quote and confirm it; do not change it.",
)
QUOTE_MEMORY = "Quote: 3 laptops at 1300 + shipping 250 = 4150 total; within budget."
HOST_TOOLS = ("price_lookup", "shipping_lookup", "stock_lookup")


def host_result(tool_name: str, arguments: dict[str, Any]) -> str:
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
    from sessions_app.models import Session
    from sessions_app.selectors import log_page
    from sessions_app.services.messages import message_write

    session = Session.objects.get(pk=session_id)
    log = log_page(session.id, window_id=None, after_index=0, limit=session.last_index)
    answered = {m.tool_call_id for m in log if m.kind == "tool_result"}
    count = 0
    for call in log:
        if call.kind == "tool_call" and call.tool_name in HOST_TOOLS:
            if call.tool_call_id not in answered:
                message_write(
                    session_id=session.id,
                    role="tool",
                    kind="tool_result",
                    content=host_result(call.tool_name, call.arguments or {}),
                    tool_call_id=call.tool_call_id,
                )
                count += 1
    return count


def drive_run(session_id: Any, content: str, on_turn: Any = None) -> str:
    """Start a run and advance it in this process, answering host tools, until it ends."""
    from sessions_app.services.runs import run_start
    from sessions_app.services.runtime import run_advance

    run, _ = run_start(session_id=session_id, content=content)
    status = run_advance(run_id=run.id, on_turn=on_turn)
    while status == "waiting_for_host_tool":
        answer_pending_host_calls(session_id)
        status = run_advance(run_id=run.id, on_turn=on_turn)
    return status
