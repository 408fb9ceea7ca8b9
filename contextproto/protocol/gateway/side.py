"""Side requests (contract §19.1): a client's background request beside its conversation.

A client that drives a conversation with tools asks its model, in the background, for a title,
a summary, a classification: a request that carries no tools and its own system text. It is
not part of the conversation: the session's model answers it from the request's own messages
(no protocol view, no tools, not the version's prompt), and nothing of it enters the session's
log, transcript or view.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contextproto.protocol import client_state
from contextproto.protocol.gateway.wire import GatewayRequest
from contextproto.protocol.messages import (
    DERIVED_SYSTEM,
    KIND_INPUT,
    KIND_TEXT,
    KIND_TOOL_CALL,
    KIND_TOOL_RESULT,
    ROLE_ASSISTANT,
    ROLE_SYSTEM,
    ROLE_TOOL,
    ROLE_USER,
    ModelMessage,
    ProjectionSource,
)
from contextproto.protocol.projection import Projection


def is_side_request(request: GatewayRequest, kv: Mapping[str, Any]) -> bool:
    """Whether `request`, on a session whose client state is `kv` (the client's system text
    and tool names), is a side request: its conversation's requests carry tools, it carries
    none, and its system text differs from the conversation's."""
    return (
        bool(client_state.tool_names(kv))
        and not request.tools
        and request.system != client_state.client_system(kv)
    )


def side_projection(request: GatewayRequest, session_id: str) -> Projection:
    """The request's own messages as a view the provider adapters take: the client's system
    text, then its messages as it sent them (nothing of the session)."""
    messages: list[ModelMessage] = []
    if request.system:
        messages.append(ModelMessage(role=ROLE_SYSTEM, kind=DERIVED_SYSTEM, content=request.system))
    for item in request.items:
        if item.role == ROLE_USER:
            messages.append(ModelMessage(role=ROLE_USER, kind=KIND_INPUT, content=item.content))
        elif item.role == ROLE_TOOL:
            messages.append(
                ModelMessage(
                    role=ROLE_TOOL,
                    kind=KIND_TOOL_RESULT,
                    content=item.content,
                    tool_call_id=item.call_id,
                )
            )
        elif item.calls:
            for n, call in enumerate(item.calls):
                messages.append(
                    ModelMessage(
                        role=ROLE_ASSISTANT,
                        kind=KIND_TOOL_CALL,
                        content=item.text if n == 0 else "",
                        tool_call_id=call.id,
                        tool_name=call.name,
                        arguments=call.arguments,
                    )
                )
        else:
            messages.append(ModelMessage(role=ROLE_ASSISTANT, kind=KIND_TEXT, content=item.text))
    sources = tuple(
        ProjectionSource(
            derived_type=DERIVED_SYSTEM if m.role == ROLE_SYSTEM else "raw", session_id=session_id
        )
        for m in messages
    )
    return Projection(
        messages=tuple(messages),
        sources=sources,
        window_id="main",
        revision=0,
        upper_bound=0,
        run_id=None,
        protocol="side",
        options={},
    )
