"""Usage by kind and its cost (contextproto.usage, contract §8): worked by hand, no database."""

from __future__ import annotations

from decimal import Decimal

import pytest

from contextproto.protocol.catalog import JSON_INTEGER_MAX
from contextproto.usage import (
    PRICE_MAX,
    TokenUsage,
    prices_problems,
    report_problems,
    tokens_of,
    turn_cost,
    usage_to_wire,
)

# Anthropic-like prices per million tokens: reads 0.1x, 5-minute writes 1.25x.
PRICES = {"input": 3, "cacheRead": 0.3, "cacheWrite": 3.75, "output": 15}


def test_the_cost_follows_the_spec_formula_exactly():
    tokens = TokenUsage(
        input_tokens=10_000,
        output_tokens=500,
        cache_read_input_tokens=7_000,
        cache_write_input_tokens=2_000,
    )
    # ((10000 - 7000 - 2000) x 3 + 7000 x 0.3 + 2000 x 3.75 + 500 x 15) / 1e6
    #  = (3000 + 2100 + 7500 + 7500) / 1e6
    assert turn_cost(tokens, PRICES) == Decimal("0.0201")
    assert tokens.uncached_input_tokens == 1_000


def test_float_prices_are_read_as_the_decimals_they_spell():
    # 0.1 + 0.2 as binary floats is 0.30000000000000004; the cost must not inherit that.
    prices = {"input": 0.1, "cacheRead": 0.2, "cacheWrite": 0, "output": 0}
    tokens = TokenUsage(input_tokens=2_000_000, output_tokens=0, cache_read_input_tokens=1_000_000)
    assert turn_cost(tokens, prices) == Decimal("0.3")


def test_no_or_unusable_prices_give_no_cost():
    tokens = TokenUsage(input_tokens=10, output_tokens=1)
    assert turn_cost(tokens, None) is None
    assert turn_cost(tokens, {"input": 3, "output": 15}) is None  # published before the check


def test_the_largest_counts_at_the_highest_price_fit_the_cost_column():
    tokens = TokenUsage(input_tokens=JSON_INTEGER_MAX, output_tokens=JSON_INTEGER_MAX)
    top = {key: PRICE_MAX for key in PRICES}
    cost = turn_cost(tokens, top)
    digits = len(cost.as_tuple().digits)
    assert cost == Decimal(2 * JSON_INTEGER_MAX) * PRICE_MAX / 1_000_000
    assert digits <= 32 and -cost.as_tuple().exponent == 12  # DecimalField(32, 12)


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"inputTokens": 100, "outputTokens": 5}, TokenUsage(100, 5)),
        ({"inputTokens": 100, "outputTokens": 5, "cachedInputTokens": 60}, TokenUsage(100, 5, 60)),
        (
            {"inputTokens": 100, "cacheReadInputTokens": 60, "cacheWriteInputTokens": 30},
            TokenUsage(100, 0, 60, 30),
        ),
        # A provider that reports more cached than prompt tokens: cut to fit, never negative.
        ({"inputTokens": 100, "cacheReadInputTokens": 150}, TokenUsage(100, 0, 100, 0)),
        (
            {"inputTokens": 100, "cacheReadInputTokens": 80, "cacheWriteInputTokens": 50},
            TokenUsage(100, 0, 80, 20),
        ),
        ({"inputTokens": 12.0, "outputTokens": True}, TokenUsage(12, 0)),
        ({"outputTokens": 5}, None),
        (None, None),
    ],
)
def test_stored_usage_reads_as_tokens_by_kind(usage, expected):
    assert tokens_of(usage) == expected


@pytest.mark.parametrize(
    ("report", "field"),
    [
        ({"inputTokens": 10, "outputTokens": 1}, None),
        ({"inputTokens": 10, "outputTokens": 1, "cacheReadInputTokens": 10}, None),
        (
            {
                "inputTokens": 10,
                "outputTokens": 1,
                "cachedInputTokens": 4,
                "cacheReadInputTokens": 4,
            },
            None,
        ),
        (
            {"inputTokens": 10, "outputTokens": 1, "cacheReadInputTokens": 11},
            "cacheReadInputTokens",
        ),
        ({"inputTokens": 10, "outputTokens": 1, "cachedInputTokens": 11}, "cachedInputTokens"),
        (
            {
                "inputTokens": 10,
                "outputTokens": 1,
                "cacheReadInputTokens": 5,
                "cacheWriteInputTokens": 6,
            },
            "cacheWriteInputTokens",
        ),
        (
            {
                "inputTokens": 10,
                "outputTokens": 1,
                "cachedInputTokens": 4,
                "cacheReadInputTokens": 5,
            },
            "cachedInputTokens",
        ),
    ],
)
def test_report_problems_name_the_field_to_fix(report, field):
    problems = report_problems(report)
    assert [p["field"] for p in problems] == ([field] if field else [])


def test_prices_problems_accept_null_and_a_complete_list():
    assert prices_problems(None) == []
    assert prices_problems(PRICES) == []
    assert prices_problems({**PRICES, "input": PRICE_MAX}) == []
    assert [p["code"] for p in prices_problems("3")] == ["prices_not_object"]
    assert [p["field"] for p in prices_problems({**PRICES, "input": float("nan")})] == [
        "model.prices.input"
    ]


def test_the_wire_shape_of_totals():
    wire = usage_to_wire(TokenUsage(10, 2, 4, 1), Decimal("0.000123"), 3)
    assert wire == {
        "inputTokens": 10,
        "cacheReadInputTokens": 4,
        "cacheWriteInputTokens": 1,
        "outputTokens": 2,
        "cost": 0.000123,
        "turns": 3,
    }
    assert usage_to_wire(TokenUsage(0, 0), None, 0)["cost"] is None
