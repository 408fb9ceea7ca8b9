"""What simulated turns cost: sums, the hit ratio and contract §8's cost formula.

Prices are per million tokens; `RELATIVE_PRICES` are relative units of the input price
(cache reads 0.1x, 5-minute writes 1.25x, 1-hour writes 2x).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contextproto.economics.cache_sim import TurnCache


@dataclass(frozen=True)
class Prices:
    """Prices per million tokens. The defaults are relative units of the input price.

    `cache_write` is the 5-minute write price, `cache_write_1h` the 1-hour one. Output is not
    simulated; give `output` a price only with the output tokens.
    """

    input: float = 1.0
    cache_read: float = 0.1
    cache_write: float = 1.25
    cache_write_1h: float = 2.0
    output: float = 0.0

    @classmethod
    def from_wire(cls, prices: Mapping[str, Any]) -> Prices:
        """From `model.prices` (contract §8: input, cacheRead, cacheWrite, output).

        Without `cacheWrite1h`, a 1-hour write costs 2x input (Anthropic's multiplier).
        """
        base = float(prices["input"])
        return cls(
            input=base,
            cache_read=float(prices["cacheRead"]),
            cache_write=float(prices["cacheWrite"]),
            cache_write_1h=float(prices.get("cacheWrite1h", 2.0 * base)),
            output=float(prices.get("output", 0.0)),
        )


RELATIVE_PRICES = Prices()


@dataclass(frozen=True)
class CacheTotals:
    """Sums over simulated turns."""

    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0
    uncached_tokens: int = 0


def totals(results: Sequence[TurnCache]) -> CacheTotals:
    """Add up `results`."""
    return CacheTotals(
        input_tokens=sum(r.input_tokens for r in results),
        cache_read_tokens=sum(r.cache_read_tokens for r in results),
        cache_write_tokens=sum(r.cache_write_tokens for r in results),
        cache_write_1h_tokens=sum(r.cache_write_1h_tokens for r in results),
        uncached_tokens=sum(r.uncached_tokens for r in results),
    )


def cache_hit_ratio(results: Sequence[TurnCache]) -> float:
    """Cache-read tokens / input tokens over `results` (0.0 without input)."""
    summed = totals(results)
    return summed.cache_read_tokens / summed.input_tokens if summed.input_tokens else 0.0


def effective_cost(
    results: Sequence[TurnCache], prices: Prices = RELATIVE_PRICES, *, output_tokens: int = 0
) -> float:
    """contract §8's cost of `results`, with 1-hour writes at their own price.

    ((input - read - write) x input + read x cacheRead + 5m writes x cacheWrite
    + 1h writes x cacheWrite1h + output x output) / 1,000,000.
    """
    s = totals(results)
    uncached = s.input_tokens - s.cache_read_tokens - s.cache_write_tokens
    short_writes = s.cache_write_tokens - s.cache_write_1h_tokens
    return (
        uncached * prices.input
        + s.cache_read_tokens * prices.cache_read
        + short_writes * prices.cache_write
        + s.cache_write_1h_tokens * prices.cache_write_1h
        + output_tokens * prices.output
    ) / 1_000_000
