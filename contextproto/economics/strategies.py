"""A provider strategy replayed over a naive agent's turns, ready for the cache report.

A `Strategy` names the edits of `baselines.py` a provider would apply (trimming, tool-use
clearing, compaction); `strategy_turns` applies them turn by turn to the naive agent's view
(`stored_views.full_history_projection`) and returns the requests, the summary calls a
compaction bills and what the edits cleared, as `ViewTurn`s for `cache_report.cache_economy`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from contextproto.economics.baselines import (
    ClearToolUses,
    CompactedTurn,
    Compaction,
    Compactor,
    ToolOutputTrimmer,
    clear_tool_uses,
    trim_tool_outputs,
)
from contextproto.economics.inputs import ViewTurn
from contextproto.protocol.messages import (
    DERIVED_RAW,
    KIND_INPUT,
    ROLE_USER,
    ModelMessage,
    ProjectionSource,
)

# A stand-in for the API's summarization prompt (its text varies by model and is not
# published in full): the summary call reads the request, then this.
SUMMARY_REQUEST = (
    "Write a summary of the conversation so far inside <summary></summary> tags: what the "
    "user asked, what was done and found, and what is needed to continue the task."
)


@dataclass(frozen=True)
class Strategy:
    """A provider-native baseline: which edits it applies, and on which providers' rules.

    Edits apply in this order: trimming, tool-use clearing, then compaction on the cleared
    request. `readable` says what the model can still read of what was cleared.
    """

    label: str
    providers: tuple[str, ...]
    clear: ClearToolUses | None = None
    compaction: Compaction | None = None
    trimmer: ToolOutputTrimmer | None = None
    readable: str = "no"

    def describe(self) -> str:
        parts = []
        if self.trimmer is not None:
            parts.append(f"ToolOutputTrimmer({self.trimmer.describe()})")
        if self.clear is not None:
            parts.append(f"clear_tool_uses_20250919({self.clear.describe()})")
        if self.compaction is not None:
            parts.append(f"compact_20260112({self.compaction.describe()})")
        return " + ".join(parts)


@dataclass(frozen=True)
class StrategyTurns:
    """A naive agent's turns with a strategy applied, ready for the cache report.

    `turns` holds one request per turn, plus the summary call before each compacting turn
    (labelled `compaction`); `summary_output_tokens` is what those calls wrote (billed as
    output); `largest_request` is the most input tokens one request carried.
    """

    turns: list[ViewTurn]
    summary_output_tokens: int
    compactions: int
    cleared_turns: int
    largest_request: int


def strategy_turns(
    turns: Sequence[ViewTurn],
    strategy: Strategy,
    count_tokens: Callable[[str], int],
    *,
    request_tokens: Callable[[ViewTurn], int] | None = None,
) -> StrategyTurns:
    """Apply `strategy` to each naive turn (system, then every raw message, in send order).

    The triggers compare `request_tokens(turn)`, the input tokens of a turn's request as the
    provider would count them (the cache report passes the simulator's count of the adapted
    request); without it, each message's canonical JSON counted once plus the tools' JSON.
    The tokens an edit frees (for `clear_at_least`) are counted per message.
    """
    memo: dict[int, tuple[ModelMessage, int]] = {}

    def count(message: ModelMessage) -> int:
        known = memo.get(id(message))
        if known is not None and known[0] is message:
            return known[1]
        n = count_tokens(json.dumps(message.to_wire(), ensure_ascii=False, sort_keys=True))
        memo[id(message)] = (message, n)
        return n

    sources: dict[int, ProjectionSource] = {}
    for turn in turns:
        for message, source in zip(turn.projection.messages, turn.projection.sources, strict=True):
            sources.setdefault(id(message), source)
    tool_tokens: dict[int, int] = {}

    def tools_of(turn: ViewTurn) -> int:
        key = id(turn.tools)
        if key not in tool_tokens:
            tool_tokens[key] = count_tokens(json.dumps(list(turn.tools), ensure_ascii=False))
        return tool_tokens[key]

    def prompt(messages: Sequence[ModelMessage], turn: ViewTurn) -> int:
        if request_tokens is not None:
            return request_tokens(_view_turn(turn, messages, sources, label=turn.label))
        return tools_of(turn) + sum(count(m) for m in messages)

    cleared_turns = 0

    def edit(messages: Sequence[ModelMessage], turn: ViewTurn) -> tuple[ModelMessage, ...]:
        nonlocal cleared_turns
        out: Sequence[ModelMessage] = messages
        changed = False
        if strategy.trimmer is not None:
            trimmed = trim_tool_outputs(out, strategy.trimmer)
            changed = changed or bool(trimmed.cleared)
            out = _keep_sources(out, trimmed.messages, sources)
        if strategy.clear is not None:
            cleared = clear_tool_uses(
                out, prompt_tokens=prompt(out, turn), count=count, config=strategy.clear
            )
            changed = changed or bool(cleared.cleared)
            out = _keep_sources(out, cleared.messages, sources)
        cleared_turns += changed
        return tuple(out)

    views: list[tuple[ViewTurn, CompactedTurn]] = []
    if strategy.compaction is None:
        views = [(t, CompactedTurn(edit(t.projection.messages, t))) for t in turns]
    elif turns:
        config = strategy.compaction
        summary_source = ProjectionSource(derived_type=DERIVED_RAW, session_id="", window_id="*")
        current = turns[0]
        compactor = Compactor(
            prompt_tokens=lambda ms: prompt(ms, current),
            summary_text=lambda n: _summary_text(n, config.summary_tokens, count_tokens),
            config=config,
            edit=lambda ms: edit(ms, current),
        )
        for turn in turns:
            current = turn
            compacted = compactor.step(turn.projection.messages)
            if compactor.summary is not None:
                sources.setdefault(id(compactor.summary), summary_source)
            views.append((turn, compacted))
    out: list[ViewTurn] = []
    output_tokens = compactions = largest = 0
    for turn, compacted in views:
        if compacted.summarized is not None:
            compactions += 1
            output_tokens += compacted.summary_output_tokens
            ask = ModelMessage(role=ROLE_USER, kind=KIND_INPUT, content=SUMMARY_REQUEST)
            sources[id(ask)] = ProjectionSource(derived_type=DERIVED_RAW, session_id="")
            request = (*compacted.summarized, ask)
            largest = max(largest, prompt(request, turn))
            out.append(_view_turn(turn, request, sources, label=f"{turn.label} compaction"))
        largest = max(largest, prompt(compacted.messages, turn))
        out.append(_view_turn(turn, compacted.messages, sources, label=turn.label))
    return StrategyTurns(
        turns=out,
        summary_output_tokens=output_tokens,
        compactions=compactions,
        cleared_turns=cleared_turns,
        largest_request=largest,
    )


def _keep_sources(
    before: Sequence[ModelMessage],
    after: Sequence[ModelMessage],
    sources: dict[int, ProjectionSource],
) -> Sequence[ModelMessage]:
    """`after` (an in-place edit of `before`), each changed message given its original's source."""
    for old, new in zip(before, after, strict=True):
        if new is not old and id(new) not in sources and id(old) in sources:
            sources[id(new)] = sources[id(old)]
    return after


def _view_turn(
    turn: ViewTurn,
    messages: Sequence[ModelMessage],
    sources: Mapping[int, ProjectionSource],
    *,
    label: str,
) -> ViewTurn:
    projection = replace(
        turn.projection,
        messages=tuple(messages),
        sources=tuple(sources[id(m)] for m in messages),
    )
    return ViewTurn(projection, tools=turn.tools, sent_at=turn.sent_at, label=label)


_SUMMARY_SENTENCE = (
    "The user runs a series of laptop quotes for EU customers; each task looks up price, "
    "shipping and stock and ends with a quote in EUR; prices seen range 1200-1400 per unit, "
    "shipping is 250 per order, stock is sufficient; agreed quotes are never changed. "
)


def _summary_text(n: int, tokens: int, count_tokens: Callable[[str], int]) -> str:
    """The n-th summary: a fixed text of about `tokens` tokens (its content is not modelled)."""
    head = f"Summary {n} of the conversation so far. "
    per = max(count_tokens(_SUMMARY_SENTENCE), 1)
    return head + _SUMMARY_SENTENCE * max((tokens - count_tokens(head)) // per, 1)
