"""Cache economy: what a sequence of views costs once the provider caches, and why it breaks.

Given a session's turns as projections (messages + sources, the tools, a send time), it
rebuilds each turn's request for `openai-chat` and `anthropic-messages` with prompt caching
on (the adapters as they run, `PromptCache` auto / 5m and the session's cache key), replays
them through the prompt-cache simulator (`cache_sim.py`) and returns per turn and in total:
input, cache-read, cache-write and uncached tokens, the hit ratio (cache-read / input) and
the effective cost under each provider's rules.

For each pair of consecutive turns it names the cause of a cache break: `first_divergence`
of the two requests gives the first block that differs; the block is traced back to the
projection message it was rendered from (the adapters merge, move and re-role messages, so
the trace renders the same projection once more with every message tagged), and the
message's ProjectionSource, compared across the two turns, gives the cause (CAUSES). Each
pair also counts its re-billed tokens: blocks after the divergence whose content the
previous request already sent (a cache could have served them; this turn pays them again).

The baseline, a naive append-only agent's view (`stored_views.full_history_projection`:
the system prompt, then every raw message up to the turn's bound), goes through the same
adapters and simulator: its last raw block carries the sliding breakpoint.

Pure: no Django, no settings. Every token figure is an estimate of the injected counter
(reports pass `contextproto.tokens.count_tokens` and print its label).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import Any, TypedDict

from contextproto.protocol.adapters import (
    PROVIDER_ANTHROPIC_MESSAGES,
    PROVIDER_OPENAI_CHAT,
    adapt,
)
from contextproto.protocol.cache_sim import (
    SECTION_SYSTEM,
    SECTION_TOOLS,
    SIMULATED_PROVIDERS,
    CacheSimulator,
    CacheTotals,
    Divergence,
    Linearised,
    Prices,
    TokenCounter,
    Turn,
    TurnCache,
    TurnCacheWire,
    cache_hit_ratio,
    effective_cost,
    first_divergence,
    totals,
)
from contextproto.protocol.content_parts import (
    PART_IMAGE,
    PART_REDACTED_THINKING,
    PART_TEXT,
    PART_THINKING,
    part_type,
)
from contextproto.protocol.messages import (
    DERIVED_FOLD,
    DERIVED_HEADER,
    DERIVED_RAW,
    DERIVED_STATE,
    DERIVED_SYSTEM,
    KIND_INPUT,
    KIND_TOOL_CALL,
    ProjectionSource,
)
from contextproto.protocol.projection import Projection
from contextproto.protocol.prompt_cache import PromptCache

# Causes of a cache break between two consecutive turns, in the order they are tested.
CAUSE_APPEND = "append only"  # the request extends the previous one: nothing re-billed
CAUSE_TOOLS = "tools"  # the tool list changed: everything re-billed
CAUSE_SYSTEM = "system"  # the system prompt changed
CAUSE_WINDOW_SWITCH = "window switch"  # the active window differs
CAUSE_CHECKPOINT = "checkpoint"  # the active window's coverage moved (a checkpoint committed)
CAUSE_HEADER = "header"  # task memory, the window record or the checkpoint text changed
CAUSE_FOLD = "fold"  # a fold replaced history from its first message
CAUSE_STATE = "state message"  # a state message placed before history changed (unified@3 B)
CAUSE_MASKING = "masking"  # a tool result turned into (or back from) a masked stub
CAUSE_HISTORY = "history"  # another change of shown history (images dropped, inputs dropped)
CAUSES = (
    CAUSE_APPEND,
    CAUSE_TOOLS,
    CAUSE_SYSTEM,
    CAUSE_WINDOW_SWITCH,
    CAUSE_CHECKPOINT,
    CAUSE_HEADER,
    CAUSE_FOLD,
    CAUSE_STATE,
    CAUSE_MASKING,
    CAUSE_HISTORY,
)
# A later protocol's masked tool result (its source's derived type).
DERIVED_MASKED = "masked"

# Reference models: Anthropic's minimum cacheable prefix depends on the model (1024 for
# Sonnet 4.5); OpenAI's is 1024 for every model.
DEFAULT_MODELS: Mapping[str, str] = {
    PROVIDER_OPENAI_CHAT: "gpt-4o",
    PROVIDER_ANTHROPIC_MESSAGES: "claude-sonnet-4-5",
}
# Prices relative to the input price: cache reads 0.1; Anthropic bills a 5-minute write
# 1.25x (1-hour 2x), OpenAI has no write charge (its simulated turns write nothing anyway).
RELATIVE_PRICES: Mapping[str, Prices] = {
    PROVIDER_OPENAI_CHAT: Prices(input=1.0, cache_read=0.1, cache_write=1.0, cache_write_1h=1.0),
    PROVIDER_ANTHROPIC_MESSAGES: Prices(
        input=1.0, cache_read=0.1, cache_write=1.25, cache_write_1h=2.0
    ),
}
PROVIDER_LABELS: Mapping[str, str] = {
    PROVIDER_OPENAI_CHAT: "OpenAI",
    PROVIDER_ANTHROPIC_MESSAGES: "Anthropic",
}


class CacheReportError(ValueError):
    """Turns the report cannot replay, with what to fix."""


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class ViewTurn:
    """One turn: the view as projected, the tools it was offered, when it was sent.

    `tools` are `{name, description, inputSchema}` as the adapters take them; `sent_at` is
    in seconds on any clock that only moves forward; `label` names the turn (a snapshot id).
    """

    projection: Projection
    tools: tuple[Mapping[str, Any], ...] = ()
    sent_at: float = 0.0
    label: str = ""


@dataclass(frozen=True)
class EconomySettings:
    """How the requests are rebuilt and billed.

    `prompt_cache`: the hints the adapters add (default: auto, 5m; as SPEC §15's default).
    `cache_key`: the OpenAI `prompt_cache_key` (the session's). `min_cacheable_tokens`
    overrides the model's minimum (None: the model's, from the simulator's table).
    """

    providers: tuple[str, ...] = SIMULATED_PROVIDERS
    prompt_cache: PromptCache = field(default_factory=PromptCache)
    cache_key: str | None = None
    models: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_MODELS))
    prices: Mapping[str, Prices] = field(default_factory=lambda: dict(RELATIVE_PRICES))
    assistant_prefill: bool = False
    min_cacheable_tokens: int | None = None


# --------------------------------------------------------------------------- results


class TurnEconomyWire(TurnCacheWire):
    """One turn of the report: its cache figures, cost and cause."""

    turn: int
    label: str
    cost: float
    cause: str | None  # one of CAUSES; None on the first turn
    divergence: str
    rebilledTokens: int


class BreakSummaryWire(TypedDict):
    cause: str
    pairs: int
    rebilledTokens: int
    turns: list[int]


class ProviderEconomyWire(TypedDict):
    provider: str
    model: str
    inputTokens: int
    cacheReadTokens: int
    cacheWriteTokens: int
    uncachedTokens: int
    hitRatio: float
    cost: float
    equivalentTokens: float
    breaks: list[BreakSummaryWire]
    turns: list[TurnEconomyWire]


class CacheEconomyWire(TypedDict):
    view: str
    turns: int
    tokenizer: str
    providers: dict[str, ProviderEconomyWire]


@dataclass(frozen=True)
class TurnEconomy:
    """One turn under one provider's rules. `cause` explains the pair (previous turn, this
    turn); None on the first turn. `cost` follows SPEC §15's formula with the report's prices
    (per million tokens: with relative prices, cost x 1,000,000 is input-token equivalents)."""

    turn: int
    label: str
    cache: TurnCache
    cost: float
    cause: str | None
    divergence: str
    rebilled_tokens: int

    def to_wire(self) -> TurnEconomyWire:
        return {
            "turn": self.turn,
            "label": self.label,
            **self.cache.to_wire(),
            "cost": self.cost,
            "cause": self.cause,
            "divergence": self.divergence,
            "rebilledTokens": self.rebilled_tokens,
        }


@dataclass(frozen=True)
class BreakSummary:
    """The turn pairs of one cause and the tokens they re-billed (`turns`: the later turn)."""

    cause: str
    pairs: int
    rebilled_tokens: int
    turns: tuple[int, ...]

    def to_wire(self) -> BreakSummaryWire:
        return {
            "cause": self.cause,
            "pairs": self.pairs,
            "rebilledTokens": self.rebilled_tokens,
            "turns": list(self.turns),
        }


@dataclass(frozen=True)
class ProviderEconomy:
    """Every turn of a view under one provider's rules, and the totals."""

    provider: str
    model: str
    prices: Prices
    turns: tuple[TurnEconomy, ...]

    @property
    def totals(self) -> CacheTotals:
        return totals([t.cache for t in self.turns])

    @property
    def hit_ratio(self) -> float:
        """Cache-read tokens / input tokens."""
        return cache_hit_ratio([t.cache for t in self.turns])

    @property
    def cost(self) -> float:
        """SPEC §15's cost of every turn with the report's prices."""
        return effective_cost([t.cache for t in self.turns], self.prices)

    @property
    def equivalent_tokens(self) -> float:
        """The cost in input tokens at the full price (what the same money buys uncached)."""
        return self.cost * 1_000_000 / self.prices.input if self.prices.input else 0.0

    @property
    def breaks(self) -> tuple[BreakSummary, ...]:
        """Turn pairs by cause, in CAUSES order; causes without a pair are left out."""
        pairs: dict[str, list[TurnEconomy]] = {}
        for turn in self.turns:
            if turn.cause is not None:
                pairs.setdefault(turn.cause, []).append(turn)
        return tuple(
            BreakSummary(
                cause=cause,
                pairs=len(pairs[cause]),
                rebilled_tokens=sum(t.rebilled_tokens for t in pairs[cause]),
                turns=tuple(t.turn for t in pairs[cause]),
            )
            for cause in (*CAUSES, *sorted(set(pairs) - set(CAUSES)))
            if cause in pairs
        )

    def to_wire(self) -> ProviderEconomyWire:
        summed = self.totals
        return {
            "provider": self.provider,
            "model": self.model,
            "inputTokens": summed.input_tokens,
            "cacheReadTokens": summed.cache_read_tokens,
            "cacheWriteTokens": summed.cache_write_tokens,
            "uncachedTokens": summed.uncached_tokens,
            "hitRatio": self.hit_ratio,
            "cost": self.cost,
            "equivalentTokens": self.equivalent_tokens,
            "breaks": [b.to_wire() for b in self.breaks],
            "turns": [t.to_wire() for t in self.turns],
        }


@dataclass(frozen=True)
class CacheEconomy:
    """A view's turns under every simulated provider's rules."""

    view: str
    turns: int
    tokenizer: str
    providers: Mapping[str, ProviderEconomy]

    def __getitem__(self, provider: str) -> ProviderEconomy:
        return self.providers[provider]

    def to_wire(self) -> CacheEconomyWire:
        return {
            "view": self.view,
            "turns": self.turns,
            "tokenizer": self.tokenizer,
            "providers": {name: p.to_wire() for name, p in self.providers.items()},
        }


# --------------------------------------------------------------------------- tracing blocks

# Private-use characters around a message's position: never in model text, kept as is by
# JSON without ensure_ascii.
_TAG = re.compile("\ue000(\\d+)\ue001")


def _tag(position: int) -> str:
    return f"\ue000{position}\ue001"


def _tagged_content(content: Any, tag: str) -> Any:
    """`content` with every rendered part replaced by `tag`, empty parts kept empty.

    The adapters drop empty text and turn each image into one block: a text part with the
    tag keeps that block count, so the tagged request has the real one's block structure.
    A thinking part keeps its type with the tag as its text (or data): Anthropic sends it as
    one block, OpenAI leaves it out, as for the real part.
    """
    if isinstance(content, str):
        return tag if content else ""
    if isinstance(content, list):
        out: list[Any] = []
        for part in content:
            kind = part_type(part)
            if kind == PART_IMAGE:
                out.append({"type": PART_TEXT, "text": tag})
            elif kind == PART_TEXT:
                out.append({"type": PART_TEXT, "text": tag if part.get("text") else ""})
            elif kind == PART_THINKING:
                out.append({"type": PART_THINKING, "thinking": tag, "signature": ""})
            elif kind == PART_REDACTED_THINKING:
                out.append({"type": PART_REDACTED_THINKING, "data": tag})
            else:
                out.append(part)  # rendered by no adapter; kept so nothing else moves
        return out
    if content is None:
        return None
    return tag if str(content) else ""


def _tagged(projection: Projection) -> Projection:
    messages = []
    for position, message in enumerate(projection.messages):
        tag = _tag(position)
        messages.append(
            replace(
                message,
                content=_tagged_content(message.content, tag),
                # A tool call's own block is its tool_use: its arguments carry the tag too.
                arguments={"tag": tag} if message.kind == KIND_TOOL_CALL else message.arguments,
            )
        )
    return replace(projection, messages=tuple(messages))


def _content_blocks(content: Any) -> list[Any]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])


def _block_values(provider: str, body: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(section, value) of each block in the simulator's prefix order (cache_sim.linearise)."""
    out: list[tuple[str, Any]] = [(SECTION_TOOLS, t) for t in body.get("tools") or []]
    if provider == PROVIDER_ANTHROPIC_MESSAGES:
        system = body.get("system")
        if system is not None:
            out += [(SECTION_SYSTEM, b) for b in _content_blocks(system)]
        for message in body.get("messages") or []:
            out += [("messages", b) for b in _content_blocks(message.get("content"))]
    else:
        out += [("messages", m) for m in body.get("messages") or []]
    return out


def _owners(provider: str, turn: ViewTurn, settings: EconomySettings) -> list[int | None]:
    """Per request block, the position of the projection message it was rendered from.

    None for tools. Renders the projection once more with each message's content replaced
    by a tag naming its position: same roles, kinds, ids and emptiness, so the adapters
    merge, move and mark exactly as they did for the real request.
    """
    body = _adapt(provider, replace(turn, projection=_tagged(turn.projection)), settings)
    owners: list[int | None] = []
    for section, value in _block_values(provider, body):
        if section == SECTION_TOOLS:
            owners.append(None)
            continue
        found = _TAG.search(json.dumps(value, ensure_ascii=False))
        owners.append(int(found.group(1)) if found else None)
    return owners


# --------------------------------------------------------------------------- causes


def _is_history(source: ProjectionSource) -> bool:
    return source.derived_type not in (DERIVED_SYSTEM, DERIVED_HEADER, DERIVED_STATE)


def _trailing(projection: Projection, position: int) -> bool:
    """Whether no history message follows `position` (a trailing derived message)."""
    return not any(_is_history(s) for s in projection.sources[position + 1 :])


def _shown_ids(projection: Projection) -> set[str]:
    """Ids of the active window's non-input raw messages the view shows or folds."""
    inputs = {
        mid
        for message, source in zip(projection.messages, projection.sources, strict=True)
        if message.kind == KIND_INPUT
        for mid in source.message_ids
    }
    return {
        mid
        for source in projection.sources
        if _is_history(source) and source.window_id == projection.window_id
        for mid in source.message_ids
        if mid not in inputs
    }


def classify(
    previous: Projection,
    current: Projection,
    divergence: Divergence,
    previous_owner: int | None,
    current_owner: int | None,
) -> str:
    """The cause of the cache break between two consecutive views (one of CAUSES).

    `divergence` is `first_divergence` of their requests; the owners are the positions of
    the projection messages its blocks were rendered from (None: a tool, or past the end).
    """
    if divergence.kind in ("identical", "appended"):
        return CAUSE_APPEND
    refs = [r for r in (divergence.previous, divergence.current) if r is not None]
    if any(r.section == SECTION_TOOLS for r in refs):
        return CAUSE_TOOLS
    before = previous.sources[previous_owner] if previous_owner is not None else None
    after = current.sources[current_owner] if current_owner is not None else None
    # The previous request differs first at its trailing state: all it held before that is
    # a prefix of this one, which only appended (and rebuilt the state after the history).
    if (
        previous_owner is not None
        and previous.sources[previous_owner].derived_type == DERIVED_STATE
        and _trailing(previous, previous_owner)
        and (after is None or after.derived_type not in (DERIVED_SYSTEM, DERIVED_HEADER))
    ):
        return CAUSE_APPEND
    kinds = {s.derived_type for s in (before, after) if s is not None}
    if any(r.section == SECTION_SYSTEM for r in refs) or DERIVED_SYSTEM in kinds:
        return CAUSE_SYSTEM
    if previous.window_id != current.window_id:
        return CAUSE_WINDOW_SWITCH
    if _shown_ids(previous) - _shown_ids(current):
        # Messages of the window left the view without a fold: its coverage moved.
        return CAUSE_CHECKPOINT
    if DERIVED_HEADER in kinds:
        return CAUSE_HEADER
    if DERIVED_FOLD in kinds:
        return CAUSE_FOLD
    if before is not None and before.derived_type == DERIVED_RAW:
        folded = {
            mid for s in current.sources if s.derived_type == DERIVED_FOLD for mid in s.message_ids
        }
        if folded.intersection(before.message_ids):
            return CAUSE_FOLD
    if DERIVED_STATE in kinds:
        return CAUSE_STATE
    if DERIVED_MASKED in kinds:
        return CAUSE_MASKING
    return CAUSE_HISTORY


def _rebilled(previous: Linearised, current: Linearised, position: int | None) -> int:
    """Tokens of `current` from `position` on whose content `previous` sent from there on."""
    if position is None:
        return 0
    sent = {b.digest for b in previous.blocks[position:]}
    return sum(b.tokens for b in current.blocks[position:] if b.digest in sent)


# --------------------------------------------------------------------------- replay


def _adapt(provider: str, turn: ViewTurn, settings: EconomySettings) -> dict[str, Any]:
    return adapt(
        turn.projection,
        provider,
        list(turn.tools),
        assistant_prefill=settings.assistant_prefill,
        prompt_cache=settings.prompt_cache,
        cache_key=settings.cache_key,
    ).body


class _Simulator(CacheSimulator):
    """The simulator, keeping the request it linearised last (so it is not done twice)."""

    last: Linearised | None = None

    def linearise(self, provider: str, body: Mapping[str, Any]) -> Linearised:
        self.last = super().linearise(provider, body)
        return self.last


def _replay(
    provider: str,
    turns: Sequence[ViewTurn],
    count_tokens: TokenCounter,
    settings: EconomySettings,
) -> ProviderEconomy:
    model = settings.models.get(provider, DEFAULT_MODELS.get(provider, ""))
    prices = settings.prices.get(provider, RELATIVE_PRICES.get(provider, Prices()))
    simulator = _Simulator(count_tokens)
    results: list[TurnEconomy] = []
    previous: tuple[ViewTurn, Linearised] | None = None
    owners: dict[int, list[int | None]] = {}

    def owner(at: int, turn: ViewTurn, request: Linearised, block: int | None) -> int | None:
        if block is None:
            return None
        if at not in owners:
            found = _owners(provider, turn, settings)
            # Same structure or no trace: a mismatch leaves the pair to CAUSE_HISTORY.
            owners[at] = found if len(found) == len(request.blocks) else []
        traced = owners[at]
        return traced[block] if block < len(traced) else None

    for number, turn in enumerate(turns, start=1):
        body = _adapt(provider, turn, settings)
        cache = simulator.replay(
            Turn(
                provider=provider,
                body=body,
                sent_at=turn.sent_at,
                model=model,
                min_cacheable_tokens=settings.min_cacheable_tokens,
            )
        )
        request = simulator.last
        if request is None or request.provider != provider:  # replay linearised elsewhere
            request = simulator.linearise(provider, body)
        simulator.last = None
        cause: str | None = None
        described = ""
        rebilled = 0
        if previous is not None:
            before_turn, before = previous
            divergence = first_divergence(before, request)
            described = divergence.describe()
            at = divergence.position
            changed = divergence.kind in ("changed", "truncated")
            cause = classify(
                before_turn.projection,
                turn.projection,
                divergence,
                owner(number - 1, before_turn, before, at if changed else None),
                owner(
                    number,
                    turn,
                    request,
                    at if divergence.kind == "changed" else None,
                ),
            )
            rebilled = 0 if cause == CAUSE_APPEND else _rebilled(before, request, at)
        results.append(
            TurnEconomy(
                turn=number,
                label=turn.label,
                cache=cache,
                cost=effective_cost([cache], prices),
                cause=cause,
                divergence=described,
                rebilled_tokens=rebilled,
            )
        )
        previous = (turn, request)
        owners.pop(number - 1, None)  # only the newest turn is traced again
    return ProviderEconomy(provider=provider, model=model, prices=prices, turns=tuple(results))


def cache_economy(
    turns: Sequence[ViewTurn],
    count_tokens: TokenCounter,
    *,
    view: str = "",
    tokenizer: str = "",
    settings: EconomySettings | None = None,
) -> CacheEconomy:
    """Replay `turns` (in send order) for every provider of `settings`; see the module doc.

    `tokenizer` labels the figures (what `count_tokens` is). Raises CacheReportError for
    turns sent out of order or an unknown provider, and CacheSimError for a request the
    provider would refuse.
    """
    settings = settings or EconomySettings()
    unknown = [p for p in settings.providers if p not in SIMULATED_PROVIDERS]
    if unknown:
        raise CacheReportError(
            f"cannot report caching for {', '.join(unknown)}; use "
            f"{' or '.join(SIMULATED_PROVIDERS)}."
        )
    for earlier, later in pairwise(turns):
        if later.sent_at < earlier.sent_at:
            raise CacheReportError(
                f"turns must be in send order: {later.label or 'a turn'} at {later.sent_at} s "
                f"comes after one sent at {earlier.sent_at} s."
            )
    return CacheEconomy(
        view=view,
        turns=len(turns),
        tokenizer=tokenizer,
        providers={p: _replay(p, turns, count_tokens, settings) for p in settings.providers},
    )


def paced(count: int, think_seconds: float) -> list[float]:
    """Send times of `count` turns a fixed `think_seconds` apart, the first at 0."""
    if think_seconds < 0:
        raise CacheReportError(f"think time must be >= 0 seconds, got {think_seconds}.")
    return [n * think_seconds for n in range(count)]
