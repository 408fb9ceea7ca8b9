"""The MCP server (SPEC §11): catalog resources and prompts, and a session's protocol tools.

Built on the official `mcp` SDK's low-level `Server`, because what a client may see depends
on its key: no key sees nothing; an application key sees the catalog (resources, prompts);
a session key also sees that session's protocol tools, with exactly the schemas of
`GET sessions/{id}/tools/`, and `tools/call` goes through the one dispatcher
(`tool_call_record_and_dispatch` → `tool_dispatch`). Served over streamable HTTP at /mcp/
in stateless JSON mode, so any process of a multi-worker server can answer any request.

A tool call's id comes from the request's `_meta.toolCallId` (a retry with the same id
replays the receipt); without one, each call gets a fresh id.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import sync_to_async
from mcp import types
from mcp.server.lowlevel.server import Server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError

from agents.selectors import protocol_of
from contextproto.api import Credential, credential_for_key
from contextproto.errors import ApplicationError
from contextproto.protocol import catalog

SCHEME = "contextproto://"
CATALOG_URI = f"{SCHEME}catalog"
RESOURCE_KINDS = ("options-schema", "defaults", "prompt")
TOOL_CALL_ID_META = "toolCallId"

CredentialResolver = Callable[[Any], Awaitable[Credential | None]]


async def credential_from_http(ctx: Any) -> Credential | None:
    """The credential of the HTTP request behind `ctx` (Authorization: Bearer <key>)."""
    request = getattr(ctx, "request", None)
    header = request.headers.get("authorization", "") if request is not None else ""
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        return None
    return await sync_to_async(credential_for_key, thread_sensitive=True)(raw.strip())


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
    from sessions_app.selectors import session_get

    version = session_get(session_id=session_id).agent_version
    protocol = protocol_of(version)
    # The protocol tools exactly as GET sessions/{id}/tools/ lists them (host tools are the
    # host's to run, so they are not offered here).
    return list(protocol.tools.values())


def _call(session_id: uuid.UUID, call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    from sessions_app.services.dispatch import tool_call_record_and_dispatch

    receipt = tool_call_record_and_dispatch(
        session_id=session_id, tool_call_id=call_id, tool_name=name, arguments=arguments
    )
    return {**receipt.result, "toolCallId": call_id, "replayed": receipt.replayed}


def _tool_result(result: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(result, ensure_ascii=False))],
        structured_content=result,
        is_error=result.get("success") is not True,
    )


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
        if credential is None or not credential.is_session_key:
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
        meta = dict(params.meta or {})
        call_id = meta.get(TOOL_CALL_ID_META) or f"mcp_{uuid.uuid4().hex}"
        if not isinstance(call_id, str) or not 1 <= len(call_id) <= 200:
            raise MCPError(types.INVALID_PARAMS, "_meta.toolCallId is a string of 1-200 chars.")
        try:
            result = await sync_to_async(_call, thread_sensitive=True)(
                credential.session_id, call_id, params.name, params.arguments or {}
            )
        except ApplicationError as exc:
            # Refused before a receipt existed (unknown tool, reused id, no view possible):
            # still a tool error the model can read, in the receipts' error shape.
            result = {
                "success": False,
                "error": {**exc.details, "code": exc.code, "message": exc.message},
                "toolCallId": call_id,
            }
        return _tool_result(result)

    return Server(
        "contextproto",
        version="1",
        instructions=(
            "Context protocol catalog (resources, prompts) and, with a session key, that "
            "session's protocol tools. Pass _meta.toolCallId to make a call retry-safe."
        ),
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def mcp_http_app(allowed_hosts: list[str], max_body_bytes: int) -> Any:
    """The Starlette app serving the MCP server at /mcp/ (stateless, JSON responses).

    Bodies above `max_body_bytes` (the API's own limit) are answered 413 by the SDK.
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
    return build_server().streamable_http_app(
        streamable_http_path="/mcp/",
        stateless_http=True,
        json_response=True,
        transport_security=security,
        max_request_body_size=max_body_bytes,
    )
