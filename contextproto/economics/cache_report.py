"""Cache economy: what a sequence of views costs once the provider caches, and why it breaks.

Given a session's turns as projections (messages + sources, the tools, a send time), it
rebuilds each turn's request for `openai-chat` and `anthropic-messages` with prompt caching
on (the adapters as they run, `PromptCache` auto / 5m and the session's cache key), replays
them through the prompt-cache simulator (`cache_sim.py`) and returns per turn and in total:
input, cache-read, cache-write and uncached tokens, the hit ratio (cache-read / input) and
the effective cost under each provider's rules.

For each pair of consecutive turns it names the cause of a cache break and the tokens the
break re-billed (`causes.py`).

The baseline, a naive append-only agent's view (`stored_views.full_history_projection`:
the system prompt, then every raw message up to the turn's bound), goes through the same
adapters and simulator: its last raw block carries the sliding breakpoint.

Pure: no Django, no settings. Every token figure is an estimate of the injected counter
(reports pass `contextproto.tokens.count_tokens` and print its label).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, TypedDict

from contextproto.economics.cache_sim import CacheSimulator, Turn, TurnCache, TurnCacheWire
from contextproto.economics.causes import (
    CAUSE_APPEND,
    CAUSES,
    block_owners,
    classify,
    rebilled_tokens,
)
from contextproto.economics.inputs import (
    DEFAULT_MODELS,
    RELATIVE_PRICES,
    CacheReportError,
    EconomySettings,
    ViewTurn,
    request_body,
)
from contextproto.economics.linearise import (
    SIMULATED_PROVIDERS,
    Linearised,
    TokenCounter,
    first_divergence,
)
from contextproto.economics.prices import (
    CacheTotals,
    Prices,
    cache_hit_ratio,
    effective_cost,
    totals,
)

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
    turn); None on the first turn. `cost` follows contract §8's formula with the report's prices
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
        """contract §8's cost of every turn with the report's prices."""
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


# --------------------------------------------------------------------------- replay


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
            found = block_owners(provider, turn, settings)
            # Same structure or no trace: a mismatch leaves the pair to CAUSE_HISTORY.
            owners[at] = found if len(found) == len(request.blocks) else []
        traced = owners[at]
        return traced[block] if block < len(traced) else None

    for number, turn in enumerate(turns, start=1):
        body = request_body(provider, turn, settings)
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
            rebilled = 0 if cause == CAUSE_APPEND else rebilled_tokens(before, request, at)
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
