"""The model's view for one turn (contract §4): a pure function of frozen state and raw rows.

`view.py` plans a view (`view_plan.py`: the window, the KV keys and the rows, asked of the
catalog entry once), has a source load exactly the rows of its `ReadPlan` and hands them to
`project`, which lays the view out by the entry's `Layout`: the system prompt, the context
header, the history (`history.py` chooses it, `rendering.py` renders it) and the layout's state
message at its place (`derived_texts.py` writes the derived texts). Nothing here scans the
whole log, so the cost of a turn grows with what the model sees, not with the session's size.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from contextproto.protocol import client_state, errors
from contextproto.protocol.catalog import Layout, StateStyle
from contextproto.protocol.derived_texts import (
    header_text,
    pressure_state_text,
    state_text,
    system_text,
)
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.history import HistoryItem, visible_history
from contextproto.protocol.masking import mask_results
from contextproto.protocol.messages import (
    DERIVED_HEADER,
    DERIVED_STATE,
    DERIVED_SYSTEM,
    KIND_TOOL_RESULT,
    ROLE_ASSISTANT,
    ROLE_SYSTEM,
    ROLE_USER,
    Fold,
    ModelMessage,
    ModelMessageWire,
    ProjectionSource,
    RawMessage,
    Role,
    SourceWire,
)
from contextproto.protocol.rendering import (
    DEFAULT_TOOL_RESULT_PREVIEW_CHARS,
    Rendered,
    render_history,
)
from contextproto.protocol.tokens import json_tokens
from contextproto.protocol.view_plan import ReadPlan, ViewPlan
from contextproto.protocol.vocabulary import (
    MASK_KEEP_RECENT,
    MASK_MIN_CHARS,
    MASK_STEP,
    PLACEMENT_BEFORE_HISTORY_ASSISTANT,
    PLACEMENT_TRAILING_ASSISTANT,
    PLACEMENT_TRAILING_USER,
    STATE_MESSAGE_PLACEMENTS,
)


@dataclass(frozen=True)
class ProjectionInput:
    """Everything one view depends on; equal inputs give byte-equal projections."""

    plan: ViewPlan  # the catalog entry, the window, the run, the bound U and the revision R
    reads: ReadPlan  # the rows the view is built from: W's in (C, U], the run's inputs, folds
    options: Mapping[str, Any]  # normalized: every key of the version present
    system_prompt: str
    session_id: str
    session_inputs: Any  # the session's inputs (a JSON value)
    kv: Mapping[str, Any]  # the plan's KV keys (and the client tools'); missing means absent
    window_messages: Sequence[RawMessage]  # W's messages with C < index <= U
    run_inputs: Sequence[RawMessage]  # current run's inputs, index <= U, any window
    folds: Sequence[Fold]  # W's folds with first_index > C
    tool_result_preview_chars: int = DEFAULT_TOOL_RESULT_PREVIEW_CHARS
    # Context pressure (unified@4 shows it; other versions ignore these). Passed in, not
    # read, so the view stays a pure function of its input.
    max_input_tokens: int | None = None  # the AgentVersion's maxInputTokens
    trigger_tokens: int | None = None  # the fewest input tokens that queue maintenance
    maintenance_pending: bool = False  # a maintenance job of W is queued or running
    tool_tokens: int = 0  # estimated tokens of the tool schemas sent with the view


class ProjectionWire(TypedDict):
    """A view as the API returns and stores it (contract §12.1 projection)."""

    messages: list[ModelMessageWire]
    sources: list[SourceWire]
    windowId: str
    revision: int
    upperBound: int
    runId: str | None
    protocol: str
    options: dict[str, Any]


@dataclass(frozen=True)
class Projection:
    """The model's view: messages[i] is explained by sources[i]."""

    messages: tuple[ModelMessage, ...]
    sources: tuple[ProjectionSource, ...]
    window_id: str
    revision: int
    upper_bound: int
    run_id: str | None
    protocol: str  # "unified@2"
    options: dict[str, Any]
    # Tool call ids whose visible result is an error. Not part of the wire shape:
    # only provider adapters need it (Anthropic's `is_error`), and ModelMessage has
    # no field for it.
    error_tool_call_ids: frozenset[str] = field(default_factory=frozenset)

    def to_wire(self) -> ProjectionWire:
        return {
            "messages": [m.to_wire() for m in self.messages],
            "sources": [s.to_wire() for s in self.sources],
            "windowId": self.window_id,
            "revision": self.revision,
            "upperBound": self.upper_bound,
            "runId": self.run_id,
            "protocol": self.protocol,
            "options": self.options,
        }


def project(inp: ProjectionInput) -> Projection:
    """Build the model's view for one turn (contract §4).

    Pure and deterministic: equal inputs give equal projections with identical JSON. The
    plan says the window, the run, U and R, and carries the catalog entry whose `Layout` the
    view follows; rows outside the read plan (other windows, W at or below C, above U,
    earlier runs' inputs, folds at or below C) are ignored even if passed in.

    Raises ProtocolError `projection_pairing_violation` when the history has a call without
    exactly one later result or a result without a preceding call. A call that is still
    pending counts as a violation: the caller must not project while a call of the active
    window awaits its result. Raises `projection_fold_conflict` for folds that overlap or
    cut a group (corrupt state).
    """
    plan, entry = inp.plan, inp.plan.protocol
    layout = entry.layout
    options = dict(inp.options)

    def option(name: str) -> Any:
        # Normalized options hold every key; the version's default covers a caller that
        # passes fewer.
        return options[name] if name in options else entry.defaults.get(name)

    items = visible_history(
        inp.reads,
        window_messages=inp.window_messages,
        run_inputs=inp.run_inputs,
        folds=inp.folds,
    )
    masked = (
        mask_results(
            [i for i in items if isinstance(i, RawMessage)],
            window_id=plan.window_id,
            keep_recent=int(option(MASK_KEEP_RECENT)),
            step=int(option(MASK_STEP)),
            min_chars=int(option(MASK_MIN_CHARS)),
        )
        if layout.masking
        else {}
    )
    sid = inp.session_id
    client_system = client_state.client_system(inp.kv)
    system = (
        ModelMessage(
            role=ROLE_SYSTEM,
            kind=DERIVED_SYSTEM,
            content=system_text(inp.system_prompt, entry.prompt, client_system),
        ),
        ProjectionSource(derived_type=DERIVED_SYSTEM, session_id=sid),
    )
    header = (
        ModelMessage(
            role=ROLE_ASSISTANT,
            kind=DERIVED_HEADER,
            content=header_text(
                layout.header,
                window_id=plan.window_id,
                kv=inp.kv,
                session_inputs=inp.session_inputs,
            ),
        ),
        ProjectionSource(derived_type=DERIVED_HEADER, session_id=sid, window_id=plan.window_id),
    )
    history = render_history(
        items,
        session_id=sid,
        gui=bool(options.get("guiProjection", True)),
        preview_chars=inp.tool_result_preview_chars,
        masked=masked,
    )
    ordered = _placed(
        inp, layout, option, items, before_state=[system, header], history=history, masked=masked
    )
    return Projection(
        messages=tuple(m for m, _ in ordered),
        sources=tuple(s for _, s in ordered),
        window_id=plan.window_id,
        revision=plan.revision,
        upper_bound=plan.upper_bound,
        run_id=plan.run_id,
        protocol=entry.key,
        options=options,
        error_tool_call_ids=frozenset(
            i.tool_call_id
            for i in items
            if isinstance(i, RawMessage)
            and i.kind == KIND_TOOL_RESULT
            and i.is_error
            and i.tool_call_id
        ),
    )


def _placed(
    inp: ProjectionInput,
    layout: Layout,
    option: Callable[[str], Any],
    items: Sequence[HistoryItem],
    *,
    before_state: list[Rendered],
    history: Sequence[Rendered],
    masked: Mapping[str, str],
) -> list[Rendered]:
    """System and header, the history, and the layout's state message at its placement."""
    if layout.state is StateStyle.NONE:
        return [*before_state, *history]
    placement = layout.placement or option("stateMessagePlacement") or PLACEMENT_TRAILING_ASSISTANT
    if placement not in STATE_MESSAGE_PLACEMENTS:
        # Normalized options never get here; refuse rather than guess a position.
        raise ProtocolError(
            errors.OPTION_BAD_ENUM,
            f"stateMessagePlacement {placement!r} is not one of "
            f"{', '.join(STATE_MESSAGE_PLACEMENTS)}.",
            {"option": "stateMessagePlacement", "value": placement},
        )
    window_id, kv, revision = inp.plan.window_id, inp.kv, inp.plan.revision
    covered = inp.reads.after_index
    if layout.state is StateStyle.PRESSURE:
        # viewTokens: every message of this view but the state message itself, plus the
        # tool schemas, as the admin's token breakdown estimates them (docs/decisions.md).
        view_tokens = inp.tool_tokens + sum(
            json_tokens(m.to_wire()) for m, _ in [*before_state, *history]
        )
        text = pressure_state_text(
            window_id=window_id,
            kv=kv,
            revision=revision,
            covered=covered,
            items=items,
            masked=len(masked),
            pressure={
                "viewTokens": view_tokens,
                "maxInputTokens": inp.max_input_tokens,
                "triggerTokens": inp.trigger_tokens,
                "maintenancePending": bool(inp.maintenance_pending),
            },
        )
    else:
        text = state_text(
            window_id=window_id, kv=kv, revision=revision, covered=covered, items=items
        )
    role: Role = ROLE_USER if placement == PLACEMENT_TRAILING_USER else ROLE_ASSISTANT
    state = (
        ModelMessage(role=role, kind=DERIVED_STATE, content=text),
        ProjectionSource(
            derived_type=DERIVED_STATE, session_id=inp.session_id, window_id=window_id
        ),
    )
    if placement == PLACEMENT_BEFORE_HISTORY_ASSISTANT:
        return [*before_state, state, *history]
    return [*before_state, *history, state]
