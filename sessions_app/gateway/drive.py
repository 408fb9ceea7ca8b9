"""Drive an opened gateway request (contract §14): the runtime's turns, the model called here.

`drive` runs the built-in runtime's one loop (`runtime.run_turns`) for the request's run: every
step but the model call runs in the request's thread (the database work); the model call is
awaited here, or streamed, so text reaches the client as the upstream sends it and a client
that goes away closes the upstream call at once. It yields the request's events (text, a
reasoning item, a keep-alive, each written turn) and ends with the reply, which is stored in
the commit of the turn that ends the request.

However the request ends, its run is never left claimed: a failure (the upstream's, a
defect's) fails the run with its error and nothing of the failed turn; a client that went
away leaves the run failed with `gateway_client_disconnected` unless its last turn had
committed (then the reply is stored, and a retry gets it as a replay).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django.conf import settings
from django.utils import timezone
from opentelemetry.trace import INVALID_SPAN, Span

from contextproto import telemetry
from contextproto.errors import (
    GATEWAY_CLIENT_DISCONNECTED,
    INTERNAL_ERROR,
    MAX_TURNS_REACHED,
    ApplicationError,
)
from contextproto.protocol.gateway.transcript import ANSWER_SEPARATOR
from contextproto.protocol.gateway.wire import Reply, Usage
from contextproto.protocol.messages import RawMessage
from contextproto.telemetry import SessionFacts
from contextproto.telemetry.spans import TURN_SOURCE
from sessions_app.gateway.events import (
    Event,
    Finished,
    KeepAlive,
    ReasoningDone,
    TextDelta,
    TurnDone,
)
from sessions_app.gateway.open import Opened
from sessions_app.gateway.record import CLIENT_API, ExchangeRecord
from sessions_app.gateway.reply import finish_of, render, reply_headers, reply_item
from sessions_app.gateway.threads import in_thread
from sessions_app.gateway.upstream import Heartbeat, model_pieces, upstream_error, upstream_timeout
from sessions_app.models import Run
from sessions_app.providers.base import ModelReply, ProviderError, ReasoningChunk, TextChunk
from sessions_app.reads import trace_facts
from sessions_app.services.runtime import CONTINUE, Drive, ModelCall, TurnReport, run_turns
from sessions_app.services.turn_spans import turn_recorded


@dataclass
class _Progress:
    """What the request's turns wrote and cost so far (read by the final turn's commit)."""

    written: list[RawMessage]
    usage: Usage = field(default_factory=Usage)
    turns: int = 0
    upstream_ms: int = 0
    snapshot_id: str = ""
    finish: str | None = None
    finished: Finished | None = None

    def add(self, report: TurnReport) -> None:
        self.turns += 1
        self.upstream_ms += report.upstream_ms
        self.usage = self.usage.plus(Usage.from_recorded(report.usage))
        self.snapshot_id, self.finish = report.snapshot_id, report.finish
        self.written.extend(report.written)


def _finish(opened: Opened, record: ExchangeRecord, progress: _Progress) -> Finished:
    """The reply of what the request's turns wrote, stored with its record (inside the commit
    of the turn that ends the request)."""
    incoming = opened.incoming
    item = reply_item(progress.written, incoming.request)
    reply = Reply(
        id=opened.reply_id,
        created=opened.created,
        model=opened.session.agent_version.model_name,
        text=item.text,
        call=item.calls[0] if item.calls else None,
        finish=finish_of(item, progress.finish),
        usage=progress.usage,
        reasoning=item.reasoning,
        message_at=item.message_at,
        completed=int(time.time()),
    )
    body = render(incoming.wire, reply, incoming.request)
    headers = reply_headers(
        progress.turns,
        progress.snapshot_id,
        incoming.request,
        unused=opened.unused,
        adjusted=opened.adjusted,
    )
    record.upstream_ms, record.turns = progress.upstream_ms, progress.turns
    record.write_reply(
        reply=reply.to_json(),
        reply_body=body,
        reply_headers=headers,
        reply_start_index=item.position,
        reply_end_index=max(m.index for m in progress.written),
        reply_id=reply.id,
        turns=progress.turns,
    )
    return Finished(reply=reply, body=body, headers=headers)


def release_run(run: Run, error: ApplicationError) -> None:
    """Free the request's run (it failed or its client went away), unless its last turn had
    already ended it: the session serves the next request at once."""
    Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(
        status=Run.Status.FAILED,
        error={"code": error.code, "message": error.message, **error.details},
        lease_until=None,
        finished_at=timezone.now(),
    )


async def drive(opened: Opened, record: ExchangeRecord) -> AsyncGenerator[Event, None]:
    """The request's events (module docstring). Raises ApplicationError when the model cannot
    be called, fails, or the run reaches its turn limit (the run then failed, nothing of
    the failed turn written)."""
    incoming = opened.incoming
    version = opened.session.agent_version
    provider = opened.provider
    run = opened.run
    progress = _Progress(written=list(opened.open_answers))
    said = bool(opened.opening_text)
    if said:
        yield TextDelta(opened.opening_text)

    def final(report: TurnReport) -> None:
        progress.add(report)
        progress.finished = _finish(opened, record, progress)

    turns = run_turns(
        run,
        session=opened.session,
        provider=provider,
        drive=Drive(
            parameters=opened.parameters,
            lease_seconds=settings.GATEWAY_LEASE_SECONDS,
            on_final=final,
            recover=opened.recover,
            first_snapshot=opened.first_snapshot,
            mint_handed=True,
            body_later=True,
        ),
    )
    stream = incoming.request.stream
    timeout = upstream_timeout(version)
    ended = False
    facts = opened.facts
    try:
        with telemetry.agent_span(
            facts.at(run_id=run.id.hex) if facts is not None else None,
            attributes={TURN_SOURCE: "gateway", CLIENT_API: incoming.wire.format},
        ) as agent:
            step = await in_thread(next, turns, None)
            while step is not None:
                if isinstance(step, TurnReport):
                    if progress.finished is None:
                        progress.add(step)
                    record.upstream_ms, record.turns = progress.upstream_ms, progress.turns
                    if not stream and step.text:
                        yield TextDelta((ANSWER_SEPARATOR if said else "") + step.text)
                    said = said or bool(step.text)
                    yield TurnDone(progress.usage)
                    if step.outcome != CONTINUE:
                        break
                    step = await in_thread(next, turns, None)
                    continue
                call: ModelCall = step
                turn = trace_facts.turn_facts(facts, call.snapshot) if facts is not None else None
                # The view's body is encoded while the model answers (no database: any thread).
                encoding = _in_background(call.body.encode) if call.body is not None else None
                with _chat_span(turn, record) as (chat, describe_later):
                    answer: ModelReply | None = None
                    first_text = True
                    pieces = model_pieces(
                        provider,
                        call.request,
                        model=call.model,
                        step=call.step,
                        stream=stream,
                        timeout=timeout,
                        keepalive=settings.GATEWAY_KEEPALIVE_SECONDS,
                    )
                    try:
                        async for piece in pieces:
                            if isinstance(piece, Heartbeat):
                                yield KeepAlive()
                            elif isinstance(piece, TextChunk):
                                prefix = ANSWER_SEPARATOR if said and first_text else ""
                                first_text = False
                                yield TextDelta(prefix + piece.text)
                            elif isinstance(piece, ReasoningChunk):
                                yield ReasoningDone(piece.item)
                            else:
                                answer = piece
                    except ProviderError as exc:
                        await in_thread(turns.throw, exc)  # re-raises, after the turn's cleanup
                    assert answer is not None, "a model call ends with its answer"
                    if stream and answer.text:
                        said = True
                    if encoding is not None:
                        await encoding
                    step = await in_thread(_send, turns, answer)
                    if turn is not None and isinstance(step, TurnReport):
                        # Describing the turn reads what it wrote: the client need not wait.
                        describe_later(
                            partial(
                                turn_recorded,
                                chat,
                                turn,
                                call.snapshot,
                                raw=answer.raw,
                                stop_reason=answer.stop_reason,
                                text=answer.text,
                                written=step.written,
                                agent=agent,
                            )
                        )
        if run.status == Run.Status.MAX_TURNS:
            raise ApplicationError(
                MAX_TURNS_REACHED,
                f"The run reached this agent's maxTurnsPerRun ({version.max_turns_per_run}) "
                "before the model answered; send a new message to start a new run.",
                {"runId": run.id.hex, "turns": run.turns},
            )
        assert progress.finished is not None, "a run that ended had its final turn"
        ended = True  # the reply is stored: closing the events now changes nothing
        yield progress.finished
    except ProviderError as exc:
        error = upstream_error(exc, version, incoming.upstream_key)
        await in_thread(_close_and_fail, turns, run, error)
        raise error from exc
    except ApplicationError as exc:
        await in_thread(_close_and_fail, turns, run, exc)
        raise
    except BaseException as exc:
        if ended:
            raise
        # The client went away (the task is cancelled, or the stream closed) or a defect.
        reason = (
            ApplicationError(INTERNAL_ERROR, "A defect of the service.")
            if isinstance(exc, Exception)
            else ApplicationError(
                GATEWAY_CLIENT_DISCONNECTED, "The client went away before its reply."
            )
        )
        with contextlib.suppress(Exception):  # the database may be what failed
            await in_thread(_close_and_fail, turns, run, reason)
        raise


@contextlib.contextmanager
def _chat_span(
    turn: SessionFacts | None, record: ExchangeRecord
) -> Iterator[tuple[Span, Callable[[Callable[..., None]], None]]]:
    """A model call's `chat` span (contract §22) and a way to describe its turn once the reply
    has gone (`record.after_reply`): the span keeps the time the block ended, and ends when
    the description is done (at once when there is none)."""
    describe: list[Callable[..., None]] = []
    chat: Span = INVALID_SPAN
    try:
        with telemetry.chat_span(turn, end_on_exit=False) as chat:
            yield chat, describe.append
    finally:
        ended_at = time.time_ns()
        span = chat

        def end() -> None:
            try:
                for work in describe:
                    work(at=ended_at)  # its view and tool spans where they used to stand
            finally:
                span.end(end_time=ended_at)

        if describe:
            record.after_reply(end)
        else:
            end()


def _in_background(work: Callable[[], Any]) -> asyncio.Future[Any]:
    """`work` in a worker thread; its outcome is read even when nobody awaits it (a model
    call that failed or a client that went away drops the turn and its body)."""
    future = asyncio.ensure_future(asyncio.to_thread(work))
    future.add_done_callback(lambda done: done.cancelled() or done.exception())
    return future


def _send(turns: Any, answer: ModelReply) -> ModelCall | TurnReport | None:
    try:
        return turns.send(answer)
    except StopIteration:
        return None


def _close_and_fail(turns: Any, run: Run, error: ApplicationError) -> None:
    turns.close()  # a turn waiting on its model call lets go of its lease
    release_run(run, error)
