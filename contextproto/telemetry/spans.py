"""The span API (contract §22): one trace per request or job, GenAI spans inside it.

Every helper is a context manager yielding an OpenTelemetry `Span` (the API's own type: set
attributes on it, ask `span.is_recording()` before computing costly ones). With tracing off
they yield the API's non-recording span and do nothing else.

    with request_span("POST", route, request.headers) as root:   # SERVER, continues traceparent
        with agent_span(facts):                                     # invoke_agent {agent}
            record_view(facts, effect)                              # context_view {protocol}
            with chat_span(facts, model=model) as chat:            # chat {model}
                answer = provider.complete(...)
                chat_result(chat, response_model=…, usage=tokens, cost=cost)
            with tool_span(facts, name=call.name, call_id=call.id) as tool:
                tool_result(tool, outcome="ok")
        http_response(root, 201)

A job outside any request (a maintenance job, a runtime run step in a worker) starts its own
trace with `job_span`. `SessionFacts` carries what every span of a session says: the session
(`gen_ai.conversation.id`, `session.id`), the agent and its version, the protocol, and the
snapshot and window of the turn.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import INVALID_SPAN, Link, Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from contextproto.economics.view_effect import ViewEffect
from contextproto.telemetry import genai
from contextproto.telemetry.setup import capture_content, tracer
from contextproto.usage import TokenUsage

Attributes = Mapping[str, AttributeValue]

# Our own attributes: the `contextproto.` namespace (the conventions' `gen_ai.*` and HTTP ones
# are spelled out where they are set).
AGENT_VERSION_ID = "contextproto.agent_version.id"
PROTOCOL_ID = "contextproto.protocol.id"
PROTOCOL_VERSION = "contextproto.protocol.version"
SNAPSHOT_ID = "contextproto.snapshot.id"
WINDOW_ID = "contextproto.window.id"
RUN_ID = "contextproto.run.id"
ERROR_CODE = "contextproto.error.code"
COST = "contextproto.usage.cost"
TURN_SOURCE = "contextproto.turn.source"


@dataclass(frozen=True)
class SessionFacts:
    """What every span of one session's trace carries (contract §22).

    `provider` and `model` are the agent version's (`gen_ai.provider.name` of its spans,
    the default `gen_ai.request.model`); the snapshot, window and run are the turn's, set
    per span with `at(...)`.
    """

    session_id: str
    agent_name: str
    agent_id: str
    agent_version_id: str
    agent_version: int
    protocol_id: str
    protocol_version: int
    provider: str
    model: str | None = None
    snapshot_id: str | None = None
    window_id: str | None = None
    run_id: str | None = None

    @property
    def protocol(self) -> str:
        return f"{self.protocol_id}@{self.protocol_version}"

    def at(
        self,
        *,
        snapshot_id: str | None = None,
        window_id: str | None = None,
        run_id: str | None = None,
    ) -> SessionFacts:
        """The same facts for one turn: its snapshot, window and run (None keeps them)."""
        return replace(
            self,
            snapshot_id=snapshot_id if snapshot_id is not None else self.snapshot_id,
            window_id=window_id if window_id is not None else self.window_id,
            run_id=run_id if run_id is not None else self.run_id,
        )

    def attributes(self) -> dict[str, AttributeValue]:
        found: dict[str, AttributeValue] = {
            "gen_ai.conversation.id": self.session_id,
            "session.id": self.session_id,
            "gen_ai.agent.name": self.agent_name,
            "gen_ai.agent.id": self.agent_id,
            "gen_ai.agent.version": str(self.agent_version),
            AGENT_VERSION_ID: self.agent_version_id,
            PROTOCOL_ID: self.protocol_id,
            PROTOCOL_VERSION: self.protocol_version,
        }
        for name, value in (
            (SNAPSHOT_ID, self.snapshot_id),
            (WINDOW_ID, self.window_id),
            (RUN_ID, self.run_id),
        ):
            if value is not None:
                found[name] = value
        return found


# ------------------------------------------------------------------ the one span starter


def _attributes(facts: SessionFacts | None) -> dict[str, AttributeValue]:
    return facts.attributes() if facts is not None else {}


@contextmanager
def _span(
    name: str,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Attributes | None = None,
    context: Context | None = None,
    links: Sequence[Link] = (),
    end_on_exit: bool = True,
    at: int | None = None,
) -> Iterator[Span]:
    """Start a span as the current one; an exception marks it failed, without its text.
    `at` (nanoseconds since the epoch): a span recorded afterwards of something that took
    place then, starting and ending at that time.

    An exception's message may hold a query, content or a path: the span gets `error.type`
    (the error code, or the class name) and an ERROR status, never the message.
    """
    found = tracer()
    if found is None:
        yield INVALID_SPAN
        return
    with found.start_as_current_span(
        name,
        kind=kind,
        attributes=attributes,
        context=context,
        links=links,
        record_exception=False,
        set_status_on_exception=False,
        end_on_exit=end_on_exit and at is None,
        start_time=at,
    ) as span:
        try:
            yield span
        except Exception as exc:
            code = getattr(exc, "code", None)
            fail(span, code if isinstance(code, str) else type(exc).__qualname__)
            raise
        finally:
            if at is not None:
                span.end(end_time=at)


def fail(span: Span, error_type: str, *, code: str | None = None) -> None:
    """Mark `span` failed: `error.type` (a low-cardinality name) and an ERROR status."""
    span.set_attribute("error.type", error_type)
    if code is not None:
        span.set_attribute(ERROR_CODE, code)
    span.set_status(Status(StatusCode.ERROR))


# ------------------------------------------------------------------ roots


def continued_context(headers: Mapping[str, str]) -> Context | None:
    """The caller's trace from W3C `traceparent` / `tracestate` request headers, if any.

    Headers as Django's `request.headers` or a plain dict with lower-case names. None when
    there is no valid traceparent, so the span starts a trace of its own.
    """
    carrier = {
        name: value
        for name, value in (
            ("traceparent", headers.get("traceparent")),
            ("tracestate", headers.get("tracestate")),
        )
        if value
    }
    if "traceparent" not in carrier:
        return None
    context = propagate.extract(carrier)
    if not trace.get_current_span(context).get_span_context().is_valid:
        return None
    return context


@contextmanager
def request_span(
    method: str,
    route: str,
    headers: Mapping[str, str],
    *,
    path: str | None = None,
    attributes: Attributes | None = None,
) -> Iterator[Span]:
    """The root span of one HTTP request (HTTP server conventions), continuing the caller's
    trace when it sent a `traceparent`. `route` is the URL pattern (`/api/v1/sessions/
    {session_id}/turns/`), never the path with ids; set the status with `http_response`."""
    if tracer() is None:
        yield INVALID_SPAN
        return
    found: dict[str, AttributeValue] = {"http.request.method": method, "http.route": route}
    if path is not None:
        found["url.path"] = path
    with _span(
        f"{method} {route}",
        kind=SpanKind.SERVER,
        attributes={**found, **(attributes or {})},
        context=continued_context(headers),
    ) as span:
        yield span


def http_response(span: Span, status: int, *, error_code: str | None = None) -> None:
    """The response's status on a request span; a 5xx marks it failed (a 4xx is the
    client's, not the server's, by the HTTP conventions), an error code is kept either way."""
    span.set_attribute("http.response.status_code", status)
    if error_code is not None:
        span.set_attribute(ERROR_CODE, error_code)
    if status >= 500:
        fail(span, str(status))


@contextmanager
def job_span(
    name: str, facts: SessionFacts | None = None, *, attributes: Attributes | None = None
) -> Iterator[Span]:
    """The root of a trace of its own for work outside a request (a maintenance job, a run
    step in a worker), linked to the current span if it was started from one."""
    current = trace.get_current_span().get_span_context()
    with _span(
        name,
        attributes={**_attributes(facts), **(attributes or {})},
        context=Context(),
        links=[Link(current)] if current.is_valid else (),
    ) as span:
        yield span


# ------------------------------------------------------------------ GenAI spans


@contextmanager
def agent_span(
    facts: SessionFacts | None, *, attributes: Attributes | None = None
) -> Iterator[Span]:
    """`invoke_agent {agent name}`: the agent's turn(s) within this trace."""
    if facts is None:
        with _span("invoke_agent", attributes=attributes) as span:
            yield span
        return
    with _span(
        f"invoke_agent {facts.agent_name}",
        attributes={
            **facts.attributes(),
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": facts.provider,
            **({"gen_ai.request.model": facts.model} if facts.model else {}),
            **(attributes or {}),
        },
    ) as span:
        yield span


@contextmanager
def chat_span(
    facts: SessionFacts | None,
    *,
    model: str | None = None,
    provider: str | None = None,
    attributes: Attributes | None = None,
    end_on_exit: bool = True,
) -> Iterator[Span]:
    """`chat {model}`: one model call (CLIENT). `model`/`provider` default to the version's.
    With `end_on_exit` false the caller ends it (`span.end(end_time=…)`), e.g. once the turn
    is described after the reply has gone."""
    requested = model or (facts.model if facts is not None else None)
    with _span(
        f"chat {requested}" if requested else "chat",
        kind=SpanKind.CLIENT,
        attributes={
            **_attributes(facts),
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider or (facts.provider if facts else "_OTHER"),
            **({"gen_ai.request.model": requested} if requested else {}),
            **(attributes or {}),
        },
        end_on_exit=end_on_exit,
    ) as span:
        yield span


def usage_attributes(usage: TokenUsage, cost: Decimal | None = None) -> dict[str, AttributeValue]:
    """A turn's tokens as the conventions name them (input counts every input token, cache
    reads and writes included, as the conventions ask) and its cost at the version's prices."""
    found: dict[str, AttributeValue] = {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage.cache_read_input_tokens,
        "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_input_tokens,
    }
    if cost is not None:
        found[COST] = float(cost)
    return found


def chat_result(
    span: Span,
    *,
    response_model: str | None = None,
    response_id: str | None = None,
    finish_reasons: Iterable[str] = (),
    usage: TokenUsage | None = None,
    cost: Decimal | None = None,
) -> None:
    """What a model call answered: the model and id it reported, why it stopped, its usage."""
    if not span.is_recording():
        return
    found: dict[str, AttributeValue] = {}
    if response_model:
        found["gen_ai.response.model"] = response_model
    if response_id:
        found["gen_ai.response.id"] = response_id
    reasons = [r for r in finish_reasons if r]
    if reasons:
        found["gen_ai.response.finish_reasons"] = reasons
    if usage is not None:
        found.update(usage_attributes(usage, cost))
    span.set_attributes(found)


def chat_content(
    span: Span,
    *,
    view: Sequence[Mapping[str, Any]] = (),
    output: Sequence[Mapping[str, Any]] = (),
) -> None:
    """Message contents on a chat span, only when opted in (never keys: only messages).

    `view`: the model's view in the neutral wire shape (its system message becomes
    `gen_ai.system_instructions`); `output`: `genai.output_message(...)` entries.
    """
    if not (span.is_recording() and capture_content()):
        return
    system, inputs = genai.view_messages(view)
    if system:
        span.set_attribute("gen_ai.system_instructions", genai.as_json(system))
    if inputs:
        span.set_attribute("gen_ai.input.messages", genai.as_json(inputs))
    if output:
        span.set_attribute("gen_ai.output.messages", genai.as_json(list(output)))


@contextmanager
def tool_span(
    facts: SessionFacts | None,
    *,
    name: str,
    call_id: str | None,
    attributes: Attributes | None = None,
    at: int | None = None,
) -> Iterator[Span]:
    """`execute_tool {tool name}`: one tool call (a protocol tool run here, a host tool's
    result recorded here; `at` as `_span` reads it)."""
    with _span(
        f"execute_tool {name}",
        attributes={
            **_attributes(facts),
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.type": "function",
            **({"gen_ai.tool.call.id": call_id} if call_id else {}),
            **(attributes or {}),
        },
        at=at,
    ) as span:
        yield span


def tool_result(span: Span, *, error_code: str | None = None, replayed: bool | None = None) -> None:
    """A protocol tool's receipt: its outcome (`ok` or the error code) and whether it was
    answered from an earlier receipt. A refused call is a failed span named by its code."""
    if not span.is_recording():
        return
    span.set_attribute("contextproto.tool.outcome", error_code or "ok")
    if replayed is not None:
        span.set_attribute("contextproto.tool.replayed", replayed)
    if error_code is not None:
        fail(span, error_code, code=error_code)


def tool_content(span: Span, *, arguments: object = None, result: object = None) -> None:
    """A tool call's arguments and result, only when opted in."""
    if not (span.is_recording() and capture_content()):
        return
    if arguments is not None:
        span.set_attribute("gen_ai.tool.call.arguments", genai.as_json(arguments))
    if result is not None:
        span.set_attribute("gen_ai.tool.call.result", genai.as_json(result))


def view_attributes(effect: ViewEffect, *, upper_bound: int) -> dict[str, AttributeValue]:
    """What the protocol did to the view (contract §22), as `contextproto.view.*`."""
    found: dict[str, AttributeValue] = {
        "contextproto.view.upper_bound": upper_bound,
        "contextproto.view.messages": effect.messages,
        "contextproto.view.messages.shown": effect.shown,
        "contextproto.view.messages.folded": effect.folded,
        "contextproto.view.messages.masked": effect.masked,
        "contextproto.view.messages.hidden": effect.hidden,
        "contextproto.view.folds": effect.folds,
        "contextproto.view.tokens": effect.view_tokens,
    }
    if effect.covered is not None:
        found["contextproto.view.messages.covered"] = effect.covered
    if effect.tokens_saved is not None:
        found["contextproto.view.tokens_saved"] = effect.tokens_saved
    return found


def record_view(
    facts: SessionFacts,
    effect: ViewEffect,
    *,
    upper_bound: int,
    attributes: Attributes | None = None,
    at: int | None = None,
) -> None:
    """A `context_view {protocol}` span: what the protocol did to the turn's view (`at` as
    `_span` reads it)."""
    with _span(
        f"context_view {facts.protocol}",
        attributes={
            **facts.attributes(),
            **view_attributes(effect, upper_bound=upper_bound),
            **(attributes or {}),
        },
        at=at,
    ):
        pass


def annotate_current(facts: SessionFacts | None, attributes: Attributes | None = None) -> None:
    """Add a session's facts to the current span (a span another library started: the MCP
    SDK's `tools/call` server span)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes({**_attributes(facts), **(attributes or {})})


def current_span() -> Span:
    """The span new spans would be children of now (the API's invalid span when none)."""
    return trace.get_current_span()


@contextmanager
def within(span: Span) -> Iterator[None]:
    """Spans started inside are children of `span` (still open), whatever is current: a turn
    described while its `chat` span is open puts its view and tool spans beside the chat,
    under the agent, as contract §22 draws the tree."""
    with trace.use_span(span, end_on_exit=False):
        yield
