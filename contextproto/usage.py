"""Token usage by kind and its cost (contract §8): plain Python, no Django.

Sits beside contextproto.errors at the bottom of the layers (docs/architecture.md), so the
publish check (agents.services), the usage services and the admin share one reading of a
report, one price check and one cost formula.

Conventions: `input_tokens` counts every input token of the request, cache reads and writes
included (OpenAI's convention; Anthropic's three input counts are added up by its provider).
Prices are currency units per million tokens; the currency is whatever the operator priced
in, the same for every field of one version.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, localcontext
from typing import Any, TypedDict

PRICE_KEYS = ("input", "cacheRead", "cacheWrite", "output")
# Currency units per million tokens. The ceiling keeps every turn's cost inside its column
# (JSON-safe token counts * this / 1e6 stays below 10^19) and leaves room for currencies
# with small units.
PRICE_MAX = 1_000_000_000
MILLION = Decimal(1_000_000)
COST_DECIMAL_PLACES = 12
COST_QUANTUM = Decimal(1).scaleb(-COST_DECIMAL_PLACES)

# Report fields (wire names); `cachedInputTokens` is the older spelling of cache reads.
INPUT = "inputTokens"
OUTPUT = "outputTokens"
CACHE_READ = "cacheReadInputTokens"
CACHE_READ_ALIAS = "cachedInputTokens"
CACHE_WRITE = "cacheWriteInputTokens"


class Problem(TypedDict):
    field: str
    code: str
    message: str


class UsageWire(TypedDict):
    inputTokens: int
    cacheReadInputTokens: int
    cacheWriteInputTokens: int
    outputTokens: int
    cost: float | None
    turns: int


class SessionUsageWire(UsageWire):
    """A session's usage: its turns, and apart its side requests (contract §19.1)."""

    sideUsage: UsageWire


@dataclass(frozen=True)
class TokenUsage:
    """One turn's (or a sum of turns') tokens by kind; cache counts are part of the input."""

    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int = 0
    cache_write_input_tokens: int = 0

    @property
    def uncached_input_tokens(self) -> int:
        return self.input_tokens - self.cache_read_input_tokens - self.cache_write_input_tokens


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return max(int(value), 0)


def cache_read_of(report: Mapping[str, Any]) -> Any:
    """The cache-read count of a report under either spelling (None when absent)."""
    value = report.get(CACHE_READ)
    return report.get(CACHE_READ_ALIAS) if value is None else value


def report_problems(report: Mapping[str, int]) -> list[Problem]:
    """What is inconsistent in a report whose fields are each integers >= 0.

    Both spellings of cache reads with different values, and cache tokens that do not fit
    inside `inputTokens` (which counts them), are refused naming the field to fix.
    """
    problems: list[Problem] = []
    read, alias = report.get(CACHE_READ), report.get(CACHE_READ_ALIAS)
    if read is not None and alias is not None and read != alias:
        problems.append(
            {
                "field": CACHE_READ_ALIAS,
                "code": "usage_alias_conflict",
                "message": f"{CACHE_READ_ALIAS} ({alias}) is another name for {CACHE_READ} "
                f"({read}); send one of them, or both with the same value.",
            }
        )
        return problems
    total = report.get(INPUT, 0)
    read = cache_read_of(report) or 0
    write = report.get(CACHE_WRITE) or 0
    read_field = CACHE_READ if report.get(CACHE_READ) is not None else CACHE_READ_ALIAS
    if read > total:
        problems.append(
            {
                "field": read_field,
                "code": "usage_cache_above_input",
                "message": f"{read_field} ({read}) is above {INPUT} ({total}); {INPUT} counts "
                "every input token, cache reads and writes included.",
            }
        )
    elif read + write > total:
        problems.append(
            {
                "field": CACHE_WRITE,
                "code": "usage_cache_above_input",
                "message": f"{CACHE_WRITE} ({write}) plus cache reads ({read}) is above "
                f"{INPUT} ({total}); {INPUT} counts every input token, cache reads and "
                "writes included.",
            }
        )
    return problems


def tokens_of(usage: Mapping[str, Any] | None) -> TokenUsage | None:
    """The tokens by kind of a stored or reported usage dict; None without input tokens.

    Lenient, for what a provider said: missing counts are 0, and cache counts are cut to
    fit inside the input (a checked report never needs that).
    """
    if not isinstance(usage, Mapping):
        return None
    total = _count(usage.get(INPUT))
    if total is None:
        return None
    read = min(_count(cache_read_of(usage)) or 0, total)
    write = min(_count(usage.get(CACHE_WRITE)) or 0, total - read)
    return TokenUsage(
        input_tokens=total,
        output_tokens=_count(usage.get(OUTPUT)) or 0,
        cache_read_input_tokens=read,
        cache_write_input_tokens=write,
    )


def prices_problems(prices: Any, field: str = "model.prices") -> list[Problem]:
    """Why `prices` is not a usable price list; [] for null (no prices) or a valid one.

    A price list names all four prices (input, cacheRead, cacheWrite, output), each a
    number from 0 to PRICE_MAX currency units per million tokens: a missing one would make
    every cost silently wrong.
    """
    if prices is None:
        return []
    if not isinstance(prices, Mapping):
        return [
            {
                "field": field,
                "code": "prices_not_object",
                "message": f"{field} must be an object {{input, cacheRead, cacheWrite, "
                "output} of prices per million tokens, or null.",
            }
        ]
    problems: list[Problem] = []
    for key in sorted(set(prices) - set(PRICE_KEYS)):
        problems.append(
            {
                "field": f"{field}.{key}",
                "code": "price_unknown",
                "message": f"{field} has no price {key!r}; the prices are {', '.join(PRICE_KEYS)}.",
            }
        )
    for key in PRICE_KEYS:
        name = f"{field}.{key}"
        if key not in prices:
            problems.append(
                {
                    "field": name,
                    "code": "price_required",
                    "message": f"{name} is required when prices are given (per million "
                    "tokens; 0 if it is free).",
                }
            )
            continue
        value = prices[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            problems.append(
                {
                    "field": name,
                    "code": "price_wrong_type",
                    "message": f"{name} must be a number (per million tokens), "
                    f"not {type(value).__name__}.",
                }
            )
        elif not (math.isfinite(value) and 0 <= value <= PRICE_MAX):
            problems.append(
                {
                    "field": name,
                    "code": "price_out_of_range",
                    "message": f"{name} must be between 0 and {PRICE_MAX:,} per million "
                    f"tokens, got {value}.",
                }
            )
    return problems


def turn_cost(tokens: TokenUsage, prices: Mapping[str, Any] | None) -> Decimal | None:
    """contract §8's cost of `tokens` at `prices`, to 12 decimal places; None without prices.

    ((input - cacheRead - cacheWrite) * input + cacheRead * cacheRead + cacheWrite *
    cacheWrite + output * output) / 1,000,000. Unusable prices (a version published before
    prices were checked) count as none rather than as a wrong cost.
    """
    if prices is None or prices_problems(prices):
        return None
    price = {key: Decimal(str(prices[key])) for key in PRICE_KEYS}
    with localcontext() as context:
        context.prec = 60  # exact for any count and price the checks let through
        total = (
            tokens.uncached_input_tokens * price["input"]
            + tokens.cache_read_input_tokens * price["cacheRead"]
            + tokens.cache_write_input_tokens * price["cacheWrite"]
            + tokens.output_tokens * price["output"]
        )
        return (total / MILLION).quantize(COST_QUANTUM)


def usage_to_wire(tokens: TokenUsage, cost: Decimal | None, turns: int) -> UsageWire:
    """The `usage` object of the API: summed tokens by kind, cost (null: no prices), turns."""
    return {
        "inputTokens": tokens.input_tokens,
        "cacheReadInputTokens": tokens.cache_read_input_tokens,
        "cacheWriteInputTokens": tokens.cache_write_input_tokens,
        "outputTokens": tokens.output_tokens,
        "cost": float(cost) if cost is not None else None,
        "turns": turns,
    }
