"""What a gateway request must be before it drives a session (contract §14).

Its tools, its system text, a runnable model, and a session no live driver holds.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from django.utils import timezone

from agents.models import AgentVersion
from agents.selectors import RUNNABLE_MODEL_PROVIDERS
from contextproto.errors import (
    GATEWAY_MODEL_NOT_RUNNABLE,
    GATEWAY_SYSTEM_NOT_ACCEPTED,
    INVALID_INPUT_SCHEMA,
    INVALID_REQUEST,
    TOOL_NAME_INVALID,
    TOOL_NAME_RESERVED,
    ApplicationError,
)
from contextproto.protocol import host_tools
from contextproto.protocol.client_state import ClientToolWire
from contextproto.protocol.gateway.wire import ClientWire, GatewayRequest
from contextproto.protocol.parameters import Parameters
from contextproto.protocol.vocabulary import CLIENT_SYSTEM_PLACEHOLDER
from sessions_app.models import Run

# Idempotency-Key (contract §14): the same key within this long answers the stored reply.
IDEMPOTENCY_WINDOW = timedelta(hours=24)
# What a client waits before retrying a busy session or a failed upstream call.
RETRY_AFTER_SECONDS = 1
ACTIVE = (Run.Status.QUEUED, Run.Status.RUNNING)


def client_tools(request: GatewayRequest) -> list[ClientToolWire]:
    """The request's tools as the session stores them; refuses what no view may carry."""
    reserved = host_tools.reserved_names()
    seen: set[str] = set()
    tools: list[ClientToolWire] = []
    for tool in request.tools:
        problem = host_tools.name_problem(tool.name)
        if problem is not None:
            raise ApplicationError(
                TOOL_NAME_INVALID, f"{tool.where}: {problem}", {"field": tool.where}
            )
        if tool.name in reserved:
            raise ApplicationError(
                TOOL_NAME_RESERVED,
                f"{tool.where}: {tool.name!r} is a context protocol tool; the gateway adds "
                "those itself. Rename your tool.",
                {"field": tool.where, "name": tool.name},
            )
        if tool.name in seen:
            raise ApplicationError(
                INVALID_REQUEST,
                f"{tool.where}: the tool name {tool.name!r} is declared twice.",
                {"field": tool.where},
            )
        seen.add(tool.name)
        schema_problem = host_tools.input_schema_problem(tool.input_schema)
        if schema_problem is not None:
            raise ApplicationError(
                INVALID_INPUT_SCHEMA,
                f"{tool.where} ({tool.name}): the input schema at {schema_problem.path} "
                f"{schema_problem.message}",
                {"field": tool.where, "path": schema_problem.path},
            )
        tools.append(tool.to_wire())
    return tools


def system_check(version: AgentVersion, system: str) -> None:
    if system and CLIENT_SYSTEM_PLACEHOLDER not in version.system_prompt:
        raise ApplicationError(
            GATEWAY_SYSTEM_NOT_ACCEPTED,
            f"This agent's system prompt has no {CLIENT_SYSTEM_PLACEHOLDER}, so it takes no "
            "system text from the client: leave out the system/developer messages (or the "
            f"system field), or publish a version whose prompt says {CLIENT_SYSTEM_PLACEHOLDER} "
            "where the client's text belongs.",
            {"field": "system"},
        )


def runnable_check(version: AgentVersion) -> None:
    if version.model_provider not in RUNNABLE_MODEL_PROVIDERS:
        raise ApplicationError(
            GATEWAY_MODEL_NOT_RUNNABLE,
            f"This session's model provider is {version.model_provider!r}: a host drives it "
            "through the API, the gateway cannot call its model.",
            {"agentVersionId": str(version.id)},
        )


def busy(run: Run | None) -> bool:
    """Whether a live driver holds the session's current run."""
    if run is None or run.status not in ACTIVE:
        return False
    if run.status == Run.Status.QUEUED:
        return not run.via_gateway  # a worker will take it
    return run.lease_until is not None and run.lease_until > timezone.now()


def within_model_limit(
    parameters: Parameters, version: AgentVersion, wire: ClientWire
) -> tuple[Parameters, tuple[str, ...]]:
    """The client's output limit lowered to the model's (`model.config.maxOutputTokens`), and
    what was changed, as `X-Contextproto-Adjusted` names it (contract §19)."""
    config = version.model_config if isinstance(version.model_config, dict) else {}
    limit = config.get("maxOutputTokens")
    asked = parameters.max_tokens
    if not isinstance(limit, int) or isinstance(limit, bool) or asked is None or asked <= limit:
        return parameters, ()
    return replace(parameters, max_tokens=limit), (f"{wire.max_tokens_field}={asked}->{limit}",)
