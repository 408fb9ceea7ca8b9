"""A gateway request's turns (contract §14): the runtime's loop, the reply, the failures.

`GatewayTurns.drive` runs the turns, builds the reply from what they wrote and stores it;
a failed model call is answered as the gateway answers it (`upstream_error`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from agents.models import AgentVersion
from contextproto import metrics
from contextproto.errors import (
    GATEWAY_UPSTREAM_FAILED,
    GATEWAY_UPSTREAM_RATE_LIMITED,
    GATEWAY_UPSTREAM_REJECTED,
    GATEWAY_UPSTREAM_TIMEOUT,
    GATEWAY_UPSTREAM_UNAUTHORIZED,
    MAX_TURNS_REACHED,
    PROVIDER_RATE_LIMITED,
    PROVIDER_REQUEST_REJECTED,
    PROVIDER_UNAVAILABLE,
    ApplicationError,
)
from contextproto.protocol import catalog
from contextproto.protocol.gateway.transcript import ANSWER_SEPARATOR, reply_of
from contextproto.protocol.gateway.wire import (
    FINISH_LENGTH,
    FINISH_STOP,
    FINISH_TOOL_CALLS,
    Finish,
    Reply,
    Usage,
    dumps,
)
from contextproto.protocol.messages import KIND_TOOL_RESULT, RawMessage
from sessions_app import nodes, providers
from sessions_app.models import GatewayExchange, Run
from sessions_app.providers.base import CallOptions
from sessions_app.services.gateway_checks import RETRY_AFTER_SECONDS
from sessions_app.services.gateway_record import Finished, GatewayRecord, render
from sessions_app.services.runtime import Drive, TurnReport, run_finish, run_turns

# Stop reasons of an answer cut by its token limit (OpenAI's, Anthropic's words).
LENGTH_STOPS = frozenset({"length", "max_tokens"})


@dataclass(frozen=True)
class TextDelta:
    """Text of the answer that came in (a streamed reply sends it at once)."""

    text: str


@dataclass(frozen=True)
class TurnDone:
    """A model call of the request is written; `usage` sums the calls so far."""

    usage: Usage


@dataclass
class _Progress:
    """What a request's turns wrote and cost so far."""

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


@dataclass
class GatewayTurns(GatewayRecord):
    """A request's turns, once `GatewayCall.open` (gateway.py) has set their run and answers."""

    upstream_key: str | None = None
    run: Run | None = None
    opening_text: str = ""
    # The answers an earlier request of the reply wrote before it failed (a retry goes on).
    open_answers: tuple[RawMessage, ...] = ()
    recover: bool = True  # whether a protocol call may wait for its dispatch (see _open_locked)

    def drive(self) -> Iterator[TextDelta | TurnDone | Finished]:
        """Run the request's turns; yield the answer's text as it comes, each model call once
        it is written (`TurnDone`), then the reply.

        Raises ApplicationError when the model cannot be called, fails, or the run reaches
        its turn limit; the failed turn leaves no answer, and the run is there for the
        client's retry.
        """
        assert self.session is not None and self.run is not None
        session = self.session  # locked and read with its version when the request opened
        version = session.agent_version
        run = self.run
        try:
            nodes.require_protocol(version.context_protocol_id, version.context_protocol_version)
            provider = providers.provider_for(
                version.model_provider,
                version.model_config or {},
                CallOptions(
                    api_key=self.upstream_key,
                    require_key=False,
                    timeout=float(settings.GATEWAY_UPSTREAM_TIMEOUT_SECONDS),
                ),
            )
        except (providers.ProviderError, ApplicationError) as exc:
            raise self._failed(run, exc, version) from exc
        said = self.opening_text
        if said:
            yield TextDelta(said)
        state = _Progress(written=list(self.open_answers))

        def final(report: TurnReport) -> None:
            # Inside the commit of the turn that ends the request: the reply is stored with
            # the answer it is made of.
            state.add(report)
            state.finished = self._finish(version, state)

        drive = Drive(
            parameters=self.request.parameters,
            lease_seconds=settings.GATEWAY_LEASE_SECONDS,
            on_final=final,
            recover=self.recover,
        )
        try:
            for report in run_turns(run, session=session, provider=provider, drive=drive):
                if state.finished is None:
                    state.add(report)
                self.upstream_ms = state.upstream_ms
                if report.text:
                    yield TextDelta((ANSWER_SEPARATOR if said else "") + report.text)
                    said += (ANSWER_SEPARATOR if said else "") + report.text
                yield TurnDone(state.usage)
        except (providers.ProviderError, ApplicationError) as exc:
            raise self._failed(run, exc, version) from exc
        if run.status == Run.Status.MAX_TURNS:
            raise self._failed(
                run,
                ApplicationError(
                    MAX_TURNS_REACHED,
                    f"The run reached this agent's maxTurnsPerRun ({version.max_turns_per_run}"
                    ") before the model answered; send a new message to start a new run.",
                    {"runId": run.id.hex, "turns": run.turns},
                ),
                version,
            )
        assert state.finished is not None, "a run that ended had its final turn"
        metrics.gateway_request(
            self.request.format, 200, max(self._elapsed_ms() - self.upstream_ms, 0) / 1000
        )
        yield state.finished

    def _finish(self, version: AgentVersion, state: _Progress) -> Finished:
        """Build the reply from what the reply's requests wrote, read as the transcript reads
        the log (so a client that resends it is recognised), and store it (in the caller's
        transaction)."""
        group = state.written
        item = reply_of(group, catalog.PROTOCOL_TOOL_NAMES, _service_answered(group))
        assert item is not None, "a finished request ends with a reply"
        call = item.calls[0] if item.calls else None
        ended: Finish = FINISH_STOP
        if call is not None:
            ended = FINISH_TOOL_CALLS
        elif state.finish in LENGTH_STOPS:
            ended = FINISH_LENGTH
        reply = Reply(
            id=self.reply_id,
            created=self.created,
            model=version.model_name,
            text=item.text,
            call=call,
            finish=ended,
            usage=state.usage,
        )
        body = dumps(render(reply, self.request.format))
        headers = {"X-Contextproto-Turns": str(state.turns)}
        if state.snapshot_id:
            headers["X-Contextproto-Snapshot"] = state.snapshot_id
        if self.request.ignored:
            headers["X-Contextproto-Ignored"] = ",".join(self.request.ignored)
        self.upstream_ms = state.upstream_ms
        self._write_record(
            self._fields(
                status=GatewayExchange.Status.REPLIED,
                http_status=200,
                reply=reply.to_json(),
                reply_body=body,
                reply_headers=headers,
                reply_start_index=item.position,
                turns=state.turns,
            )
        )
        return Finished(reply=reply, body=body, headers=headers)

    def _failed(
        self, run: Run, exc: providers.ProviderError | ApplicationError, version: AgentVersion
    ) -> ApplicationError:
        """The client's error for a failure while driving; the run keeps it (key scrubbed)."""
        error = (
            upstream_error(exc, version, self.upstream_key)
            if isinstance(exc, providers.ProviderError)
            else exc
        )
        if run.status != Run.Status.MAX_TURNS:
            run_finish(
                run,
                Run.Status.FAILED,
                {"code": error.code, "message": error.message, **error.details},
            )
        return error


def _service_answered(group: list[RawMessage]) -> set[str]:
    return {
        str(m.tool_call_id)
        for m in group
        if m.kind == KIND_TOOL_RESULT and m.snapshot_id is not None
    }


def _scrub(value: Any, secret: str | None) -> Any:
    """`value` with every occurrence of `secret` (the client's upstream key) removed."""
    if not secret:
        return value
    if isinstance(value, str):
        return value.replace(secret, "[redacted]")
    if isinstance(value, dict):
        return {k: _scrub(v, secret) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, secret) for v in value]
    return value


def upstream_error(
    exc: providers.ProviderError, version: AgentVersion, secret: str | None
) -> ApplicationError:
    """A provider failure as the gateway answers it (contract §14), naming the upstream provider
    and model, never the key: 401 a refused key, 429 a rate limit, 504 no answer in time,
    400 another refusal of the request, 502 anything else."""
    details: Mapping[str, Any] = exc.details or {}
    upstream = f"the upstream model ({version.model_provider} {version.model_name})"
    said = _scrub(exc.message, secret)
    status = details.get("status")
    retry_after = details.get("retryAfterSeconds") or RETRY_AFTER_SECONDS
    base = {
        "provider": version.model_provider,
        "model": version.model_name,
        "providerCode": exc.code,
    }
    provider_message = _scrub(details.get("providerMessage"), secret)
    if provider_message:
        base["providerMessage"] = provider_message
    if exc.code == PROVIDER_RATE_LIMITED:
        return ApplicationError(
            GATEWAY_UPSTREAM_RATE_LIMITED,
            f"{upstream} rate-limited the call: {said}",
            {**base, "retryAfterSeconds": retry_after},
        )
    if exc.code == PROVIDER_UNAVAILABLE and details.get("reason") == "timeout":
        return ApplicationError(
            GATEWAY_UPSTREAM_TIMEOUT,
            f"{upstream} did not answer within {settings.GATEWAY_UPSTREAM_TIMEOUT_SECONDS} s.",
            {**base, "retryAfterSeconds": retry_after},
        )
    if exc.code == PROVIDER_REQUEST_REJECTED and status in (401, 403):
        return ApplicationError(
            GATEWAY_UPSTREAM_UNAUTHORIZED,
            f"{upstream} refused the key (HTTP {status}): send the provider's key in "
            "X-Contextproto-Upstream-Key, or set the version's model config apiKeyEnv.",
            {**base, "status": status},
        )
    if exc.code == PROVIDER_REQUEST_REJECTED:
        return ApplicationError(
            GATEWAY_UPSTREAM_REJECTED,
            f"{upstream} refused the request: {said}",
            {**base, "status": status},
        )
    return ApplicationError(
        GATEWAY_UPSTREAM_FAILED,
        f"{upstream} failed: {said}",
        {**base, "retryAfterSeconds": retry_after},
    )
