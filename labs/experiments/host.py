"""Play the host for one run: advance it, answer host tools, run maintenance, judge it.

Runs go through the same code as production (`run_start`, `run_advance`, the dispatcher,
maintenance); the harness only answers host tools with the plan's fixed results, runs the
maintenance a turn queued before the next turn, charges the budget, and judges the run
(`checks`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from contextproto.errors import EXPERIMENT_BUDGET_EXHAUSTED
from contextproto.protocol.messages import KIND_TOOL_CALL, KIND_TOOL_RESULT
from labs.experiments import checks
from labs.experiments.ledger import Budget, BudgetExhausted, Tokens
from labs.experiments.records import RunRecord
from labs.experiments.setup import Group
from labs.experiments.spec import RunSpec
from sessions_app.maintenance import maintenance_execute
from sessions_app.models import MaintenanceJob, ProjectionSnapshot, Run, Session
from sessions_app.reads import raw_log
from sessions_app.services.messages import NewMessage, message_write
from sessions_app.services.runs import run_start
from sessions_app.services.runtime import TurnReport, run_advance

MAX_RETRY_WAIT_SECONDS = 120


@dataclass(frozen=True)
class PlayedRun:
    """A run's record, and whether the budget stopped it."""

    record: RunRecord
    stopped: bool


def answer_host_calls(session: Session, host_results: Mapping[str, str]) -> None:
    """Play the host: answer every unanswered host tool call with the plan's result."""
    session.refresh_from_db()
    log = raw_log.log_page(session.id, window_id=None, after_index=0, limit=session.last_index)
    answered = {m.tool_call_id for m in log if m.kind == KIND_TOOL_RESULT}
    for call in log:
        result = host_results.get(call.tool_name or "")
        if call.kind == KIND_TOOL_CALL and call.tool_call_id not in answered and result is not None:
            message_write(
                session_id=session.id,
                message=NewMessage(
                    role="tool",
                    kind=KIND_TOOL_RESULT,
                    content=result,
                    tool_call_id=call.tool_call_id,
                ),
                host=True,
            )


def _advance(
    run: Run,
    session: Session,
    budget: Budget,
    tokens: Tokens,
    maintenance: Tokens,
    host_results: Mapping[str, str],
) -> None:
    """Advance `run` until it ends, charging every model call to the budget."""
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
                budget.spent += tokens.add(snapshot.usage)
        budget.charge_maintenance(session, maintenance)
        if budget.exhausted and turn.outcome != Run.Status.COMPLETED:
            raise BudgetExhausted(budget.spent, budget.total)

    status = run_advance(run_id=run.id, on_turn=on_turn)
    while status in (Run.Status.WAITING_FOR_HOST_TOOL, Run.Status.QUEUED):
        if status == Run.Status.QUEUED:
            # A transient provider error re-queued the run (bounded by the runtime).
            run.refresh_from_db()
            wait = (run.error or {}).get("retryInSeconds", 5)
            time.sleep(min(float(wait), MAX_RETRY_WAIT_SECONDS))
        else:
            answer_host_calls(session, host_results)
        status = run_advance(run_id=run.id, on_turn=on_turn)
    budget.charge_maintenance(session, maintenance)


def play_run(
    group: Group,
    stage_id: str,
    session: Session,
    number: int,
    spec: RunSpec,
    memories: dict[int, dict[str, str]],
    *,
    budget: Budget,
    host_results: Mapping[str, str],
    scripted: bool,
) -> PlayedRun:
    """Run the session's `number`-th run to its end and judge it (`memories`: the memory
    slots after each earlier run of the session, this one's added)."""
    run, _ = run_start(session_id=session.id, content=spec.input)
    tokens, maintenance = Tokens(), Tokens()
    _advance(run, session, budget, tokens, maintenance, host_results)
    group.tokens.merge(tokens)
    group.maintenance_tokens.merge(maintenance)

    facts = checks.run_facts(session, run)
    memories[number] = checks.memory_slots(session)
    protocol = group.spec.protocol
    designed = checks.designed_state(protocol.id, protocol.version, protocol.options)
    found = [
        checks.check_completed(facts),
        checks.check_state_message(facts, designed),
        checks.check_wrong_window_writes(facts),
        checks.check_read_back(facts),
        checks.check_repeated_calls(facts),
    ] + [
        checks.plan_check(c, facts, group_id=group.id, memories_after=memories) for c in spec.expect
    ]
    group.state_checks += [c.to_dict() for c in found if c.name == "stateMessage"]
    stopped = (run.error or {}).get("code") == EXPERIMENT_BUDGET_EXHAUSTED
    if run.status == Run.Status.FAILED and not stopped:
        group.provider_errors.append({"stage": stage_id, "run": number, **(run.error or {})})
    record: RunRecord = {
        "number": number,
        "input": spec.input,
        "runId": run.id.hex,
        "status": run.status,
        "verdict": "stopped" if stopped else checks.verdict(found),
        "turns": run.turns,
        "answer": checks.answer_preview(facts),
        "toolCalls": [c.tool_name for c in facts.calls],
        "checks": [c.to_dict() for c in found],
        "tokens": tokens.to_dict(scripted),
        "maintenanceTokens": maintenance.to_dict(scripted),
        "snapshotIds": [str(s.id) for s in facts.snapshots],
    }
    return PlayedRun(record, stopped)
