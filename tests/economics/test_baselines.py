"""The providers' own strategies as pure functions, on cases worked by hand from their docs.

Anthropic `clear_tool_uses_20250919` (context editing) and `compact_20260112` (compaction),
the OpenAI Agents SDK's `ToolOutputTrimmer`: which tool results are cleared or trimmed at
which turn, what stays, and what each costs the view. Tokens here: one per character of a
message's content (arguments included), so every figure can be checked by eye.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from contextproto.economics.baselines import (
    CLEARED_PLACEHOLDER,
    ClearToolUses,
    Compaction,
    ToolOutputTrimmer,
    clear_tool_uses,
    compaction_turns,
    summary_message,
    tool_uses,
    trim_tool_outputs,
    trimmed_output,
)
from contextproto.economics.cache_report import cache_economy
from contextproto.economics.inputs import EconomySettings, ViewTurn
from contextproto.economics.stored_views import full_history_projections
from contextproto.economics.strategies import SUMMARY_REQUEST, Strategy, strategy_turns
from contextproto.protocol.messages import ModelMessage, RawMessage


def system() -> ModelMessage:
    return ModelMessage(role="system", kind="system", content="S" * 10)


def user(text: str) -> ModelMessage:
    return ModelMessage(role="user", kind="input", content=text)


def call(n: int, tool: str = "search", arguments: dict[str, object] | None = None) -> ModelMessage:
    return ModelMessage(
        role="assistant",
        kind="tool_call",
        content="",
        tool_call_id=f"c{n}",
        tool_name=tool,
        arguments={"q": n} if arguments is None else arguments,
    )


def result(n: int, size: int, tool: str = "search") -> ModelMessage:
    return ModelMessage(
        role="tool",
        kind="tool_result",
        content="r" * size,
        tool_call_id=f"c{n}",
        tool_name=tool,
    )


def tokens(message: ModelMessage) -> int:
    content = message.content if isinstance(message.content, str) else json.dumps(message.content)
    return len(content) + len(json.dumps(message.arguments or {})) - 2


def total(messages: Sequence[ModelMessage]) -> int:
    return sum(tokens(m) for m in messages)


def agent(uses: int, size: int = 1000, tools: Sequence[str] = ()) -> list[ModelMessage]:
    """system, a user input, then `uses` tool uses of `size`-token results."""
    out = [system(), user("do it")]
    for n in range(1, uses + 1):
        tool = tools[n - 1] if tools else "search"
        out += [call(n, tool), result(n, size, tool)]
    return out


def cleared(messages: Sequence[ModelMessage]) -> list[str]:
    return [m.tool_call_id or "" for m in messages if m.content == CLEARED_PLACEHOLDER]


# --------------------------------------------------------------------------- clear_tool_uses


def test_below_the_trigger_nothing_is_cleared() -> None:
    view = agent(5)
    edited = clear_tool_uses(view, prompt_tokens=100_000, count=tokens)
    assert edited.messages == tuple(view) and edited.cleared == () and edited.cleared_tokens == 0


def test_over_the_default_trigger_all_but_the_newest_three_tool_uses_are_cleared() -> None:
    # The docs' defaults: trigger 100,000 input tokens, keep 3 tool uses.
    view = agent(5)
    edited = clear_tool_uses(view, prompt_tokens=100_001, count=tokens)
    assert cleared(edited.messages) == ["c1", "c2"]
    # The calls stay (clear_tool_inputs defaults to false), each result becomes the placeholder.
    assert [m.arguments for m in edited.messages if m.kind == "tool_call"] == [
        {"q": n} for n in range(1, 6)
    ]
    assert edited.cleared == (3, 5)
    assert edited.cleared_tokens == 2 * (1000 - len(CLEARED_PLACEHOLDER))


def test_every_request_over_the_trigger_is_edited_again_one_more_use_each_turn() -> None:
    # Stateless: the client sends the full history; the next turn's newest result pushes
    # c3 out of the kept three, so the cached prefix changes at c3's result.
    first = clear_tool_uses(agent(5), prompt_tokens=120_000, count=tokens)
    second = clear_tool_uses(agent(6), prompt_tokens=121_000, count=tokens)
    assert cleared(first.messages) == ["c1", "c2"]
    assert cleared(second.messages) == ["c1", "c2", "c3"]
    assert second.messages[:6] == first.messages[:6]
    assert second.messages[7] != first.messages[7]


def test_clear_at_least_withholds_an_edit_that_frees_too_little() -> None:
    view = agent(5)
    config = ClearToolUses(clear_at_least=5_000)
    assert clear_tool_uses(view, prompt_tokens=150_000, count=tokens, config=config).cleared == ()
    enough = ClearToolUses(clear_at_least=1_900)
    assert cleared(
        clear_tool_uses(view, prompt_tokens=150_000, count=tokens, config=enough).messages
    ) == ["c1", "c2"]


def test_excluded_tools_keep_their_results_and_do_not_count_as_cleared() -> None:
    # The docs' example excludes web_search.
    view = agent(5, tools=["web_search", "editor", "web_search", "editor", "editor"])
    config = ClearToolUses(exclude_tools=frozenset({"web_search"}))
    edited = clear_tool_uses(view, prompt_tokens=150_000, count=tokens, config=config)
    assert cleared(edited.messages) == ["c2"]


def test_clear_tool_inputs_also_empties_the_calls_parameters() -> None:
    view = agent(4)
    config = ClearToolUses(clear_tool_inputs=True)
    edited = clear_tool_uses(view, prompt_tokens=150_000, count=tokens, config=config)
    assert [m.arguments for m in edited.messages if m.kind == "tool_call"] == [
        {},
        {"q": 2},
        {"q": 3},
        {"q": 4},
    ]
    assert edited.cleared == (2, 3)


def test_a_tool_uses_trigger_counts_uses_not_tokens() -> None:
    config = ClearToolUses(trigger_tool_uses=5, keep_tool_uses=2)
    assert clear_tool_uses(agent(5), prompt_tokens=10**6, count=tokens, config=config).cleared == ()
    edited = clear_tool_uses(agent(6), prompt_tokens=10, count=tokens, config=config)
    assert cleared(edited.messages) == ["c1", "c2", "c3", "c4"]


def test_tool_uses_pair_calls_with_their_results_and_keep_an_open_call() -> None:
    view = [*agent(2), call(3)]
    assert tool_uses(view) == [(2, 3), (4, 5), (6, None)]


# --------------------------------------------------------------------------- compaction


def growing(turns: int, size: int) -> list[list[ModelMessage]]:
    """Turn n's naive view: system, input, n tool uses of `size` tokens."""
    return [agent(n, size) for n in range(1, turns + 1)]


def test_the_compaction_trigger_defaults_to_150k_and_refuses_less_than_50k() -> None:
    assert Compaction().trigger_input_tokens == 150_000
    with pytest.raises(ValueError, match="at least 50,000"):
        Compaction(trigger_input_tokens=49_999)


def test_compaction_summarizes_the_request_that_reaches_the_trigger_then_starts_from_it() -> None:
    # Each turn adds a tool use of 10,020 tokens (call 20 with its arguments, result 10,000);
    # the view is 10 + 6 + n x 10,011 tokens.
    turns = growing(8, 10_000)
    config = Compaction(trigger_input_tokens=50_000, summary_tokens=300)
    out = compaction_turns(
        turns, prompt_tokens=total, summary_text=lambda n: f"summary {n}", config=config
    )
    # Turns 1-4 stay below 50,000; turn 5 reaches it.
    assert [t.summarized is not None for t in out] == [False] * 4 + [True] + [False] * 3
    fifth = out[4]
    assert fifth.summarized == tuple(turns[4]) and fifth.summary_output_tokens == 300
    assert fifth.messages == (system(), summary_message("summary 1"))
    # The next turn sends system, the summary, then only what came after turn 5.
    assert out[5].messages == (system(), summary_message("summary 1"), *turns[5][len(turns[4]) :])
    assert out[7].messages[2:] == tuple(turns[7][len(turns[4]) :])


def test_a_second_compaction_summarizes_the_first_summary_and_what_followed() -> None:
    turns = growing(12, 10_000)
    config = Compaction(trigger_input_tokens=50_000, summary_tokens=300)
    out = compaction_turns(turns, prompt_tokens=total, summary_text=str, config=config)
    compacted = [n + 1 for n, t in enumerate(out) if t.summarized is not None]
    # After turn 5 the request is system + summary + k uses: 10 + 21 + k x 10,011.
    assert compacted == [5, 10]
    second = out[9].summarized
    assert second is not None and second[1] == summary_message("1")
    assert out[9].messages == (system(), summary_message("2"))


def test_an_edit_before_compaction_can_keep_the_request_below_its_trigger() -> None:
    turns = growing(8, 10_000)
    config = Compaction(trigger_input_tokens=50_000)

    def clear(messages: Sequence[ModelMessage]) -> Sequence[ModelMessage]:
        edit = ClearToolUses(trigger_input_tokens=30_000)
        return clear_tool_uses(
            messages, prompt_tokens=total(messages), count=tokens, config=edit
        ).messages

    out = compaction_turns(turns, prompt_tokens=total, summary_text=str, config=config, edit=clear)
    assert all(t.summarized is None for t in out)
    assert cleared(out[7].messages) == ["c1", "c2", "c3", "c4", "c5"]


# --------------------------------------------------------------------------- ToolOutputTrimmer


def test_trimmer_text_is_the_sdks() -> None:
    config = ToolOutputTrimmer()
    text = "x" * 501
    assert trimmed_output("search", text, config) == (
        "[Trimmed: search output \u2014 501 chars \u2192 200 char preview]\n" + "x" * 200 + "..."
    )
    assert trimmed_output("search", "x" * 500, config) is None
    # A preview no shorter than the output is left alone.
    assert trimmed_output("search", "x" * 250, ToolOutputTrimmer(max_output_chars=240)) is None
    # Structured output is measured as sorted-key JSON.
    assert trimmed_output(None, [{"b": "y" * 600, "a": 1}], config).startswith(
        "[Trimmed: unknown_tool output \u2014 619 chars \u2192 200 char preview]\n"
        '[{"a": 1, "b": "yyy'
    )


def test_trimmer_keeps_the_last_two_user_turns_whole_and_trims_older_outputs() -> None:
    view = [
        system(),
        user("task 1"),
        call(1),
        result(1, 600),
        call(2),
        result(2, 400),  # short: kept
        user("task 2"),
        call(3),
        result(3, 900),  # inside the last two turns: kept
        user("task 3"),
        call(4),
        result(4, 900),
    ]
    edited = trim_tool_outputs(view)
    assert edited.cleared == (3,)
    assert edited.messages[3].content.startswith(
        "[Trimmed: search output \u2014 600 chars \u2192 200 char preview]\n"
    )
    assert edited.messages[5:] == tuple(view[5:])


def test_trimmer_does_nothing_before_the_second_user_message() -> None:
    view = [system(), user("only task"), call(1), result(1, 5000)]
    assert trim_tool_outputs(view).messages == tuple(view)
    # With recent_turns=1 the boundary is the last user message.
    assert trim_tool_outputs(view, ToolOutputTrimmer(recent_turns=1)).cleared == ()
    longer = [*view, user("next"), call(2), result(2, 10)]
    assert trim_tool_outputs(longer, ToolOutputTrimmer(recent_turns=1)).cleared == (3,)


def test_trimmable_tools_limit_what_is_trimmed() -> None:
    view = [
        system(),
        user("a"),
        call(1, "search"),
        result(1, 900, "search"),
        call(2, "execute_code"),
        result(2, 900, "execute_code"),
        user("b"),
        user("c"),
    ]
    config = ToolOutputTrimmer(trimmable_tools=frozenset({"execute_code"}))
    assert trim_tool_outputs(view, config).cleared == (5,)


# --------------------------------------------------------------------------- replay


def naive_turns(uses: int, size: int) -> list[ViewTurn]:
    """The naive agent's turn n: system, input, n tool uses, 20 s apart."""
    log = []
    index = 0

    def raw(message: ModelMessage) -> RawMessage:
        nonlocal index
        index += 1
        return RawMessage(
            id=f"m{index}",
            index=index,
            window_id="main",
            role=message.role,
            kind=message.kind,
            content=message.content,
            tool_call_id=message.tool_call_id,
            tool_name=message.tool_name,
            arguments=message.arguments,
        )

    for message in agent(uses, size)[1:]:
        log.append(raw(message))
    bounds = [2 + 2 * n for n in range(1, uses + 1)]
    projections = full_history_projections([(system(), b) for b in bounds], log, session_id="s")
    return [
        ViewTurn(p, tools=(), sent_at=20.0 * n, label=f"t{n}") for n, p in enumerate(projections)
    ]


def chars4(text: str) -> int:
    return -(-len(text) // 4)


def test_a_strategy_replays_as_turns_the_cache_report_accepts() -> None:
    turns = naive_turns(12, 40_000)  # about 10,000 tokens per result
    strategy = Strategy(
        "both",
        providers=("anthropic-messages",),
        clear=ClearToolUses(trigger_input_tokens=40_000),
        compaction=Compaction(trigger_input_tokens=50_000, summary_tokens=500),
    )
    applied = strategy_turns(turns, strategy, chars4)
    # Clearing (over 40k: 4 results and more) keeps each request near 3 results (~30k), so
    # the cleared request never reaches compaction's 50k in 12 turns.
    assert applied.compactions == 0 and applied.summary_output_tokens == 0
    assert applied.cleared_turns == 9
    assert [t.label for t in applied.turns] == [t.label for t in turns]
    last = applied.turns[-1].projection
    assert [m.tool_call_id for m in last.messages if m.content == CLEARED_PLACEHOLDER] == [
        f"c{n}" for n in range(1, 10)
    ]
    assert last.sources[3] == turns[-1].projection.sources[3]  # a cleared result keeps its source
    economy = cache_economy(
        applied.turns,
        chars4,
        settings=EconomySettings(providers=("anthropic-messages",), min_cacheable_tokens=0),
    )
    assert (
        economy["anthropic-messages"].totals.input_tokens
        < sum(t.projection.upper_bound for t in turns) * 10_000
    )


def test_compaction_adds_the_summary_call_before_the_turn_it_compacts() -> None:
    turns = naive_turns(8, 40_000)
    strategy = Strategy(
        "compaction",
        providers=("anthropic-messages",),
        compaction=Compaction(trigger_input_tokens=50_000, summary_tokens=500),
    )
    applied = strategy_turns(turns, strategy, chars4)
    assert applied.compactions == 1 and applied.summary_output_tokens == 500
    labels = [t.label for t in applied.turns]
    assert labels == ["t0", "t1", "t2", "t3", "t4 compaction", "t4", "t5", "t6", "t7"]
    summary_call = applied.turns[4].projection.messages
    assert summary_call[-1].content == SUMMARY_REQUEST and len(summary_call) == 2 + 2 + 10
    compacted = applied.turns[5].projection.messages
    assert len(compacted) == 2 and compacted[1].content.startswith("<summary>Summary 1 ")
    assert 400 <= chars4(compacted[1].content) <= 600
    assert applied.turns[6].projection.messages[:2] == compacted
    assert applied.largest_request >= 50_000
