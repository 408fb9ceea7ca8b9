"""One builder for every view: a live turn, a gateway turn, a replayed or rebuilt turn.

plan → load → project → adapt (docs/contract.md §4):

* `view_plan` (`view_plan.py`) says, from the catalog entry and the state's active window,
  which window the view shows and which KV keys it reads: the one place that asks the entry;
* a `ViewSource` supplies them: the live database under the session lock, or the KV history
  at a revision and the log through the turn's bound (replay, snapshot rebuild);
* `freeze` reads the state part (KV, the read plan, folds) and `assemble` the rows, then
  projects; `request_for` adapts the view for a wire format and adds a gateway request's
  forwarded fields.

The live path runs `freeze` under the session lock and `assemble` after it (rows at or
below the bound never change); a replay runs both over its history. Equal state, rows and
recipe give byte-equal views, which is what makes a replay of a recorded turn identical.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict

from contextproto.protocol import adapters, client_state, errors
from contextproto.protocol.catalog import ProtocolVersion
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.messages import (
    DERIVED_HEADER,
    DERIVED_RAW,
    DERIVED_STATE,
    DERIVED_SYSTEM,
    Fold,
    RawMessage,
)
from contextproto.protocol.parameters import Parameters, with_parameters
from contextproto.protocol.projection import Projection, ProjectionInput, project
from contextproto.protocol.prompt_cache import PromptCache
from contextproto.protocol.state import covered_key
from contextproto.protocol.tokens import json_tokens
from contextproto.protocol.view_plan import ReadPlan, ViewPlan, view_plan

# How `capacity_refusal` estimates tokens: characters / 4 of the canonical JSON (tokens.py).
CAPACITY_ESTIMATOR = "chars/4"

# The builder's stages, in order: the plan (from view_plan.py), freeze, assemble, request_for.
__all__ = [
    "FrozenView",
    "ProtectedSizes",
    "View",
    "ViewPlan",
    "ViewRecipe",
    "ViewSource",
    "WireRecipe",
    "assemble",
    "build",
    "freeze",
    "request_for",
    "view_plan",
]


class ViewSource(Protocol):
    """Where a view's state and rows come from."""

    def kv(self, keys: Sequence[str]) -> Mapping[str, Any]:
        """The values of `keys` that exist in the state (absent keys left out)."""
        ...

    def folds(self, window_id: str, after_index: int) -> Sequence[Fold]:
        """The window's folds whose first index is above `after_index`."""
        ...

    def rows(self, reads: ReadPlan) -> tuple[Sequence[RawMessage], Sequence[RawMessage]]:
        """The window's messages in (after, through] and the run's inputs through the bound."""
        ...


@dataclass(frozen=True)
class FrozenView:
    """The state part of a view, read at one revision: what must be read under the lock."""

    plan: ViewPlan
    kv: Mapping[str, Any]
    reads: ReadPlan
    folds: tuple[Fold, ...]


def freeze(plan: ViewPlan, source: ViewSource) -> FrozenView:
    """Read the plan's KV (and the definitions of a gateway client's tools it names), the
    window's covered bound, and its folds above it."""
    kv = client_state.read_client_kv(source.kv, plan.kv_keys)
    reads = plan.reads(int(kv.get(covered_key(plan.window_id), 0) or 0))
    folds = (
        tuple(source.folds(reads.folds_window, reads.folds_after_index))
        if reads.folds_window
        else ()
    )
    return FrozenView(plan=plan, kv=kv, reads=reads, folds=folds)


@dataclass(frozen=True)
class ViewRecipe:
    """What the published version (and the turn's recorded inputs) fix about a view."""

    options: Mapping[str, Any]
    system_prompt: str
    session_id: str
    session_inputs: Any
    tools: Sequence[Mapping[str, Any]]  # the protocol's, then the version's host tools
    tool_result_preview_chars: int
    max_input_tokens: int | None
    trigger_tokens: int | None


class ProtectedSizes(TypedDict):
    """Estimated tokens of what neither folds nor compression can shrink (contract §6)."""

    system: int
    header: int
    runInputs: int
    toolSchemas: int


@dataclass(frozen=True)
class View:
    """A projected view with the tools sent beside it."""

    protocol: ProtocolVersion
    projection: Projection
    run_inputs: tuple[RawMessage, ...]
    tools: list[dict[str, Any]]
    tool_tokens: int
    max_input_tokens: int | None = None  # the version's limit (contract §6)

    def protected_sizes(self) -> ProtectedSizes:
        """The protected part, each piece measured as projected with the estimator of
        estimated usage, so the pieces add up to the total the capacity check compares.
        The unified@4 layout moved the window's working memory and outcomes from the header
        into the state message, so there the state message counts as header."""
        state_is_header = self.protocol.layout.shows_context_pressure
        protected = {m.id for m in self.run_inputs}
        sizes: ProtectedSizes = {"system": 0, "header": 0, "runInputs": 0, "toolSchemas": 0}
        for message, source in zip(self.projection.messages, self.projection.sources, strict=True):
            derived = source.derived_type
            if derived == DERIVED_SYSTEM:
                sizes["system"] += json_tokens(message.content)
            elif derived == DERIVED_HEADER or (state_is_header and derived == DERIVED_STATE):
                sizes["header"] += json_tokens(message.content)
            elif derived == DERIVED_RAW and protected.intersection(source.message_ids):
                sizes["runInputs"] += json_tokens(message.content)
        sizes["toolSchemas"] = self.tool_tokens
        return sizes

    def capacity_refusal(self) -> ProtocolError | None:
        """The refusal (422 `context_capacity_exceeded`) of a view whose protected part is
        above the version's `maxInputTokens`, or None: the protected part is what neither
        folds nor compression can shrink (the system prompt, the context header, this run's
        inputs, the tool schemas; `protected_sizes`)."""
        limit = self.max_input_tokens
        if not limit:
            return None
        sizes = self.protected_sizes()
        total = sizes["system"] + sizes["header"] + sizes["runInputs"] + sizes["toolSchemas"]
        if total <= limit:
            return None
        return ProtocolError(
            errors.CONTEXT_CAPACITY_EXCEEDED,
            f"The part of the view that folds and compression cannot shrink needs about "
            f"{total} tokens (system {sizes['system']}, header {sizes['header']}, this run's "
            f"inputs {sizes['runInputs']}, tool schemas {sizes['toolSchemas']}; "
            f"{CAPACITY_ESTIMATOR} estimate), above maxInputTokens {limit}. Send a shorter "
            "input, shorten the task memory or the system prompt, or use a model with a "
            "larger window.",
            {**sizes, "total": total, "limit": limit, "estimator": CAPACITY_ESTIMATOR},
        )


def assemble(
    frozen: FrozenView,
    source: ViewSource,
    recipe: ViewRecipe,
    *,
    maintenance_pending: bool = False,
) -> View:
    """Load the rows the frozen state asks for and project the view (contract §4).

    `maintenance_pending`: whether a maintenance job of the window is queued or running,
    which a context-pressure layout states. Raises the engine's ProtocolError (pairing,
    fold conflict) like `project`.
    """
    plan = frozen.plan
    window_messages, run_inputs = source.rows(frozen.reads)
    # A gateway client's tools follow the protocol's and the version's (contract §14).
    tools = client_state.merged_tools(recipe.tools, client_state.client_tools(frozen.kv))
    tool_tokens = json_tokens(tools) if tools else 0
    projection = project(
        ProjectionInput(
            plan=plan,
            reads=frozen.reads,
            options=recipe.options,
            system_prompt=recipe.system_prompt,
            session_id=recipe.session_id,
            session_inputs=recipe.session_inputs,
            kv=frozen.kv,
            window_messages=window_messages,
            run_inputs=run_inputs,
            folds=frozen.folds,
            tool_result_preview_chars=recipe.tool_result_preview_chars,
            max_input_tokens=recipe.max_input_tokens,
            trigger_tokens=recipe.trigger_tokens,
            maintenance_pending=maintenance_pending,
            tool_tokens=tool_tokens,
        )
    )
    return View(
        protocol=plan.protocol,
        projection=projection,
        run_inputs=tuple(run_inputs),
        tools=tools,
        tool_tokens=tool_tokens,
        max_input_tokens=recipe.max_input_tokens,
    )


@dataclass(frozen=True)
class WireRecipe:
    """How a view travels: the wire format and what the version says about it."""

    provider: str
    prompt_cache: PromptCache
    assistant_prefill: bool
    cache_key: str
    max_tokens_key: str = "max_completion_tokens"


def request_for(
    view: View, wire: WireRecipe, parameters: Parameters | None = None
) -> adapters.AdaptedRequest:
    """The view adapted for `wire.provider`, with a gateway request's forwarded fields."""
    adapted = adapters.adapt(
        view.projection,
        wire.provider,
        view.tools,
        assistant_prefill=wire.assistant_prefill,
        prompt_cache=wire.prompt_cache,
        cache_key=wire.cache_key,
    )
    if parameters is None or not parameters.to_json():
        return adapted
    body = with_parameters(
        adapted.body, wire.provider, parameters, max_tokens_key=wire.max_tokens_key
    )
    return adapters.AdaptedRequest(provider=adapted.provider, body=body, notes=adapted.notes)


def build(
    frozen: FrozenView,
    source: ViewSource,
    recipe: ViewRecipe,
    wire: WireRecipe,
    parameters: Parameters | None = None,
    *,
    maintenance_pending: bool = False,
) -> tuple[View, adapters.AdaptedRequest]:
    """A live turn's view and its request: `assemble`, refuse a view whose protected part
    exceeds the limit (`View.capacity_refusal`), `request_for`. Raises ProtocolError."""
    built = assemble(frozen, source, recipe, maintenance_pending=maintenance_pending)
    refusal = built.capacity_refusal()
    if refusal is not None:
        raise refusal
    return built, request_for(built, wire, parameters)
