"""The built-in runtime (SPEC §8): advance a run turn by turn with the version's model.

freeze → project → snapshot → model → assistant message (with its snapshot id) → dispatch
protocol tools → next turn, until a final answer, `maxTurnsPerRun`, a host tool to wait
for, or an error. One worker advances a session at a time: a run is claimed under a row
lock with a lease, so a duplicate delivery of the task does nothing.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.db.models import Q, Sum
from django.utils import timezone

from contextproto.errors import (
    MAX_TURNS_REACHED,
    MODEL_EMPTY_ANSWER,
    PROVIDER_INVALID,
    SINGLE_TOOL_CALL_PER_TURN,
    TOOL_NOT_AVAILABLE,
    ApplicationError,
)
from contextproto.protocol import catalog
from contextproto.protocol.errors import INVALID_ARGUMENTS
from contextproto.protocol.host_tools import arguments_problem
from contextproto.protocol.messages import KIND_TOOL_CALL, KIND_TOOL_RESULT
from contextproto.protocol.tool_results import tool_failure
from sessions_app import nodes, providers
from sessions_app.models import ProjectionSnapshot, Run, Session
from sessions_app.providers.base import storable_reply
from sessions_app.reads import raw_log
from sessions_app.services.dispatch import tool_dispatch
from sessions_app.services.messages import message_write
from sessions_app.services.projection import projection_build
from sessions_app.services.runs import autostart, run_enqueue
from sessions_app.services.usage import turn_usage_record
from sessions_app.store import hooks


@dataclass(frozen=True)
class TurnReport:
    run_id: str
    turn: int
    window_id: str
    tool: str | None
    input_tokens: int | None
    outcome: str


def lease_seconds() -> int:
    return settings.RUN_LEASE_SECONDS


def _claim(run_id: UUID | str) -> Run | None:
    now = timezone.now()
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id).first()
        if run is None:
            return None
        if run.status == Run.Status.RUNNING and run.lease_until and run.lease_until > now:
            return None
        if run.status not in (Run.Status.QUEUED, Run.Status.RUNNING):
            return None
        run.status = Run.Status.RUNNING
        run.lease_until = now + timedelta(seconds=lease_seconds())
        run.save(update_fields=["status", "lease_until"])
        return run


def _finish(run: Run, status: str, error: dict[str, Any] | None = None) -> None:
    run.status = status
    run.error = error
    run.lease_until = None
    if status != Run.Status.WAITING_FOR_HOST_TOOL:
        run.finished_at = timezone.now()
    run.save(update_fields=["status", "error", "lease_until", "finished_at", "turns"])


def run_advance(*, run_id: UUID | str, on_turn: Any = None) -> str:
    """Advance `run_id` until it completes, waits for a host tool, fails or hits the limit.

    Returns the run's final status for this call ("skipped" when another worker owns it).
    `on_turn(TurnReport)` is called after each turn (the demo prints progress with it).
    """
    run = _claim(run_id)
    if run is None:
        return "skipped"
    session = Session.objects.select_related("agent_version").get(pk=run.session_id)
    version = session.agent_version
    try:
        # A version this worker does not carry fails the run with protocol_unknown_on_worker
        # (SPEC §12), never re-queued: the skew shows instead of a run on another catalog.
        nodes.require_protocol(version.context_protocol_id, version.context_protocol_version)
        provider = providers.provider_for(version.model_provider, version.model_config or {})
    except Exception as exc:  # a misconfigured version fails the run loudly, with its reason
        _finish(
            run,
            Run.Status.FAILED,
            {"code": getattr(exc, "code", PROVIDER_INVALID), "message": str(exc)},
        )
        return run.status
    while True:
        if run.turns >= version.max_turns_per_run:
            _finish(
                run,
                Run.Status.MAX_TURNS,
                {"code": MAX_TURNS_REACHED, "message": f"stopped after {run.turns} turns"},
            )
            return run.status
        try:
            outcome = _turn(session, version, run, provider, on_turn)
        except providers.ProviderError as exc:
            if exc.retryable and _retry_later(run, exc):
                return run.status
            _finish(run, Run.Status.FAILED, exc.as_dict())
            return run.status
        except ApplicationError as exc:
            _finish(
                run, Run.Status.FAILED, {"code": exc.code, "message": exc.message, **exc.details}
            )
            return run.status
        if outcome != "continue":
            _finish(run, outcome)
            return run.status
        Run.objects.filter(pk=run.pk).update(
            lease_until=timezone.now() + timedelta(seconds=lease_seconds())
        )


SWEEP_LIMIT = 500


def run_sweep() -> list[str]:
    """Re-enqueue runs a dead worker or a lost enqueue left behind; return their ids.

    A run still `running` past its lease lost its worker (killed, or its machine gone): the
    broker would redeliver its task only after the visibility timeout (an hour). A `queued`
    run older than a lease with no scheduled retry (no `error`) lost its enqueue (the broker
    was down). A duplicate delivery is harmless: `_claim` lets one worker in.
    """
    now = timezone.now()
    lost_enqueue = now - timedelta(seconds=lease_seconds())
    runs = Run.objects.filter(
        Q(status=Run.Status.RUNNING, lease_until__lt=now)
        | Q(status=Run.Status.QUEUED, error__isnull=True, created_at__lt=lost_enqueue)
    ).values_list("id", flat=True)[:SWEEP_LIMIT]
    ids = [str(run_id) for run_id in runs]
    for run_id in ids:
        hooks.run_advance_enqueue(run_id)
    return ids


def _retry_later(run: Run, exc: providers.ProviderError) -> bool:
    """Re-queue a run after a transient provider error, a bounded number of times.

    The failed turn wrote nothing, so the retry replays it. Returns False once the
    attempts (`RUN_PROVIDER_RETRIES`) are used up; the run then fails with the error.
    """
    previous = (run.error or {}).get("retries", 0) if isinstance(run.error, dict) else 0
    if previous >= settings.RUN_PROVIDER_RETRIES:
        return False
    delay = min(2**previous * 5, 120)
    run.status = Run.Status.QUEUED
    run.lease_until = None
    run.error = {**exc.as_dict(), "retries": previous + 1, "retryInSeconds": delay}
    run.save(update_fields=["status", "lease_until", "error"])
    if autostart():
        hooks.run_advance_enqueue(str(run.id), countdown=delay)
    return True


def _model_step(session: Session) -> int:
    # A scripted model's cursor: how many model calls this session's runs already made.
    return Run.objects.filter(session=session).aggregate(n=Sum("turns"))["n"] or 0


def _turn(session: Session, version, run: Run, provider, on_turn) -> str:
    snapshot = projection_build(
        session_id=session.id, provider=provider.wire_format, run_id=run.id.hex, use_cache=False
    )
    step = _model_step(session)
    started = time.monotonic()
    answer = provider.complete(snapshot.request, model=version.model_name, step=step)
    latency_ms = round((time.monotonic() - started) * 1000)
    reply = storable_reply(answer)
    tool_name = reply.tool_calls[0].name if reply.tool_calls else None
    if reply.tool_calls:
        outcome = _handle_tool_calls(session, version, snapshot, reply)
    elif reply.text is not None and reply.text.strip():
        # The answer names its view, as a host's may (SPEC §8): the timeline reads it there.
        message_write(
            session_id=session.id,
            role="assistant",
            kind="text",
            content=reply.text,
            snapshot_id=str(snapshot.id),
        )
        outcome = Run.Status.COMPLETED
    else:
        raise ApplicationError(
            MODEL_EMPTY_ANSWER, "The model answered with neither text nor a tool call."
        )
    # Counted once the answer is written: a worker dying before that replays the turn (and
    # a scripted model's step) instead of skipping it. Usage is recorded last, so a
    # maintenance job it triggers cannot make this turn's own call stale.
    run.turns += 1
    Run.objects.filter(pk=run.pk).update(turns=run.turns)
    turn_usage_record(
        snapshot=snapshot, usage=reply.usage, raw=reply.raw, model_latency_ms=latency_ms
    )
    if on_turn is not None:
        on_turn(
            TurnReport(
                run_id=run.id.hex,
                turn=run.turns,
                window_id=snapshot.window_id,
                tool=tool_name,
                input_tokens=snapshot.input_tokens,
                outcome=str(outcome),
            )
        )
    return outcome


def _handle_tool_calls(session: Session, version, snapshot: ProjectionSnapshot, reply) -> str:
    """Record every call of the answer, execute the first, refuse the others (pairing holds)."""
    if reply.text and reply.text.strip():
        message_write(session_id=session.id, role="assistant", kind="text", content=reply.text)
    host_tools = {t.name: t for t in version.tools.all()}
    for call in reply.tool_calls:
        message_write(
            session_id=session.id,
            role="assistant",
            kind=KIND_TOOL_CALL,
            content="",
            tool_call_id=call.id,
            tool_name=call.name,
            arguments=call.arguments,
            snapshot_id=str(snapshot.id),
        )
    waiting = False
    for position, call in enumerate(reply.tool_calls):
        if call.name in catalog.PROTOCOL_TOOL_NAMES:
            tool_dispatch(session_id=session.id, tool_call_id=call.id)
        elif position > 0:
            _host_error(
                session,
                call.id,
                SINGLE_TOOL_CALL_PER_TURN,
                "Only one tool call per turn is executed; call it again later.",
            )
        elif call.name not in host_tools:
            _host_error(
                session, call.id, TOOL_NOT_AVAILABLE, f"{call.name} is not a tool of this agent."
            )
        elif problem := arguments_problem(host_tools[call.name].input_schema, call.arguments):
            # The host only ever receives arguments its tool's schema allows (SPEC §18).
            _host_error(
                session,
                call.id,
                INVALID_ARGUMENTS,
                f"{call.name}: the arguments at {problem.path} {problem.message} Fix them and "
                "call the tool again.",
                path=problem.path,
            )
        else:
            waiting = True
    return Run.Status.WAITING_FOR_HOST_TOOL if waiting else "continue"


def _host_error(
    session: Session, tool_call_id: str, code: str, message: str, **context: Any
) -> None:
    body = tool_failure(code, message, details=context)
    message_write(
        session_id=session.id,
        role="tool",
        kind=KIND_TOOL_RESULT,
        content=json.dumps(body),
        tool_call_id=tool_call_id,
        is_error=True,
    )


def run_resume_if_ready(*, session_id: UUID | str) -> bool:
    """After a host tool result: re-queue the waiting run once no call is left unanswered.

    Precondition: called inside the transaction that wrote the result (session locked).
    """
    session = Session.objects.select_related("current_run").get(pk=session_id)
    run = session.current_run
    if run is None or run.status != Run.Status.WAITING_FOR_HOST_TOOL:
        return False
    # The run's messages, hot or archived (a pending call may have gone cold meanwhile).
    inputs = raw_log.log_run_inputs(session.id, run.id.hex, session.last_index)
    first = inputs[0].index if inputs else session.last_index
    messages = raw_log.log_page(
        session.id, window_id=None, after_index=first - 1, limit=session.last_index - first + 1
    )
    calls = {
        m.tool_call_id for m in messages if m.kind == KIND_TOOL_CALL and m.run_id == run.id.hex
    }
    answered = {m.tool_call_id for m in messages if m.kind == KIND_TOOL_RESULT}
    if calls - answered:
        return False
    run.status = Run.Status.QUEUED
    run.save(update_fields=["status"])
    run_enqueue(run)
    return True
