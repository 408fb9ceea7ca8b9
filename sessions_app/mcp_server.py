"""The MCP server (contract §13): catalog resources and prompts, and a session's protocol tools.

Built on the official `mcp` SDK's low-level `Server`, because what a client may see depends
on its key: an application key sees the catalog (resources, prompts); a session key also
sees that session's protocol tools, with exactly the schemas of `GET sessions/{id}/tools/`,
and `tools/call` goes through the one dispatcher (`tool_call_record_and_dispatch` writes
the call and dispatches it under one session lock, services/mcp_calls.py). Served over
streamable HTTP at /mcp/ in stateless JSON mode, so any process of a multi-worker server
can answer any request. `McpKeyGate` checks the key before the SDK sees a request: no key
or a wrong one is a 401 with a Bearer challenge.

A tool call carries two optional `_meta` fields: `toolCallId` (a retry with the same id
replays the receipt; without one, each call gets a fresh id) and `stateRevision`, the
`stateRevision` of an earlier result: the state the client saw, which frames a mutating call
as a view's snapshot frames it over HTTP. Without it a call acts on the state at the call.
`name`, `arguments` and these fields pass the API parser's storability checks first, and no
exception's text ever reaches the client.
"""

from __future__ import annotations

import functools
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.db import InterfaceError, OperationalError
from kombu.exceptions import OperationalError as BrokerUnavailable
from mcp import types
from mcp.server.lowlevel.server import Server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from opentelemetry import context as otel_context
from redis.exceptions import RedisError
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from agents.selectors import protocol_of
from contextproto import telemetry
from contextproto.api import Credential
from contextproto.errors import (
    DEPENDENCY_UNAVAILABLE,
    INTERNAL_ERROR,
    METHOD_NOT_ALLOWED,
    NOT_AUTHENTICATED,
    STATE_REVISION_INVALID,
    TOOL_CALL_ID_INVALID,
    ApplicationError,
    error_body,
    tool_error,
)
from contextproto.parsers import check_storable
from contextproto.protocol import catalog
from contextproto.protocol.host_wire import tool_call_id_problem
from sessions_app.auth import credential_for_key
from sessions_app.reads import trace_facts
from sessions_app.reads.lists import session_get
from sessions_app.services.mcp_calls import tool_call_record_and_dispatch

SCHEME = "contextproto://"
CATALOG_URI = f"{SCHEME}catalog"
RESOURCE_KINDS = ("options-schema", "defaults", "prompt")
TOOL_CALL_ID_META = "toolCallId"
STATE_REVISION_META = "stateRevision"
# Where McpKeyGate leaves the request's credential for the handlers (an ASGI scope key).
SCOPE_CREDENTIAL = "contextproto.credential"
# RFC 6750 §3: no error code when the request carried no credential, invalid_token for a
# key that does not authenticate. No resource_metadata: keys are issued by the operator,
# there is no OAuth authorization server to point to (docs/decisions.md).
CHALLENGE = 'Bearer realm="mcp"'
INVALID_KEY_CHALLENGE = (
    'Bearer realm="mcp", error="invalid_token", error_description="Unknown or revoked key"'
)
# Dependencies whose failure means "try again later", not a defect of the service.
UNAVAILABLE = (OperationalError, InterfaceError, RedisError, BrokerUnavailable)

CredentialResolver = Callable[[Any], Awaitable[Credential | None]]
logger = logging.getLogger(__name__)


async def credential_from_http(ctx: Any) -> Credential | None:
    """The credential `McpKeyGate` found for the HTTP request behind `ctx`, if any."""
    scope = getattr(getattr(ctx, "request", None), "scope", None)
    found = scope.get(SCOPE_CREDENTIAL) if isinstance(scope, dict) else None
    return found if isinstance(found, Credential) else None


def _resource_uri(version: catalog.ProtocolVersion, kind: str) -> str:
    return f"{SCHEME}protocols/{version.protocol_id}/{version.version}/{kind}"


def _resources() -> list[types.Resource]:
    found = [
        types.Resource(
            name="catalog",
            uri=CATALOG_URI,
            description="Every protocol version with its option schema, defaults, prompt, tools.",
            mime_type="application/json",
        )
    ]
    for version in catalog.all_versions():
        for kind in RESOURCE_KINDS:
            found.append(
                types.Resource(
                    name=f"{version.key} {kind}",
                    uri=_resource_uri(version, kind),
                    mime_type="text/plain" if kind == "prompt" else "application/json",
                )
            )
    return found


def _read(uri: str) -> tuple[str, str]:
    """Return (mime type, text) of a catalog resource; MCPError for an unknown URI."""
    if uri == CATALOG_URI:
        body = {
            "protocols": [v.to_public() for v in catalog.all_versions()],
            "fingerprint": catalog.fingerprint(),
        }
        return "application/json", json.dumps(body, ensure_ascii=False)
    for version in catalog.all_versions():
        for kind in RESOURCE_KINDS:
            if uri == _resource_uri(version, kind):
                if kind == "prompt":
                    return "text/plain", version.prompt
                value = version.option_schema if kind == "options-schema" else version.defaults
                return "application/json", json.dumps(value, ensure_ascii=False)
    raise MCPError(types.INVALID_PARAMS, f"No resource {uri}; list resources to see them.")


def _prompt_of(name: str) -> catalog.ProtocolVersion:
    for version in catalog.all_versions():
        if version.key == name:
            return version
    raise MCPError(types.INVALID_PARAMS, f"No prompt {name!r}; prompts are named id@version.")


def _session_tools(session_id: uuid.UUID) -> list[dict[str, Any]]:
    version = session_get(session_id=session_id).agent_version
    protocol = protocol_of(version)
    # The protocol tools exactly as GET sessions/{id}/tools/ lists them (host tools are the
    # host's to run, so they are not offered here).
    return list(protocol.tools.values())


def _call(
    session_id: uuid.UUID,
    call_id: str,
    name: str,
    arguments: Any,
    state_revision: int | None,
) -> dict[str, Any]:
    # Traced (contract §22) as `execute_tool {name}` under the MCP SDK's `tools/call` span,
    # which gets the session's facts too; a refusal marks the span with its code.
    facts = trace_facts.session_facts_of(session_id)
    telemetry.annotate_current(facts)
    with telemetry.tool_span(facts, name=name, call_id=call_id) as span:
        receipt = tool_call_record_and_dispatch(
            session_id=session_id,
            tool_call_id=call_id,
            tool_name=name,
            arguments=arguments,
            state_revision=state_revision,
        )
        error = receipt.result.get("error")
        telemetry.tool_result(
            span,
            error_code=str(error.get("code")) if isinstance(error, dict) else None,
            replayed=receipt.replayed,
        )
        telemetry.tool_content(span, arguments=arguments, result=receipt.result)
        span.set_attribute("contextproto.window.id", receipt.result_message.window_id)
    return {
        **receipt.result,
        "toolCallId": call_id,
        "replayed": receipt.replayed,
        # What the client sends back as _meta.stateRevision to act on what it saw here.
        "stateRevision": receipt.state_revision,
    }


def _checked_call(params: types.CallToolRequestParams) -> tuple[str, int | None]:
    """(toolCallId, stateRevision) of a call whose name, arguments and _meta can be stored.

    The API parser's checks (NUL, lone surrogates, non-finite numbers, depth), then the
    types of the two `_meta` fields; ApplicationError names the offending field.
    """
    meta = dict(params.meta or {})
    framing = {key: meta[key] for key in (TOOL_CALL_ID_META, STATE_REVISION_META) if key in meta}
    check_storable({"name": params.name, "arguments": params.arguments or {}, "_meta": framing})
    call_id = framing.get(TOOL_CALL_ID_META)
    if call_id is None:
        call_id = f"mcp_{uuid.uuid4().hex}"
    elif (problem := tool_call_id_problem(call_id)) or not isinstance(call_id, str):
        raise ApplicationError(
            TOOL_CALL_ID_INVALID,
            f"_meta.toolCallId: {problem}. It names this call (send the same id again to "
            "retry it), or is absent.",
            {"field": "_meta.toolCallId"},
        )
    revision = framing.get(STATE_REVISION_META)
    if revision is not None and (
        isinstance(revision, bool) or not isinstance(revision, int) or revision < 0
    ):
        raise ApplicationError(
            STATE_REVISION_INVALID,
            "_meta.stateRevision is an integer >= 0: the stateRevision of an earlier result, "
            "or absent to act on the current state.",
            {"field": "_meta.stateRevision"},
        )
    return call_id, revision


def _refusal(exc: ApplicationError, call_id: str | None) -> dict[str, Any]:
    """A refusal before any receipt existed, in the receipts' error shape (`correctable`
    is the registry's for the code, as in a receipt)."""
    result: dict[str, Any] = {**tool_error(exc.code, exc.message, exc.details)}
    if call_id is not None:
        result["toolCallId"] = call_id
    if "currentRevision" in exc.details:
        result["stateRevision"] = exc.details["currentRevision"]
    return result


def _failure(exc: Exception, call_id: str | None, name: str) -> dict[str, Any]:
    """A call that failed inside the service: logged in full, answered without its text."""
    if isinstance(exc, UNAVAILABLE):
        logger.warning("MCP tools/call: a dependency is unavailable: %s", exc.__class__.__name__)
        code = DEPENDENCY_UNAVAILABLE
        why = "The database or Redis is unavailable."
    else:
        logger.exception("MCP tools/call failed: toolCallId=%s tool=%s", call_id, name)
        code = INTERNAL_ERROR
        why = "The service failed on this call; the operator finds it in the log by toolCallId."
    message = (
        f"{why} Call again later with the same _meta.toolCallId: a call that was recorded "
        "replays its result, one that was not runs then."
    )
    result: dict[str, Any] = {**tool_error(code, message)}
    if call_id is not None:
        result["toolCallId"] = call_id
    return result


def _tool_result(result: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(result, ensure_ascii=False))],
        structured_content=result,
        is_error=result.get("success") is not True,
    )


Handler = Callable[[Any, Any], Awaitable[Any]]


def _sealed(handler: Handler) -> Handler:
    """Answer an unexpected exception with a fixed JSON-RPC error, never the exception's text.

    The SDK would send `str(exc)`, which for a database error holds SQL and connection text.
    """

    @functools.wraps(handler)
    async def run(ctx: Any, params: Any) -> Any:
        try:
            return await handler(ctx, params)
        except MCPError:
            raise
        except Exception as exc:
            logger.exception("MCP %s failed", handler.__name__)
            raise MCPError(
                types.INTERNAL_ERROR,
                "The service failed on this request; try again later. The operator finds the "
                "failure in the service log.",
            ) from exc

    return run


def build_server(resolve: CredentialResolver = credential_from_http) -> Server:
    """The MCP server; `resolve` maps a request context to the caller's credential."""

    async def require(ctx: Any, *, session: bool = False) -> Credential:
        credential = await resolve(ctx)
        if credential is None:
            raise MCPError(types.INVALID_REQUEST, "Send 'Authorization: Bearer <key>'.")
        if session and not credential.is_session_key:
            raise MCPError(
                types.INVALID_REQUEST, "Session tools need the session's own key (a session key)."
            )
        return credential

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        if await resolve(ctx) is None:
            return types.ListResourcesResult(resources=[])
        return types.ListResourcesResult(resources=_resources())

    async def read_resource(ctx: Any, params: Any) -> types.ReadResourceResult:
        await require(ctx)
        uri = str(params.uri)
        mime_type, text = _read(uri)
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=mime_type, text=text)]
        )

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        if await resolve(ctx) is None:
            return types.ListPromptsResult(prompts=[])
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(name=v.key, description=f"The {v.key} protocol prompt. {v.summary}")
                for v in catalog.all_versions()
            ]
        )

    async def get_prompt(ctx: Any, params: Any) -> types.GetPromptResult:
        await require(ctx)
        version = _prompt_of(params.name)
        return types.GetPromptResult(
            description=version.summary,
            messages=[
                types.PromptMessage(
                    role="user", content=types.TextContent(type="text", text=version.prompt)
                )
            ],
        )

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        credential = await resolve(ctx)
        if credential is None or credential.session_id is None:  # not a session key
            return types.ListToolsResult(tools=[])
        tools = await sync_to_async(_session_tools, thread_sensitive=True)(credential.session_id)
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=tool["name"],
                    description=tool.get("description"),
                    input_schema=tool["inputSchema"],
                )
                for tool in tools
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        credential = await require(ctx, session=True)
        session_id = credential.session_id
        assert session_id is not None  # require(session=True) refused any other key
        call_id: str | None = None
        try:
            call_id, state_revision = _checked_call(params)
            result = await sync_to_async(_call, thread_sensitive=True)(
                session_id, call_id, params.name, params.arguments or {}, state_revision
            )
        except ApplicationError as exc:
            # Refused before a receipt existed (unstorable or malformed input, unknown tool,
            # reused id, a revision with no view, no view possible): still a tool error the
            # model can read, in the receipts' error shape.
            result = _refusal(exc, call_id)
        except Exception as exc:
            result = _failure(exc, call_id, params.name)
        return _tool_result(result)

    return Server(
        "contextproto",
        version="1",
        instructions=(
            "Context protocol catalog (resources, prompts) and, with a session key, that "
            "session's protocol tools. Pass _meta.toolCallId to make a call retry-safe, and "
            "_meta.stateRevision (from an earlier result) to act on the state you saw."
        ),
        on_list_resources=_sealed(list_resources),
        on_read_resource=_sealed(read_resource),
        on_list_prompts=_sealed(list_prompts),
        on_get_prompt=_sealed(get_prompt),
        on_list_tools=_sealed(list_tools),
        on_call_tool=_sealed(call_tool),
    )


class McpKeyGate:
    """ASGI middleware in front of the MCP app: the key is checked before the SDK sees a request.

    No key, another scheme, or an unknown or revoked key: 401 with a Bearer challenge and the
    API's JSON error body. GET, with which a client would open the SDK's event stream (held
    open for as long as the client waits, though a stateless JSON server never sends on it):
    405. The credential found travels in the scope to the handlers, one lookup per request.
    A body declared larger than the limit goes straight on to the SDK, which answers 413 from
    the header without reading the body, so no key is looked up for it.
    """

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _declared_length(scope) > self.max_body_bytes:
            await self.app(scope, receive, send)  # the lifespan, or the SDK's 413
            return
        credential, refusal = await _authenticate(Headers(scope=scope).get("authorization", ""))
        if refusal is None and scope["method"] == "GET":
            refusal = JSONResponse(
                error_body(
                    METHOD_NOT_ALLOWED,
                    "This MCP endpoint is stateless and answers in JSON: send JSON-RPC "
                    "requests with POST. It offers no event stream (GET).",
                    405,
                ),
                status_code=405,
                headers={"Allow": "POST"},
            )
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        # A caller's W3C traceparent header continues its trace (the MCP SDK's span reads
        # only `_meta`): its context is the current one while the SDK serves the request.
        caller = telemetry.continued_context(Headers(scope=scope)) if telemetry.enabled() else None
        token = otel_context.attach(caller) if caller is not None else None
        try:
            await self.app({**scope, SCOPE_CREDENTIAL: credential}, receive, send)
        finally:
            if token is not None:
                otel_context.detach(token)


def _declared_length(scope: Scope) -> int:
    raw = Headers(scope=scope).get("content-length", "")
    return int(raw) if raw.isascii() and raw.isdigit() else 0


async def _authenticate(header: str) -> tuple[Credential | None, JSONResponse | None]:
    """(credential, None) for a known key in `Authorization: Bearer <key>`, else (None, 401)."""
    scheme, _, raw = header.partition(" ")
    raw = raw.strip()
    if scheme.lower() != "bearer" or not raw:
        return None, _unauthorized(
            "Send 'Authorization: Bearer <key>': an application key sees the catalog "
            "resources and prompts, a session key also that session's tools.",
            CHALLENGE,
        )
    try:
        credential = await sync_to_async(credential_for_key, thread_sensitive=True)(raw)
    except UNAVAILABLE as exc:
        logger.warning("MCP key lookup: the database is unavailable: %s", exc.__class__.__name__)
        body = error_body(
            DEPENDENCY_UNAVAILABLE,
            "The database is unavailable; nothing was done. Retry the same request later.",
            503,
            {"dependency": "database"},
        )
        return None, JSONResponse(body, status_code=503)
    if credential is None:
        return None, _unauthorized(
            "Unknown or revoked key: send an application key or a session key of this "
            "service as 'Authorization: Bearer <key>'.",
            INVALID_KEY_CHALLENGE,
        )
    return credential, None


def _unauthorized(message: str, challenge: str) -> JSONResponse:
    return JSONResponse(
        error_body(NOT_AUTHENTICATED, message, 401),
        status_code=401,
        headers={"WWW-Authenticate": challenge},
    )


def mcp_http_app(allowed_hosts: list[str], max_body_bytes: int) -> ASGIApp:
    """The MCP server at /mcp/ (stateless, JSON responses) behind `McpKeyGate`.

    Bodies above `max_body_bytes` (the API's own limit) are answered 413 by the SDK. The
    returned app also serves the lifespan, which runs the SDK's session manager.
    """
    hosts = [h for h in allowed_hosts if h != "*"]
    security = TransportSecuritySettings(
        # Django's ALLOWED_HOSTS already decides which hosts are served; "*" disables it.
        enable_dns_rebinding_protection="*" not in allowed_hosts,
        allowed_hosts=[pattern for h in hosts for pattern in (h, f"{h}:*")],
        allowed_origins=[
            pattern
            for h in hosts
            for pattern in (f"http://{h}:*", f"https://{h}:*", f"https://{h}")
        ],
    )
    app = build_server().streamable_http_app(
        streamable_http_path="/mcp/",
        stateless_http=True,
        json_response=True,
        transport_security=security,
        max_request_body_size=max_body_bytes,
    )
    return McpKeyGate(app, max_body_bytes)
