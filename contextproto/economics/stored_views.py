"""Views from their stored shapes, and the view of a naive agent that sends everything.

A projection snapshot stores its view on the wire (contract §12.1 `messages`, `sources`) and the
request as sent; the cache economy report (`cache_report.py`) rebuilds each turn's request
for other providers from them. `full_history_projection` is its baseline: what an
append-only agent without context management would send at the same turn.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from contextproto.protocol.adapters import (
    PROVIDER_ANTHROPIC_MESSAGES,
    PROVIDER_NEUTRAL,
    PROVIDER_OPENAI_CHAT,
)
from contextproto.protocol.messages import (
    DERIVED_RAW,
    DERIVED_SYSTEM,
    KIND_TOOL_RESULT,
    ModelMessage,
    ProjectionSource,
    RawMessage,
)
from contextproto.protocol.projection import Projection


class StoredViewError(ValueError):
    """A stored view or request that cannot be read back, with what to fix."""


def message_from_wire(wire: Mapping[str, Any]) -> ModelMessage:
    """A view message from its wire shape (contract §12.1 `messages[i]`)."""
    return ModelMessage(
        role=wire["role"],
        kind=wire["kind"],
        content=wire["content"],
        tool_call_id=wire.get("toolCallId"),
        tool_name=wire.get("toolName"),
        arguments=wire.get("arguments"),
    )


def source_from_wire(wire: Mapping[str, Any]) -> ProjectionSource:
    """A ProjectionSource from its wire shape (contract §12.1 `sources[i]`)."""
    return ProjectionSource(
        derived_type=wire["derivedType"],
        session_id=wire.get("sessionId") or "",
        window_id=wire.get("windowId"),
        fold_id=wire.get("foldId"),
        first_index=wire.get("firstIndex"),
        last_index=wire.get("lastIndex"),
        message_ids=tuple(wire.get("messageIds") or ()),
    )


def projection_from_wire(
    messages: Sequence[Mapping[str, Any]],
    sources: Sequence[Mapping[str, Any]],
    *,
    window_id: str,
    revision: int,
    upper_bound: int,
    run_id: str | None,
    protocol: str,
    options: Mapping[str, Any],
    error_tool_call_ids: Iterable[str] = (),
) -> Projection:
    """A stored view (a snapshot's messages and sources) as the engine's Projection.

    The wire shape has no error flags; `error_tool_call_ids` (tool results of the log whose
    `isError` is set) restores Anthropic's `is_error`. Raises StoredViewError when the two
    lists do not pair up.
    """
    if len(messages) != len(sources):
        raise StoredViewError(
            f"a view has {len(messages)} messages but {len(sources)} sources; "
            "sources[i] must belong to messages[i]."
        )
    shown = {m.get("toolCallId") for m in messages if m.get("kind") == KIND_TOOL_RESULT}
    return Projection(
        messages=tuple(message_from_wire(m) for m in messages),
        sources=tuple(source_from_wire(s) for s in sources),
        window_id=window_id,
        revision=revision,
        upper_bound=upper_bound,
        run_id=run_id,
        protocol=protocol,
        options=dict(options),
        error_tool_call_ids=frozenset(i for i in error_tool_call_ids if i in shown),
    )


def tools_from_request(provider: str, body: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    """The tools `{name, description, inputSchema}` a stored request was offered.

    Reverses the adapters' tool rendering (`cache_control` dropped), so a view stored for
    one provider can be rebuilt for another with the same tools in the same order.
    """
    tools = body.get("tools") or []
    if provider == PROVIDER_NEUTRAL:
        return tuple(dict(t) for t in tools)
    if provider == PROVIDER_OPENAI_CHAT:
        return tuple(
            {
                "name": t["function"]["name"],
                "description": t["function"].get("description", ""),
                "inputSchema": t["function"].get("parameters") or {"type": "object"},
            }
            for t in tools
        )
    if provider == PROVIDER_ANTHROPIC_MESSAGES:
        return tuple(
            {
                "name": t["name"],
                "description": t.get("description", ""),
                "inputSchema": t.get("input_schema") or {"type": "object"},
            }
            for t in tools
        )
    raise StoredViewError(f"cannot read the tools of a {provider!r} request.")


FULL_HISTORY = "full history"


def full_history_projection(
    system: ModelMessage, log: Sequence[RawMessage], *, session_id: str, upper_bound: int
) -> Projection:
    """What a naive append-only agent sends: `system`, then every raw message up to the bound.

    No header, no state, no folds, no checkpoint, every window; raw content as logged (no
    GUI projection, no preview). Every message after the system prompt is raw history, so
    the adapters mark its last block with the sliding breakpoint.
    """
    return full_history_projections([(system, upper_bound)], log, session_id=session_id)[0]


def full_history_projections(
    turns: Sequence[tuple[ModelMessage, int]], log: Sequence[RawMessage], *, session_id: str
) -> list[Projection]:
    """`full_history_projection` of each `(system, upper_bound)`, each raw message built once."""
    ordered = sorted(log, key=lambda m: m.index)
    indices = [m.index for m in ordered]
    rendered = [
        ModelMessage(
            role=raw.role,
            kind=raw.kind,
            content=raw.content,
            tool_call_id=raw.tool_call_id,
            tool_name=raw.tool_name,
            arguments=raw.arguments,
        )
        for raw in ordered
    ]
    sources = [
        ProjectionSource(
            derived_type=DERIVED_RAW,
            session_id=session_id,
            window_id=raw.window_id,
            first_index=raw.index,
            last_index=raw.index,
            message_ids=(raw.id,),
        )
        for raw in ordered
    ]
    failed = [
        (raw.index, raw.tool_call_id)
        for raw in ordered
        if raw.kind == KIND_TOOL_RESULT and raw.is_error and raw.tool_call_id
    ]
    system_source = ProjectionSource(derived_type=DERIVED_SYSTEM, session_id=session_id)
    out = []
    for system, upper_bound in turns:
        n = bisect_right(indices, upper_bound)
        out.append(
            Projection(
                messages=(system, *rendered[:n]),
                sources=(system_source, *sources[:n]),
                window_id="*",
                revision=0,
                upper_bound=upper_bound,
                run_id=None,
                protocol=FULL_HISTORY,
                options={},
                error_tool_call_ids=frozenset(i for at, i in failed if at <= upper_bound),
            )
        )
    return out
