"""The built-in runtime (contract §7, §14): advance a run turn by turn with the version's model.

freeze → project → snapshot → model → answer (with its snapshot id) → dispatch protocol
tools → next turn, until a final answer, `maxTurnsPerRun`, a host (or client) tool to wait
for, or an error. One function advances a run, whoever drives it: `run_turns`, a generator
that does every step but the model call itself, which it hands to its driver as a
`ModelCall` and takes the answer back (`send`). A Celery task drives it with the blocking
call (`run_advance`); a gateway request with an awaited or streamed one
(sessions_app/gateway/drive.py), so a client that goes away closes the upstream call. One
driver advances a session at a time: a run is claimed under a row lock with a lease, so a
duplicate delivery does nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q, Sum
from django.utils import timezone

from contextproto import telemetry
from contextproto.errors import (
    MAX_TURNS_REACHED,
    MODEL_EMPTY_ANSWER,
    PROVIDER_INVALID,
    ApplicationError,
)
from contextproto.protocol import catalog
from contextproto.protocol.messages import KIND_TOOL_CALL, KIND_TOOL_RESULT, RawMessage
from contextproto.protocol.parameters import Parameters
from contextproto.telemetry import SessionFacts
from contextproto.telemetry.spans import TURN_SOURCE
from sessions_app import nodes, providers
from sessions_app.models import GatewayExchange, Message, ProjectionSnapshot, Run, Session
from sessions_app.providers.base import ModelReply, storable_reply
from sessions_app.providers.scripted import ScriptedProvider
from sessions_app.reads import raw_log, trace_facts
from sessions_app.services.answers import AnswerCall
from sessions_app.services.dispatch import tool_dispatch
from sessions_app.services.projection import projection_build
from sessions_app.services.runs import autostart, run_enqueue
from sessions_app.services.turn_commit import turn_commit_locked
from sessions_app.services.turn_spans import turn_recorded
from sessions_app.store import hooks
from sessions_app.store.body_writer import PendingBody, body_pending, body_store
from sessions_app.store.state import session_relock

CONTINUE = "continue"
# How far back a turn looks for protocol calls of the last answer left undispatched (a
# driver that died between recording an answer and dispatching its call).
UNDISPATCHED_LOOKBACK = 32


@dataclass(frozen=True)
class TurnReport:
    """One turn as its driver sees it.

    `outcome`: "continue", or the run's status once the turn ended it. `text`: what the
    model said in this answer (thinking aside); `handed`: the host or client call to run
    now; `usage` as recorded; `finish` the model's stop reason (provider words).
    """

    run_id: str
    turn: int
    window_id: str
    tool: str | None
    input_tokens: int | None
    outcome: str
    snapshot_id: str = ""
    text: str = ""
    handed: RawMessage | None = None
    usage: dict[str, Any] | None = None
    finish: str | None = None
    upstream_ms: int = 0
    # What the turn wrote: the answer, the service's results, the protocol calls' results.
    written: tuple[RawMessage, ...] = ()


@dataclass(frozen=True)
class ModelCall:
    """A turn's model call, which `run_turns` hands to its driver: the view `snapshot` (its
    `request` is what the provider gets) for `model`; `step` the scripted model's cursor."""

    snapshot: ProjectionSnapshot
    model: str
    step: int | None
    # The view's body, when the turn writes it in its second commit (`Drive.body_later`): the
    # driver may encode it (`body.encode`, no database) while the model call is in flight.
    body: PendingBody | None = None

    @property
    def request(self) -> dict[str, Any]:
        return self.snapshot.request


# `run_turns`: yields a ModelCall and takes its answer back (`send`), yields each turn once it
# is written.
Turns = Generator[ModelCall | TurnReport, ModelReply | None, None]


@dataclass(frozen=True)
class Drive:
    """What a driver adds to the version's settings for its run's turns.

    `parameters`: a gateway client's forwarded fields; `lease_seconds`: how long the run
    stays claimed past each renewal (a gateway request's lease is short, renewed while it
    waits on the model, so a dead process frees its session quickly).
    """

    parameters: Parameters | None = None
    lease_seconds: int | None = None
    # Called inside the commit of the turn that ends the run (its answer, or the usage after
    # its dispatch), with that turn's report: a driver's own record commits with the turn.
    on_final: Callable[[TurnReport], None] | None = None
    # False when the driver knows no protocol call of the session waits for its dispatch.
    recover: bool = True
    # The first turn's view, when the driver built it in a commit of its own (a gateway
    # request builds it with the request's input: one commit before the model call).
    first_snapshot: ProjectionSnapshot | None = None
    # A gateway request: the call handed to its client gets a service-unique id.
    mint_handed: bool = False
    # Each turn's snapshot row in the commit before its model call, its body in the one after
    # (the first snapshot too, when the driver built it so).
    body_later: bool = False

    @property
    def lease(self) -> int:
        return self.lease_seconds or settings.RUN_LEASE_SECONDS


def lease_seconds() -> int:
    return settings.RUN_LEASE_SECONDS


def _claim(run_id: UUID | str) -> Run | None:
    now = timezone.now()
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.via_gateway:
            return None
        if run.status == Run.Status.RUNNING and run.lease_until and run.lease_until > now:
            return None
        if run.status not in (Run.Status.QUEUED, Run.Status.RUNNING):
            return None
        run.status = Run.Status.RUNNING
        run.lease_until = now + timedelta(seconds=lease_seconds())
        run.save(update_fields=["status", "lease_until"])
        return run


def run_finish(run: Run, status: str, error: dict[str, Any] | None = None) -> None:
    """Give `run` its status for now; a run waiting for a host tool is not finished."""
    run.status = status
    run.error = error
    run.lease_until = None
    if status != Run.Status.WAITING_FOR_HOST_TOOL:
        run.finished_at = timezone.now()
    run.save(update_fields=["status", "error", "lease_until", "finished_at", "turns"])


def run_advance(*, run_id: UUID | str, on_turn: Callable[[TurnReport], Any] | None = None) -> str:
    """Advance `run_id` until it completes, waits for a host tool, fails or hits the limit.

    The Celery task's driver. Returns the run's final status for this call ("skipped" when
    another worker owns it). `on_turn(TurnReport)` is called after each turn (the demo
    prints progress with it). A transient provider failure queues the run again later.
    """
    run = _claim(run_id)
    if run is None:
        return "skipped"
    session = Session.objects.select_related("agent_version").get(pk=run.session_id)
    version = session.agent_version
    try:
        # A version this worker does not carry fails the run with protocol_unknown_on_worker
        # (contract §3), never re-queued: the skew shows instead of a run on another catalog.
        nodes.require_protocol(version.context_protocol_id, version.context_protocol_version)
        provider = providers.provider_for(version.model_provider, version.model_config or {})
    except Exception as exc:  # a misconfigured version fails the run loudly, with its reason
        run_finish(
            run,
            Run.Status.FAILED,
            {"code": getattr(exc, "code", PROVIDER_INVALID), "message": str(exc)},
        )
        return run.status
    facts = trace_facts.session_facts(session) if telemetry.enabled() else None
    try:
        # A run step is a trace of its own (contract §22): the worker's, outside any request.
        with (
            telemetry.job_span(
                f"run_step {facts.agent_name if facts else ''}".strip(),
                facts,
                attributes={TURN_SOURCE: "runtime"},
            ),
            telemetry.agent_span(
                facts.at(run_id=run.id.hex) if facts else None,
                attributes={TURN_SOURCE: "runtime"},
            ),
        ):
            turns = run_turns(run, session=session, provider=provider)
            complete = partial(_complete, provider)
            for report in drive_with(turns, complete, facts=facts):
                if on_turn is not None:
                    on_turn(report)
    except providers.ProviderError as exc:
        if not (exc.retryable and _retry_later(run, exc)):
            run_finish(run, Run.Status.FAILED, exc.as_dict())
    except ApplicationError as exc:
        run_finish(
            run, Run.Status.FAILED, {"code": exc.code, "message": exc.message, **exc.details}
        )
    return run.status


def run_turns(
    run: Run, *, session: Session, provider: providers.ModelProvider, drive: Drive | None = None
) -> Turns:
    """Advance a claimed run turn by turn: the one loop of the runtime, whoever drives it.

    Yields a `ModelCall` for each turn and takes the model's answer back through `send`
    (the driver makes the call: blocking, awaited or streamed; it throws the call's failure
    in, or closes the generator when it gives up); then yields the turn's `TurnReport` once
    the turn is written. Stops after the turn that ends the run (its status is set in that
    turn's commit, before it is yielded) or at `maxTurnsPerRun` (the run's status becomes
    `max_turns_reached`, nothing is yielded). A failure propagates with nothing of the failed
    turn written; the driver decides what the run becomes.
    """
    drive = drive or Drive()
    version = session.agent_version
    # A driver that died between writing an answer and dispatching its protocol call left
    # the call without its result: dispatch it first, or no view could be built. (Every
    # driver reads the session just before it drives, so its last index is current.)
    for call_id in _undispatched(session) if drive.recover else ():
        tool_dispatch(session_id=session.id, tool_call_id=call_id)
    first = drive.first_snapshot
    while True:
        if run.turns >= version.max_turns_per_run:
            run_finish(
                run,
                Run.Status.MAX_TURNS,
                {"code": MAX_TURNS_REACHED, "message": f"stopped after {run.turns} turns"},
            )
            return
        snapshot = first or projection_build(
            session_id=session.id,
            provider=provider.wire_format,
            run_id=run.id.hex,
            use_cache=False,
            parameters=drive.parameters,
            body_later=drive.body_later,
        )
        first = None
        body = body_pending(snapshot) if drive.body_later else None
        # Only a scripted model reads its step; a sum over the session's runs is not free.
        step = model_step(session) if isinstance(provider, ScriptedProvider) else None
        started = time.monotonic()
        with model_wait(run, drive.lease):
            answer = yield ModelCall(
                snapshot=snapshot, model=version.model_name, step=step, body=body
            )
        if answer is None:
            raise TypeError("run_turns: send the model's answer for each ModelCall")
        latency_ms = round((time.monotonic() - started) * 1000)
        report = _commit(session, run, snapshot, answer, latency_ms, drive, body)
        yield report
        if report.outcome != CONTINUE:
            return


def drive_with(
    turns: Turns,
    call: Callable[[ModelCall], ModelReply],
    *,
    facts: SessionFacts | None = None,
) -> Iterator[TurnReport]:
    """Drive `turns` in this thread, making each model call with `call` (blocking); a call's
    failure is thrown into the loop (which writes nothing of that turn) and propagates. With
    `facts` (tracing on), each model call and the commit of its answer is a `chat` span."""
    step = next(turns, None)
    while step is not None:
        if isinstance(step, TurnReport):
            yield step
            step = next(turns, None)
            continue
        model_call = step
        turn = trace_facts.turn_facts(facts, model_call.snapshot) if facts else None
        agent = telemetry.current_span()
        with telemetry.chat_span(turn) as chat:
            try:
                answer = call(model_call)
            except BaseException as exc:
                turns.throw(exc)
                raise  # the loop re-raises what it is thrown; never reached otherwise
            try:
                step = turns.send(answer)
            except StopIteration:
                step = None
            if turn is not None and isinstance(step, TurnReport):
                turn_recorded(
                    chat,
                    turn,
                    model_call.snapshot,
                    raw=answer.raw,
                    stop_reason=answer.stop_reason,
                    text=answer.text,
                    written=step.written,
                    agent=agent,
                )


def _complete(provider: providers.ModelProvider, call: ModelCall) -> ModelReply:
    return provider.complete(call.request, model=call.model, step=call.step)


def _renew(run: Run, seconds: int) -> None:
    run.lease_until = timezone.now() + timedelta(seconds=seconds)
    Run.objects.filter(pk=run.pk).update(lease_until=run.lease_until)


def _settle(run: Run, outcome: str, drive: Drive, report: TurnReport) -> None:
    """Save the turn's count with the run's status after it: finished (and the driver's own
    record of the end, in the same commit), or claimed again."""
    if outcome != CONTINUE:
        run_finish(run, outcome)
        if drive.on_final is not None:
            drive.on_final(report)
        return
    run.lease_until = timezone.now() + timedelta(seconds=drive.lease)
    run.save(update_fields=["turns", "lease_until"])


SWEEP_LIMIT = 500


def run_sweep() -> list[str]:
    """Re-enqueue runs a dead worker or a lost enqueue left behind; return their ids.

    A run still `running` past its lease lost its worker (killed, or its machine gone): the
    broker would redeliver its task only after the visibility timeout (an hour). A `queued`
    run older than a lease with no scheduled retry (no `error`) lost its enqueue (the broker
    was down). A duplicate delivery is harmless: `_claim` lets one worker in. Runs driven by
    gateway requests are left to the next request of their session.
    """
    now = timezone.now()
    lost_enqueue = now - timedelta(seconds=lease_seconds())
    runs = (
        Run.objects.filter(
            Q(status=Run.Status.RUNNING, lease_until__lt=now)
            | Q(status=Run.Status.QUEUED, error__isnull=True, created_at__lt=lost_enqueue)
        )
        .filter(via_gateway=False)
        .values_list("id", flat=True)[:SWEEP_LIMIT]
    )
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


def model_step(session: Session) -> int:
    """A scripted model's cursor: how many model calls the session already made (its runs'
    turns and its side requests)."""
    turns = Run.objects.filter(session=session).aggregate(n=Sum("turns"))["n"] or 0
    return turns + GatewayExchange.objects.filter(session=session, side=True).count()


class _LeaseKeeper:
    """One thread per process renews the leases of the runs whose model calls are waiting.

    A run registers for the length of its model call (`hold`/`release`); the thread renews
    each every third of its lease, with a connection of its own that it gives back after each
    round, so a waiting driver holds no connection and a driver that dies stops renewing.
    One long-lived thread costs nothing per call, where a thread per call costs a start and a
    join on every turn.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[UUID, tuple[int, float]] = {}  # run -> (lease seconds, next renewal)
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def hold(self, run_id: UUID, seconds: int) -> None:
        with self._lock:
            self._held[run_id] = (seconds, time.monotonic() + seconds / 3)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="lease-keeper", daemon=True)
                self._thread.start()
        self._wake.set()

    def release(self, run_id: UUID) -> None:
        with self._lock:
            self._held.pop(run_id, None)

    def _loop(self) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                due = [(run, s) for run, (s, at) in self._held.items() if at <= now]
                for run, seconds in due:
                    self._held[run] = (seconds, now + seconds / 3)
                upcoming = min((at for _s, at in self._held.values()), default=now + 60)
            if due:
                try:
                    for run, seconds in due:
                        Run.objects.filter(pk=run, status=Run.Status.RUNNING).update(
                            lease_until=timezone.now() + timedelta(seconds=seconds)
                        )
                finally:
                    connection.close()  # this thread's own connection, until the next round
            self._wake.wait(max(upcoming - time.monotonic(), 0.05))
            self._wake.clear()


_lease_keeper = _LeaseKeeper()


@contextmanager
def model_wait(run: Run, seconds: int) -> Iterator[None]:
    """Around a model call: keep the run's lease alive, and hold no database connection.

    A call may take minutes; the lease is renewed every third of `seconds` by the process's
    lease keeper (so a driver that dies stops renewing it and the run is free again within
    `seconds`), and on PostgreSQL the driver's connection goes back (to the pool) instead of
    idling through the wait. Inside a transaction (tests) the connection stays.
    """
    _lease_keeper.hold(run.pk, seconds)
    if connection.vendor == "postgresql" and not connection.in_atomic_block:
        connection.close()
    try:
        yield
    finally:
        _lease_keeper.release(run.pk)


def _undispatched(session: Session) -> list[str]:
    """Protocol calls near the log's end that have no result yet (a driver died between
    writing an answer and dispatching its call): bounded by UNDISPATCHED_LOOKBACK."""
    answered = Message.objects.filter(
        session=session, kind=KIND_TOOL_RESULT, tool_call_id=OuterRef("tool_call_id")
    )
    calls = (
        Message.objects.filter(
            session=session,
            kind=KIND_TOOL_CALL,
            index__gt=session.last_index - UNDISPATCHED_LOOKBACK,
            tool_name__in=catalog.PROTOCOL_TOOL_NAMES,
        )
        .exclude(Exists(answered))
        .order_by("index")
        .values_list("tool_call_id", flat=True)
    )
    return [str(c) for c in calls]


def _commit(
    session: Session,
    run: Run,
    snapshot: ProjectionSnapshot,
    answer: ModelReply,
    latency_ms: int,
    drive: Drive,
    body: PendingBody | None = None,
) -> TurnReport:
    """Write a turn's answer in ONE commit: the answer, its dispatch and usage
    (`turn_commit_locked`), the run's count and status, the driver's record of the end, and
    the view's body when the turn writes it now (encoded already, unless its driver did not)."""
    reply = storable_reply(answer)
    if not reply.tool_calls and not (reply.text and reply.text.strip()):
        raise ApplicationError(
            MODEL_EMPTY_ANSWER, "The model answered with neither text nor a tool call."
        )
    calls = [AnswerCall(c.id, c.name, c.arguments) for c in reply.tool_calls]
    encoded = body.encode() if body is not None else None
    with transaction.atomic():
        locked = session_relock(session)
        if encoded is not None:
            body_store(encoded)
        committed = turn_commit_locked(
            locked,
            snapshot=snapshot,
            text=reply.text,
            calls=calls,
            thinking=reply.thinking,
            usage=reply.usage,
            raw=reply.raw,
            model_latency_ms=latency_ms,
            mint_handed=drive.mint_handed,
        )
        outcome: str = CONTINUE
        if not calls:
            outcome = Run.Status.COMPLETED
        elif committed.answer.handed is not None:
            outcome = Run.Status.WAITING_FOR_HOST_TOOL
        run.turns += 1
        report = TurnReport(
            run_id=run.id.hex,
            turn=run.turns,
            window_id=snapshot.window_id,
            tool=reply.tool_calls[0].name if reply.tool_calls else None,
            input_tokens=snapshot.input_tokens,
            outcome=str(outcome),
            snapshot_id=str(snapshot.id),
            text=reply.text or "",
            handed=committed.answer.handed,
            usage=dict(reply.usage or {}),
            finish=reply.stop_reason,
            upstream_ms=latency_ms,
            written=committed.written,
        )
        _settle(run, outcome, drive, report)
    return report


def run_resume_if_ready(*, session_id: UUID | str) -> bool:
    """After a host tool result: re-queue the waiting run once no call is left unanswered.

    Precondition: called inside the transaction that wrote the result (session locked). A
    run driven by gateway requests is left to the next request, which brings the result.
    """
    session = Session.objects.select_related("current_run").get(pk=session_id)
    run = session.current_run
    if run is None or run.status != Run.Status.WAITING_FOR_HOST_TOOL or run.via_gateway:
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
