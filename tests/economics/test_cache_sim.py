"""The prompt-cache simulator against small cases worked by hand from the providers' docs.

Token counting in these tests: one token per "§" in a block's JSON, nothing else (keys,
roles and other text are free). `_t(n)` is a text of n tokens; a tag letter makes two texts
of the same size differ. Each case writes out the blocks in prefix order, the cumulative
counts and what the rule gives.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextproto.economics.cache_sim import (
    ANTHROPIC_MIN_CACHEABLE_TOKENS,
    RULE_ANTHROPIC_BELOW_MINIMUM,
    RULE_ANTHROPIC_NO_BREAKPOINT,
    RULE_ANTHROPIC_READ,
    RULE_ANTHROPIC_READ_WRITE,
    RULE_ANTHROPIC_WRITE,
    RULE_OPENAI_BELOW_MINIMUM,
    RULE_OPENAI_HIT,
    RULE_OPENAI_MISS,
    CacheSimulator,
    Turn,
    TurnCache,
    anthropic_min_cacheable_tokens,
    simulate,
)
from contextproto.economics.linearise import CacheSimError, first_divergence, linearise
from contextproto.economics.prices import Prices, cache_hit_ratio, effective_cost, totals

OPENAI = "openai-chat"
ANTHROPIC = "anthropic-messages"
SONNET = "claude-sonnet-4-5"  # minimum cacheable prefix 1024
EPHEMERAL = {"type": "ephemeral"}
ONE_HOUR = {"type": "ephemeral", "ttl": "1h"}


def count(text: str) -> int:
    return text.count("§")


def _t(n: int, tag: str = "") -> str:
    return tag + "§" * n


def _sim() -> CacheSimulator:
    return CacheSimulator(count)


def _figures(result: TurnCache) -> tuple[int, int, int, int]:
    """(input, read, write, uncached)."""
    return (
        result.input_tokens,
        result.cache_read_tokens,
        result.cache_write_tokens,
        result.uncached_tokens,
    )


# --------------------------------------------------------------------------- OpenAI


def _oa(*sizes: int, key: str | None = None, **extra) -> dict:
    """An openai-chat body: a system message of sizes[0] tokens, then alternating turns."""
    messages = [{"role": "system", "content": _t(sizes[0], "s")}]
    for i, n in enumerate(sizes[1:]):
        messages.append({"role": ("user", "assistant")[i % 2], "content": _t(n, f"m{i}")})
    body: dict = {"messages": messages, **extra}
    if key is not None:
        body["prompt_cache_key"] = key
    return body


def _oa_turn(body: dict, at: float, model: str = "gpt-4o") -> Turn:
    return Turn(provider=OPENAI, body=body, sent_at=at, model=model)


def test_openai_caches_nothing_below_1024_tokens_then_counts_in_128_token_steps():
    sim = _sim()
    # 1. [system 1000, user 20] = 1020 tokens: the prompt is below 1024, nothing is cached.
    first = sim.replay(_oa_turn(_oa(1000, 20), 0))
    assert _figures(first) == (1020, 0, 0, 1020)
    assert first.rule == RULE_OPENAI_BELOW_MINIMUM
    # 2. + assistant 100 = 1120 tokens; shares the 1020 of request 1: below 1024, a miss.
    second = sim.replay(_oa_turn(_oa(1000, 20, 100), 1))
    assert _figures(second) == (1120, 0, 0, 1120)
    assert second.rule == RULE_OPENAI_MISS
    # 3. + user 31 = 1151; shares 1120 with request 2 -> floor(1120 / 128) * 128 = 1024.
    third = sim.replay(_oa_turn(_oa(1000, 20, 100, 31), 2))
    assert _figures(third) == (1151, 1024, 0, 127)
    assert third.rule == RULE_OPENAI_HIT
    # 4. + assistant 1 = 1152; shares 1151 -> still 1024 (1151 = 8 x 128 + 127).
    fourth = sim.replay(_oa_turn(_oa(1000, 20, 100, 31, 1), 3))
    assert fourth.cache_read_tokens == 1024
    # 5. + user 200 = 1352; shares 1152 = 9 x 128 -> 1152 exactly.
    fifth = sim.replay(_oa_turn(_oa(1000, 20, 100, 31, 1, 200), 4))
    assert _figures(fifth) == (1352, 1152, 0, 200)


def test_openai_requests_with_different_prompt_cache_keys_do_not_share():
    sim = _sim()
    # 2000-token system + 10-token user, sent under key "a": nothing earlier, a miss.
    assert sim.replay(_oa_turn(_oa(2000, 10, key="a"), 0)).cache_read_tokens == 0
    # The same prompt under key "b": a different cache, still a miss.
    assert sim.replay(_oa_turn(_oa(2000, 10, key="b"), 1)).cache_read_tokens == 0
    # Without a key: shares neither "a" nor "b".
    assert sim.replay(_oa_turn(_oa(2000, 10), 2)).cache_read_tokens == 0
    # Key "a" again, one message appended: shares 2010 -> floor(2010 / 128) * 128 = 1920.
    again = sim.replay(_oa_turn(_oa(2000, 10, 5, key="a"), 3))
    assert again.cache_read_tokens == 1920
    # Another model never shares a cache, whatever the key.
    other = sim.replay(_oa_turn(_oa(2000, 10, 5, key="a"), 4, model="gpt-4.1"))
    assert other.cache_read_tokens == 0


def test_openai_retention_runs_from_the_last_use_and_24h_keeps_longer():
    sim = _sim()  # in-memory retention: 300 s after the last use
    body = _oa(2000, 10)  # 2010 tokens -> 1920 when cached
    assert sim.replay(_oa_turn(body, 0)).cache_read_tokens == 0
    # t=299: within 300 s of t=0: a hit, which refreshes the prefix until 599.
    assert sim.replay(_oa_turn(body, 299)).cache_read_tokens == 1920
    # t=598: 299 s after the last use: still a hit (300 s after the write, it would be gone).
    assert sim.replay(_oa_turn(body, 598)).cache_read_tokens == 1920
    # t=898: 300 s after the last use: expired, a miss.
    assert sim.replay(_oa_turn(body, 898)).cache_read_tokens == 0

    extended = _sim()
    long_body = _oa(2000, 10, prompt_cache_retention="24h")
    assert extended.replay(_oa_turn(long_body, 0)).cache_read_tokens == 0
    # One hour later: kept by the 24 h retention.
    assert extended.replay(_oa_turn(long_body, 3600)).cache_read_tokens == 1920


def test_openai_a_short_retention_request_does_not_shorten_a_24h_prefix():
    sim = _sim()
    # t=0: [system 2000, user 10, assistant 500] under 24 h retention.
    long_body = _oa(2000, 10, 500, prompt_cache_retention="24h")
    sim.replay(_oa_turn(long_body, 0))
    # t=10: its first two messages alone, in-memory retention (hit: 2010 -> 1920).
    assert sim.replay(_oa_turn(_oa(2000, 10), 10)).cache_read_tokens == 1920
    # t=1000: the 24 h request again: its whole 2510 tokens are still cached -> 2432.
    assert sim.replay(_oa_turn(long_body, 1000)).cache_read_tokens == 2432


def test_openai_tools_come_first_so_a_changed_tool_rebills_everything():
    tool = {"type": "function", "function": {"name": "search", "description": _t(10, "d")}}
    changed = {"type": "function", "function": {"name": "search", "description": _t(10, "D")}}
    sim = _sim()
    sim.replay(_oa_turn({**_oa(2000, 10), "tools": [tool]}, 0))
    # [tool 10, system 2000, user 10]: the tool differs, so no prefix is shared at all.
    result = sim.replay(_oa_turn({**_oa(2000, 10), "tools": [changed]}, 1))
    assert _figures(result) == (2020, 0, 0, 2020)


# --------------------------------------------------------------------------- Anthropic


def _text(n: int, tag: str = "", marker: dict | None = None) -> dict:
    block: dict = {"type": "text", "text": _t(n, tag)}
    if marker is not None:
        block["cache_control"] = marker
    return block


def _an(system: list[dict], *messages: tuple[str, list[dict]], **extra) -> dict:
    return {
        "system": system,
        "messages": [{"role": role, "content": content} for role, content in messages],
        **extra,
    }


def _an_turn(body: dict, at: float, model: str | None = SONNET, minimum: int | None = None):
    return Turn(
        provider=ANTHROPIC, body=body, sent_at=at, model=model, min_cacheable_tokens=minimum
    )


def test_anthropic_writes_at_a_breakpoint_and_the_next_turn_reads_it():
    sim = _sim()
    system = [_text(2000, "S", EPHEMERAL)]
    # Turn 1: [system 2000 (marker), user 50]: no entry yet; the breakpoint's prefix (2000)
    # is written (1.25x), the user message is uncached.
    first = sim.replay(_an_turn(_an(system, ("user", [_text(50, "u")])), 0))
    assert _figures(first) == (2050, 0, 2000, 50)
    assert first.rule == RULE_ANTHROPIC_WRITE
    # Turn 2, 10 s later: same system, 3 messages of 50 + 30 + 40: the entry at the system
    # block is read; nothing new is written (the only breakpoint is already cached).
    second = sim.replay(
        _an_turn(
            _an(
                system,
                ("user", [_text(50, "u")]),
                ("assistant", [_text(30, "a")]),
                ("user", [_text(40, "v")]),
            ),
            10,
        )
    )
    assert _figures(second) == (2120, 2000, 0, 120)
    assert second.rule == RULE_ANTHROPIC_READ


def test_anthropic_sliding_breakpoint_reads_the_previous_entry_and_writes_the_rest():
    sim = _sim()
    system = [_text(2000, "S")]
    # Turn 1: blocks [system 2000, user 50 (marker)]: writes 2050 through the user block.
    sim.replay(_an_turn(_an(system, ("user", [_text(50, "u", EPHEMERAL)])), 0))
    # Turn 2: [system, user 50, assistant 30, user 40 (marker)]: breakpoint at block 3; the
    # lookback finds turn 1's entry at block 1 (2 blocks back): read 2050, write 2120 - 2050.
    second = sim.replay(
        _an_turn(
            _an(
                system,
                ("user", [_text(50, "u")]),
                ("assistant", [_text(30, "a")]),
                ("user", [_text(40, "v", EPHEMERAL)]),
            ),
            5,
        )
    )
    assert _figures(second) == (2120, 2050, 70, 0)
    assert second.rule == RULE_ANTHROPIC_READ_WRITE
    assert "lookback 2" in second.detail


def _lookback_case(appended: int) -> TurnCache:
    """Turn 2's result when `appended` one-token blocks follow turn 1's breakpoint."""
    sim = _sim()
    system = [_text(2000, "S")]
    # Turn 1: [system 2000, user block 10 (marker)]: entry at block 1 (2010 tokens).
    sim.replay(_an_turn(_an(system, ("user", [_text(10, "u", EPHEMERAL)])), 0))
    # Turn 2: the same user message with `appended` more blocks of 1 token, the last one
    # marked: the breakpoint is at block 1 + appended.
    blocks = [_text(10, "u")] + [_text(1, f"b{i}") for i in range(appended)]
    blocks[-1]["cache_control"] = EPHEMERAL
    return sim.replay(_an_turn(_an(system, ("user", blocks)), 1))


def test_anthropic_lookback_reads_an_entry_20_blocks_back_but_not_21():
    # 20 blocks appended: the entry at block 1 is exactly 20 blocks before the breakpoint
    # (block 21): read 2010, write the 20 new tokens.
    within = _lookback_case(20)
    assert _figures(within) == (2030, 2010, 20, 0)
    # 21 blocks appended: the entry is 21 blocks back, outside the window: a miss, and the
    # whole prefix (2031) is written again.
    beyond = _lookback_case(21)
    assert _figures(beyond) == (2031, 0, 2031, 0)


def test_anthropic_minimum_cacheable_length_depends_on_the_model():
    def run(model: str | None, minimum: int | None = None) -> tuple[TurnCache, TurnCache]:
        sim = _sim()
        # [system 1500 (marker), user 10], sent twice.
        body = _an([_text(1500, "S", EPHEMERAL)], ("user", [_text(10, "u")]))
        return sim.replay(_an_turn(body, 0, model, minimum)), sim.replay(
            _an_turn(body, 1, model, minimum)
        )

    # Sonnet 4.5: minimum 1024 <= 1500: written, then read.
    first, second = run("claude-sonnet-4-5-20250929")
    assert (first.cache_write_tokens, second.cache_read_tokens) == (1500, 1500)
    # Opus 4.6 (4096) and Haiku 3 (2048): 1500 is too short, neither written nor read.
    for model in ("claude-opus-4-6", "claude-3-haiku-20240307"):
        first, second = run(model)
        assert _figures(first) == (1510, 0, 0, 1510)
        assert _figures(second) == (1510, 0, 0, 1510)
        assert second.rule == RULE_ANTHROPIC_BELOW_MINIMUM
    # An override wins over the model's figure.
    first, second = run("claude-opus-4-6", minimum=1024)
    assert second.cache_read_tokens == 1500


def test_anthropic_model_table_ignores_dates_and_platform_prefixes():
    assert anthropic_min_cacheable_tokens("claude-opus-4-5-20251101")[0] == 4096
    assert anthropic_min_cacheable_tokens("us.anthropic.claude-3-5-haiku-20241022-v1:0")[0] == (
        2048
    )
    assert anthropic_min_cacheable_tokens("claude-opus-4@20250514")[0] == 1024
    assert anthropic_min_cacheable_tokens("claude-opus-4-1-20250805")[0] == 1024
    assert anthropic_min_cacheable_tokens("claude-opus-4-8")[0] == 1024
    assert anthropic_min_cacheable_tokens("claude-haiku-4-5")[0] == 4096
    value, source = anthropic_min_cacheable_tokens("claude-unknown-9")
    assert value == 1024 and "not in the table" in source
    assert set(ANTHROPIC_MIN_CACHEABLE_TOKENS.values()) == {512, 1024, 2048, 4096}


def test_anthropic_allows_at_most_four_breakpoints_automatic_included():
    four = [_text(1, str(i), EPHEMERAL) for i in range(4)]
    # [S 10, four blocks of 1, each marked], no minimum: all four prefixes written (14).
    result = _sim().replay(_an_turn(_an([_text(10, "S")], ("user", four)), 0, minimum=0))
    assert result.cache_write_tokens == 14
    five = [*four, _text(1, "x", EPHEMERAL)]
    with pytest.raises(CacheSimError, match="at most 4 cache breakpoints"):
        _sim().replay(_an_turn(_an([_text(10, "S")], ("user", five)), 0))
    # Four explicit markers plus automatic caching on an unmarked last block: five.
    body = _an([_text(10, "S")], ("user", [*four, _text(1, "x")]), cache_control=EPHEMERAL)
    with pytest.raises(CacheSimError, match="automatic one included"):
        _sim().replay(_an_turn(body, 0))
    # Automatic caching on a last block that is already marked is the same breakpoint.
    body = _an([_text(10, "S")], ("user", four), cache_control=EPHEMERAL)
    assert _sim().replay(_an_turn(body, 0, minimum=0)).cache_write_tokens == 14


def test_anthropic_ttl_expires_after_five_minutes_unless_a_read_refreshes_it():
    body = _an([_text(2000, "S", EPHEMERAL)], ("user", [_text(10, "u")]))
    sim = _sim()
    assert sim.replay(_an_turn(body, 0)).cache_write_tokens == 2000  # expires at 300
    # t=299: read (0.1x); the read refreshes the entry until 599.
    assert sim.replay(_an_turn(body, 299)).cache_read_tokens == 2000
    # t=598: 598 s after the write but 299 s after the read: still there, refreshed to 898.
    assert sim.replay(_an_turn(body, 598)).cache_read_tokens == 2000
    # t=898: 300 s after the last read: expired, written again.
    late = sim.replay(_an_turn(body, 898))
    assert _figures(late) == (2010, 0, 2000, 10)

    unread = _sim()
    unread.replay(_an_turn(body, 0))
    # Without a read in between, an entry written at t=0 is gone at t=300.
    assert unread.replay(_an_turn(body, 300)).cache_read_tokens == 0

    hour = _an([_text(2000, "S", ONE_HOUR)], ("user", [_text(10, "u")]))
    kept = _sim()
    kept.replay(_an_turn(hour, 0))
    # A 1h entry is still there after 50 minutes.
    assert kept.replay(_an_turn(hour, 3000)).cache_read_tokens == 2000


def test_anthropic_one_hour_writes_are_billed_at_their_own_price():
    tools = [{"name": "search", "description": _t(1000, "T"), "cache_control": ONE_HOUR}]
    body = {
        "tools": tools,
        "system": [_text(1500, "S", ONE_HOUR)],
        "messages": [{"role": "user", "content": [_text(500, "u", EPHEMERAL)]}],
    }
    # Blocks [tool 1000 (1h), system 1500 (1h), user 500 (5m)]: cumulative 1000, 2500, 3000.
    # Nothing is cached: A = 0; the last 1h breakpoint is at 2500 (B), the last one at 3000
    # (C): 1h writes B - A = 2500, 5m writes C - B = 500.
    result = _sim().replay(_an_turn(body, 0))
    assert _figures(result) == (3000, 0, 3000, 0)
    assert result.cache_write_1h_tokens == 2500
    # Relative prices: 2500 x 2.0 + 500 x 1.25 = 5625 per million.
    assert effective_cost([result]) == pytest.approx(5625 / 1_000_000)
    # A 1h breakpoint after a 5m one is refused by the API.
    body["system"] = [_text(1500, "S", EPHEMERAL)]
    body["messages"][0]["content"] = [_text(500, "u", ONE_HOUR)]
    with pytest.raises(CacheSimError, match="longer TTLs come first"):
        _sim().replay(_an_turn(body, 0))


def _state_turn(k: int, on_state: bool) -> dict:
    """Turn k of a chat whose view ends with a derived state message that changes each turn.

    History: user 100, assistant 100, ... (2k - 1 messages), then the state message (50,
    tagged with k). The system (2000) is marked; the second marker goes on the state
    message (`on_state`) or on the last raw history block.
    """
    history = []
    for i in range(2 * k - 1):
        role = ("user", "assistant")[i % 2]
        history.append((role, [_text(100, f"h{i}")]))
    state = _text(50, f"state{k}")
    if on_state:
        state["cache_control"] = EPHEMERAL
    else:
        history[-1][1][0]["cache_control"] = EPHEMERAL
    # The state travels as its own (assistant-side) message after the history.
    return _an([_text(2000, "S", EPHEMERAL)], *history, ("assistant", [state]))


def test_a_marker_on_the_trailing_state_message_writes_entries_nobody_reads():
    trap = simulate([_an_turn(_state_turn(k, True), k) for k in (1, 2, 3)], count)
    # Turn 1: [S 2000*, h0 100, state1 50*]: writes 2150.
    # Turn 2: [S*, h0, h1, h2, state2*]: the entry through state1 is at no prefix of turn 2
    # (block 2 is now h1), so only the system entry is read: read 2000, write 2350 - 2000.
    # Turn 3: likewise: read 2000, write 2550 - 2000 = 550.
    assert [_figures(r) for r in trap] == [
        (2150, 0, 2150, 0),
        (2350, 2000, 350, 0),
        (2550, 2000, 550, 0),
    ]
    anchored = simulate([_an_turn(_state_turn(k, False), k) for k in (1, 2, 3)], count)
    # Marker on the last raw block instead: turn 1 writes 2100 (through h0), the state is
    # uncached; turn 2 reads 2100 (lookback 2 from h2) and writes h1 + h2; turn 3 reads 2300.
    assert [_figures(r) for r in anchored] == [
        (2150, 0, 2100, 50),
        (2350, 2100, 200, 50),
        (2550, 2300, 200, 50),
    ]
    assert effective_cost(anchored) < effective_cost(trap)


def test_automatic_caching_puts_the_breakpoint_on_the_last_block():
    sim = _sim()
    first = _an([_text(2000, "S")], ("user", [_text(10, "u")]), cache_control=EPHEMERAL)
    # [S 2000, u 10], breakpoint on u: writes 2010.
    assert _figures(sim.replay(_an_turn(first, 0))) == (2010, 0, 2010, 0)
    second = _an(
        [_text(2000, "S")],
        ("user", [_text(10, "u")]),
        ("assistant", [_text(5, "a")]),
        ("user", [_text(7, "v")]),
        cache_control=EPHEMERAL,
    )
    # The breakpoint moves to the last block; the lookback reads the 2010: write 12.
    assert _figures(sim.replay(_an_turn(second, 1))) == (2022, 2010, 12, 0)


def test_anthropic_without_breakpoints_caches_nothing():
    body = _an([_text(2000, "S")], ("user", [_text(10, "u")]))
    sim = _sim()
    sim.replay(_an_turn(body, 0))
    result = sim.replay(_an_turn(body, 1))
    assert _figures(result) == (2010, 0, 0, 2010)
    assert result.rule == RULE_ANTHROPIC_NO_BREAKPOINT


def test_markers_do_not_change_what_is_compared_or_counted():
    plain = _an([_text(2000, "S")], ("user", [_text(10, "u"), _text(5, "w")]))
    marked = _an(
        [_text(2000, "S", ONE_HOUR)],
        ("user", [_text(10, "u", EPHEMERAL), _text(5, "w")]),
        cache_control=EPHEMERAL,
    )
    # Counting every character: a marker would add characters if it were compared.
    a, b = linearise(ANTHROPIC, plain, len), linearise(ANTHROPIC, marked, len)
    assert a.prefixes == b.prefixes and a.cumulative == b.cumulative
    assert first_divergence(a, b).kind == "identical"
    # Turn 1 marks u; turn 2 moves the marker to w: the entry through u is read by lookback.
    sim = _sim()
    sim.replay(_an_turn(_an([_text(2000, "S")], ("user", [_text(10, "u", EPHEMERAL)])), 0))
    moved = _an([_text(2000, "S")], ("user", [_text(10, "u"), _text(5, "w", EPHEMERAL)]))
    assert _figures(sim.replay(_an_turn(moved, 1))) == (2015, 2010, 5, 0)


def test_a_string_system_prompt_or_content_is_the_same_prefix_as_one_text_block():
    as_string = {"system": _t(20, "S"), "messages": [{"role": "user", "content": _t(3, "u")}]}
    as_blocks = _an([_text(20, "S")], ("user", [_text(3, "u")]))
    a, b = linearise(ANTHROPIC, as_string, count), linearise(ANTHROPIC, as_blocks, count)
    assert a.prefixes == b.prefixes and a.total_tokens == 23


@pytest.mark.parametrize(
    ("provider", "body", "message"),
    [
        ("neutral", {}, "cannot simulate caching for provider 'neutral'"),
        (OPENAI, {"messages": {}}, "`messages` must be a list"),
        (OPENAI, {"messages": [{"content": "x"}]}, "message #0 must be an object"),
        (ANTHROPIC, {"messages": [{"role": "user", "content": 3}]}, "string or a list"),
        (ANTHROPIC, {"messages": [{"role": "user", "content": ["x"]}]}, "block #0 must be"),
        (
            ANTHROPIC,
            {"system": [{"type": "text", "text": "x", "cache_control": {"type": "forever"}}]},
            'must be {"type": "ephemeral"}',
        ),
        (
            ANTHROPIC,
            {
                "messages": [{"role": "user", "content": "x"}],
                "cache_control": {"type": "ephemeral", "ttl": "2h"},
            },
            'must be "5m" or "1h"',
        ),
        (
            ANTHROPIC,
            {
                "messages": [
                    {"role": "user", "content": "x"},
                    {
                        "role": "assistant",
                        "content": [
                            {
                                "type": "thinking",
                                "thinking": "t",
                                "signature": "s",
                                "cache_control": {"type": "ephemeral"},
                            }
                        ],
                    },
                ]
            },
            "message #1 block #0: anthropic-messages refuses cache_control on a thinking block",
        ),
    ],
)
def test_malformed_requests_are_refused_with_what_to_fix(provider, body, message):
    with pytest.raises(CacheSimError, match=message):
        _sim().replay(Turn(provider=provider, body=body, sent_at=0))


def test_turns_must_be_replayed_in_send_order():
    sim = _sim()
    sim.replay(_oa_turn(_oa(10), 5))
    with pytest.raises(CacheSimError, match="send order"):
        sim.replay(_oa_turn(_oa(10), 4))


# --------------------------------------------------------------------------- divergence


def test_first_divergence_names_the_section_message_and_block():
    tools = [{"name": "a", "description": "x"}, {"name": "b", "description": "y"}]
    base = {
        "tools": tools,
        "system": [_text(5, "S")],
        "messages": [
            {"role": "user", "content": [_text(3, "u")]},
            {"role": "assistant", "content": [_text(2, "a"), _text(2, "b")]},
        ],
    }

    def lin(body: dict):
        return linearise(ANTHROPIC, body, count)

    # Blocks: tool #0, tool #1, system #0, message #0 block #0, message #1 blocks #0, #1.
    assert first_divergence(lin(base), lin(base)).kind == "identical"
    changed_tool = {**base, "tools": [tools[0], {"name": "b", "description": "z"}]}
    d = first_divergence(lin(base), lin(changed_tool))
    assert (d.kind, d.position, d.current.describe(), d.shared_tokens) == (
        "changed",
        1,
        "tool #1",
        0,
    )
    changed_system = {**base, "system": [_text(5, "T")]}
    assert first_divergence(lin(base), lin(changed_system)).current.describe() == (
        "system block #0"
    )
    changed_block = {
        **base,
        "messages": [
            base["messages"][0],
            {"role": "assistant", "content": [_text(2, "a"), _text(2, "c")]},
        ],
    }
    d = first_divergence(lin(base), lin(changed_block))
    # Shared: tools 0 + system 5 + message #0 3 + message #1 block #0 2 = 10 tokens.
    assert (d.position, d.current.index, d.current.block, d.shared_tokens) == (5, 1, 1, 10)
    assert d.describe() == "first change at message #1 block #1 (assistant)"
    appended = {**base, "messages": [*base["messages"], {"role": "user", "content": "n"}]}
    d = first_divergence(lin(base), lin(appended))
    assert (d.kind, d.position, d.current.describe(), d.shared_tokens) == (
        "appended",
        6,
        "message #2 block #0 (user)",
        12,
    )
    d = first_divergence(lin(appended), lin(base))
    assert (d.kind, d.previous.describe()) == ("truncated", "message #2 block #0 (user)")


def test_first_divergence_on_openai_counts_whole_messages():
    before = linearise(OPENAI, _oa(100, 10, 20), count)
    after = linearise(OPENAI, _oa(100, 10, 21), count)
    d = first_divergence(before, after)
    assert (d.kind, d.current.describe(), d.shared_tokens) == (
        "changed",
        "message #2 (assistant)",
        110,
    )


# --------------------------------------------------------------------------- totals and cost


def _result(input_tokens: int, read: int, write: int, write_1h: int = 0) -> TurnCache:
    return TurnCache(input_tokens, read, write, write_1h, input_tokens - read - write, "x", "")


def test_cost_follows_the_spec_formula_with_prices_per_million():
    results = [_result(10_000, 0, 8_000), _result(12_000, 8_000, 3_000)]
    # input 22,000, read 8,000, write 11,000 -> uncached 3,000.
    summed = totals(results)
    assert (summed.input_tokens, summed.cache_read_tokens, summed.cache_write_tokens) == (
        22_000,
        8_000,
        11_000,
    )
    prices = Prices.from_wire({"input": 3, "cacheRead": 0.3, "cacheWrite": 3.75, "output": 15})
    # (3,000 x 3 + 8,000 x 0.3 + 11,000 x 3.75 + 500 x 15) / 1e6
    # = (9,000 + 2,400 + 41,250 + 7,500) / 1e6 = 0.06015.
    assert effective_cost(results, prices, output_tokens=500) == pytest.approx(0.06015)
    # Without cacheWrite1h in the wire prices, a 1h write costs 2 x input.
    assert prices.cache_write_1h == 6.0
    # Relative units (input 1, read 0.1, write 1.25): 3,000 + 800 + 13,750 = 17,550.
    assert effective_cost(results) == pytest.approx(17_550 / 1_000_000)
    # Hit ratio: cache reads / input = 8,000 / 22,000.
    assert cache_hit_ratio(results) == pytest.approx(8 / 22)
    assert cache_hit_ratio([]) == 0.0


def test_turn_results_go_on_the_wire_in_camel_case():
    wire = _result(10, 4, 3, 1).to_wire()
    assert wire == {
        "inputTokens": 10,
        "cacheReadTokens": 4,
        "cacheWriteTokens": 3,
        "cacheWrite1hTokens": 1,
        "uncachedTokens": 3,
        "rule": "x",
        "detail": "",
    }


# --------------------------------------------------------------------------- properties


@settings(max_examples=150, deadline=None)
@given(
    base=st.lists(st.integers(0, 700), min_size=1, max_size=8),
    steps=st.lists(
        st.tuples(st.lists(st.integers(0, 400), min_size=1, max_size=3), st.floats(0, 299)),
        min_size=1,
        max_size=6,
    ),
)
def test_openai_appending_never_lowers_the_cached_prefix(base, steps):
    sim = _sim()
    sizes = list(base)
    now = 0.0
    previous = sim.replay(_oa_turn(_oa(*sizes, key="k"), now))
    previous_total = previous.input_tokens
    for appended, gap in steps:
        sizes += appended
        now += gap
        current = sim.replay(_oa_turn(_oa(*sizes, key="k"), now))
        # The whole previous request is a prefix of this one and still within retention.
        assert current.cache_read_tokens >= previous.cache_read_tokens
        # ...and at least all of the previous request is credited, in 128-token steps.
        if previous_total >= 1024:
            assert current.cache_read_tokens >= previous_total // 128 * 128
        previous, previous_total = current, current.input_tokens


# --------------------------------------------------------------------------- performance


def test_replaying_300_turns_of_10k_to_30k_tokens_takes_well_under_two_seconds():
    calls: list[str] = []

    def counter(text: str) -> int:
        calls.append(text)
        return len(text) // 4

    words = "the agent reads a file and reports what it found in it " * 16  # ~880 chars
    # 45 messages of ~220 tokens (~10k), then one of ~65 tokens per turn (~30k at turn 300).
    history = [{"role": ("user", "assistant")[i % 2], "content": f"{i} {words}"} for i in range(45)]
    tools = [{"name": f"tool{i}", "description": words, "input_schema": {}} for i in range(8)]
    oa_turns, an_turns = [], []
    for turn in range(300):
        history.append(
            {"role": ("user", "assistant")[turn % 2], "content": f"t{turn} {words[:260]}"}
        )
        oa_turns.append(
            Turn(OPENAI, {"messages": list(history), "tools": tools}, turn * 20.0, "gpt-4o")
        )
        messages = [{"role": m["role"], "content": [_plain(m["content"])]} for m in history]
        messages[-1]["content"][0]["cache_control"] = EPHEMERAL
        an_turns.append(
            Turn(
                ANTHROPIC,
                {
                    "tools": tools,
                    "system": [{"type": "text", "text": words, "cache_control": EPHEMERAL}],
                    "messages": messages,
                },
                turn * 20.0,
                SONNET,
            )
        )
    for turns in (oa_turns, an_turns):
        calls.clear()
        # CPU time, not wall time: the test machines are shared.
        started = time.process_time()
        results = simulate(turns, counter)
        elapsed = time.process_time() - started
        assert 10_000 < results[0].input_tokens and results[-1].input_tokens < 35_000
        # Each distinct block is counted once, however many turns repeat it.
        assert len(calls) == len(set(calls))
        assert elapsed < 2.0, f"{turns[0].provider}: {elapsed:.2f} s"
        # An append-only conversation is almost entirely read from the cache.
        assert cache_hit_ratio(results) > 0.9


def _plain(text: str) -> dict:
    return {"type": "text", "text": text}
