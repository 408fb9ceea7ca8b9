"""The cache economy report on small hand-built sessions: causes, re-billed tokens, totals.

Views are projected by the engine from logs built turn by turn (tests/protocol/logbuilder),
so each pair of turns differs the way a real session's would. Tokens: characters / 4 of a
block's JSON, minimum cacheable length 0, so small requests cache.
"""

from __future__ import annotations

import math

import pytest

from contextproto.economics.cache_report import cache_economy, paced
from contextproto.economics.causes import (
    CAUSE_APPEND,
    CAUSE_CHECKPOINT,
    CAUSE_FOLD,
    CAUSE_HEADER,
    CAUSE_STATE,
    CAUSE_TOOLS,
    CAUSE_WINDOW_SWITCH,
    block_owners,
)
from contextproto.economics.inputs import CacheReportError, EconomySettings, ViewTurn
from contextproto.economics.prices import effective_cost
from contextproto.economics.stored_views import (
    StoredViewError,
    full_history_projection,
    projection_from_wire,
    tools_from_request,
)
from contextproto.protocol.adapters import PROVIDER_ANTHROPIC_MESSAGES, PROVIDER_OPENAI_CHAT, adapt
from contextproto.protocol.messages import ModelMessage
from contextproto.protocol.projection import Projection, project
from contextproto.protocol.prompt_cache import PromptCache
from contextproto.protocol.state import KEY_TASK_MEMORY, checkpoint_key, window_key
from tests.protocol.logbuilder import LogBuilder, make_input

PROVIDERS = (PROVIDER_OPENAI_CHAT, PROVIDER_ANTHROPIC_MESSAGES)
TOOLS = (
    {"name": "lookup", "description": "Look a price up.", "inputSchema": {"type": "object"}},
    {"name": "note", "description": "Write a note.", "inputSchema": {"type": "object"}},
)
SETTINGS = EconomySettings(min_cacheable_tokens=0, cache_key="cp-test")
BULK = "price row " * 60  # ~150 tokens a result: appended history outweighs the state


def count(text: str) -> int:
    return math.ceil(len(text) / 4)


def _turns(*projections: Projection, tools=TOOLS) -> list[ViewTurn]:
    times = paced(len(projections), 20.0)
    return [
        ViewTurn(projection=p, tools=tuple(tools), sent_at=t, label=f"t{n}")
        for n, (p, t) in enumerate(zip(projections, times, strict=True), start=1)
    ]


def _report(*projections: Projection, settings=SETTINGS, tools=TOOLS):
    return cache_economy(
        _turns(*projections, tools=tools),
        count,
        view="test",
        tokenizer="chars/4",
        settings=settings,
    )


def _causes(report, provider: str) -> list[str | None]:
    return [t.cause for t in report[provider].turns]


def _started(window: str = "alpha") -> LogBuilder:
    log = LogBuilder(window=window)
    log.input("Prepare the quote.")
    for _ in range(3):  # #2-#10: three lookups, each answered with a text (its own group)
        log.exchange("lookup", BULK)
        log.text("noted")
    return log


def _kv(window: str = "alpha", **extra) -> dict:
    return {window_key(window): {"goal": f"goal of {window}", "status": "active"}, **extra}


# --------------------------------------------------------------------------- causes


@pytest.mark.parametrize("version", [1, 2])
def test_an_append_only_turn_is_attributed_to_appending_and_rebills_nothing(version):
    log = _started()
    first = project(make_input(log, window="alpha", version=version, kv=_kv()))
    log.exchange("lookup", BULK)
    second = project(make_input(log, window="alpha", version=version, kv=_kv(), revision=8))

    report = _report(first, second)

    for provider in PROVIDERS:
        assert _causes(report, provider) == [None, CAUSE_APPEND]
        turn = report[provider].turns[1]
        assert turn.rebilled_tokens == 0
        # Everything the first request held before its (unified@2) state is read back.
        assert turn.cache.cache_read_tokens > 0.6 * report[provider].turns[0].cache.input_tokens


def test_a_task_memory_write_breaks_at_the_header_and_rebills_the_history_after_it():
    log = _started()
    first = project(make_input(log, window="alpha", kv=_kv(**{KEY_TASK_MEMORY: "budget 5000"})))
    log.exchange("lookup", BULK)
    second = project(
        make_input(log, window="alpha", kv=_kv(**{KEY_TASK_MEMORY: "budget 9000"}), revision=8)
    )

    report = _report(first, second)

    for provider in PROVIDERS:
        assert _causes(report, provider) == [None, CAUSE_HEADER]
        turn = report[provider].turns[1]
        assert "first change at message #" in turn.divergence
        # The input and the three exchanges after the header were sent before: re-billed.
        assert turn.rebilled_tokens >= 3 * count(BULK)
    # Anthropic reads only tools and system (header and history are written again).
    anthropic = report[PROVIDER_ANTHROPIC_MESSAGES].turns[1].cache
    assert anthropic.cache_write_tokens >= 3 * count(BULK)


def test_a_new_fold_breaks_at_its_first_message():
    log = _started()
    before = project(make_input(log, window="alpha", kv=_kv()))
    call_id = log.call("context_fold_create")
    log.result(call_id, "folded")
    fold = log.fold("alpha", 2, 7, "two lookups done", call_id=call_id)
    after = project(make_input(log, window="alpha", kv=_kv(), folds=[fold], revision=8))

    report = _report(before, after)

    for provider in PROVIDERS:
        assert _causes(report, provider) == [None, CAUSE_FOLD]
        # The exchange after the folded range was sent before and is sent again.
        assert report[provider].turns[1].rebilled_tokens >= count(BULK)


def test_a_window_switch_is_attributed_to_the_switch_not_to_the_header():
    log = _started()
    before = project(make_input(log, window="alpha", kv=_kv()))
    log.switch("beta").input("Now the delivery.")
    log.exchange("lookup", BULK)
    after = project(make_input(log, window="beta", kv=_kv("beta"), revision=8))

    report = _report(before, after)

    for provider in PROVIDERS:
        assert _causes(report, provider) == [None, CAUSE_WINDOW_SWITCH]


def test_a_committed_checkpoint_is_attributed_to_the_coverage_that_moved():
    log = _started()
    before = project(make_input(log, window="alpha", kv=_kv()))
    log.exchange("lookup", BULK)
    after = project(
        make_input(
            log,
            window="alpha",
            covered=7,
            kv=_kv(**{checkpoint_key("alpha"): "lookups 1-2 done"}),
            revision=8,
        )
    )

    report = _report(before, after)

    for provider in PROVIDERS:
        assert _causes(report, provider) == [None, CAUSE_CHECKPOINT]


def test_a_state_message_before_the_history_breaks_every_turn():
    log = _started()
    views = []
    for revision in (7, 8, 9):
        views.append(
            project(
                make_input(
                    log,
                    window="alpha",
                    version=3,
                    kv=_kv(),
                    options={"stateMessagePlacement": "before_history_assistant"},
                    revision=revision,
                )
            )
        )
        log.exchange("lookup", BULK)

    report = _report(*views)

    for provider in PROVIDERS:
        assert _causes(report, provider) == [None, CAUSE_STATE, CAUSE_STATE]
        assert all(t.rebilled_tokens >= 3 * count(BULK) for t in report[provider].turns[1:])


def test_a_changed_tool_list_is_attributed_to_the_tools():
    log = _started()
    first = project(make_input(log, window="alpha", kv=_kv()))
    log.exchange("lookup", BULK)
    second = project(make_input(log, window="alpha", kv=_kv(), revision=8))
    turns = _turns(first, second)
    turns[1] = ViewTurn(second, tools=TOOLS[::-1], sent_at=turns[1].sent_at)

    report = cache_economy(turns, count, settings=SETTINGS)

    for provider in PROVIDERS:
        assert _causes(report, provider) == [None, CAUSE_TOOLS]


# --------------------------------------------------------------------------- totals


def test_totals_add_up_and_causes_cover_every_turn_pair():
    log = _started()
    views = [project(make_input(log, window="alpha", kv=_kv()))]
    log.exchange("lookup", BULK)
    views.append(project(make_input(log, window="alpha", kv=_kv(), revision=8)))
    log.switch("beta").input("Now the delivery.")
    log.exchange("lookup", BULK)
    views.append(project(make_input(log, window="beta", kv=_kv("beta"), revision=9)))
    log.exchange("lookup", BULK)
    views.append(project(make_input(log, window="beta", kv=_kv("beta"), revision=9)))

    report = _report(*views)

    assert report.turns == 4 and report.tokenizer == "chars/4"
    for provider in PROVIDERS:
        economy = report[provider]
        summed = economy.totals
        caches = [t.cache for t in economy.turns]
        assert summed.input_tokens == sum(c.input_tokens for c in caches)
        assert summed.input_tokens == (
            summed.cache_read_tokens + summed.cache_write_tokens + summed.uncached_tokens
        )
        assert economy.hit_ratio == pytest.approx(summed.cache_read_tokens / summed.input_tokens)
        assert economy.cost == pytest.approx(sum(t.cost for t in economy.turns))
        assert economy.cost == pytest.approx(effective_cost(caches, economy.prices))
        assert economy.equivalent_tokens == pytest.approx(economy.cost * 1_000_000)
        assert [b.cause for b in economy.breaks] == [CAUSE_APPEND, CAUSE_WINDOW_SWITCH]
        assert sum(b.pairs for b in economy.breaks) == 3
        assert {b.cause: b.turns for b in economy.breaks} == {
            CAUSE_APPEND: (2, 4),
            CAUSE_WINDOW_SWITCH: (3,),
        }
        assert sum(b.rebilled_tokens for b in economy.breaks) == sum(
            t.rebilled_tokens for t in economy.turns
        )
    # Prices: OpenAI never writes; Anthropic writes at 1.25x, reads at 0.1x.
    openai = report[PROVIDER_OPENAI_CHAT].totals
    assert openai.cache_write_tokens == 0
    anthropic = report[PROVIDER_ANTHROPIC_MESSAGES]
    a = anthropic.totals
    assert anthropic.equivalent_tokens == pytest.approx(
        a.uncached_tokens + 0.1 * a.cache_read_tokens + 1.25 * a.cache_write_tokens
    )
    wire = report.to_wire()
    assert wire["providers"][PROVIDER_ANTHROPIC_MESSAGES]["inputTokens"] == a.input_tokens
    assert len(wire["providers"][PROVIDER_OPENAI_CHAT]["turns"]) == 4


def test_without_cache_hints_nothing_is_read_on_anthropic():
    log = _started()
    first = project(make_input(log, window="alpha", kv=_kv()))
    log.exchange("lookup", BULK)
    second = project(make_input(log, window="alpha", kv=_kv(), revision=8))
    off = EconomySettings(
        providers=(PROVIDER_ANTHROPIC_MESSAGES,),
        prompt_cache=PromptCache(mode="off"),
        min_cacheable_tokens=0,
    )

    report = _report(first, second, settings=off)

    assert list(report.providers) == [PROVIDER_ANTHROPIC_MESSAGES]
    assert report[PROVIDER_ANTHROPIC_MESSAGES].totals.cache_read_tokens == 0
    assert report[PROVIDER_ANTHROPIC_MESSAGES].hit_ratio == 0.0


# --------------------------------------------------------------------------- full history


def test_the_full_history_sends_every_raw_message_and_only_appends():
    log = _started()
    log.switch("beta").input("Now the delivery.")
    log.exchange("lookup", BULK)
    system = ModelMessage(role="system", kind="system", content="You are an agent.")
    bounds = (3, 9, 13)  # each turn starts after a tool result
    views = [
        full_history_projection(system, log.messages, session_id="s1", upper_bound=bound)
        for bound in bounds
    ]

    assert [len(v.messages) for v in views] == [4, 10, 14]
    assert {s.window_id for s in views[-1].sources[1:]} == {"alpha", "beta"}
    body = adapt(views[-1], PROVIDER_ANTHROPIC_MESSAGES, list(TOOLS), prompt_cache=PromptCache())
    last_block = body.body["messages"][-1]["content"][-1]
    assert last_block["cache_control"] == {"type": "ephemeral"}

    report = _report(*views)
    for provider in PROVIDERS:
        assert _causes(report, provider) == [None, CAUSE_APPEND, CAUSE_APPEND]
    # Everything sent before is read back at the breakpoint on the last raw block.
    anthropic = report[PROVIDER_ANTHROPIC_MESSAGES].turns
    assert anthropic[2].cache.cache_read_tokens == anthropic[1].cache.input_tokens


def test_blocks_of_an_answer_that_thought_are_traced_to_its_message():
    log = LogBuilder(window="alpha")
    log.input("Prepare the quote.")
    thinking = {"type": "thinking", "thinking": "Look it up.", "signature": "c2ln"}
    redacted = {"type": "redacted_thinking", "data": "ZW5j"}
    beside = {"type": "text", "text": "Looking it up."}
    call = log.call("lookup", content=[thinking, redacted, beside])
    log.result(call, BULK)
    first = project(make_input(log, window="alpha", kv=_kv()))
    log.text([thinking, {"type": "text", "text": "noted"}])
    log.exchange("lookup", BULK)
    second = project(make_input(log, window="alpha", kv=_kv(), revision=8))

    turn = _turns(first)[0]
    owners = block_owners(PROVIDER_ANTHROPIC_MESSAGES, turn, SETTINGS)
    call_at = next(p for p, m in enumerate(first.messages) if m.kind == "tool_call")
    body = adapt(first, PROVIDER_ANTHROPIC_MESSAGES, list(TOOLS)).body
    blocks = [b for m in body["messages"] for b in m["content"]]
    traced = owners[len(TOOLS) + 1 :]  # after the tools and the system block
    use = next(n for n, b in enumerate(blocks) if b["type"] == "tool_use")
    assert [b["type"] for b in blocks[use - 3 : use + 1]] == [
        "thinking",
        "redacted_thinking",
        "text",
        "tool_use",
    ]
    assert traced[use - 3 : use + 1] == [call_at] * 4
    assert len(traced) == len(blocks) and None not in traced

    # Answers that think append like any other: nothing re-billed.
    report = _report(first, second)
    for provider in PROVIDERS:
        assert _causes(report, provider) == [None, CAUSE_APPEND]
        assert report[provider].turns[1].rebilled_tokens == 0


# --------------------------------------------------------------------------- from storage


def test_a_stored_view_rebuilds_the_request_it_was_projected_as():
    log = _started()
    failed = log.call("lookup")
    log.result(failed, "no such item", is_error=True)
    projection = project(make_input(log, window="alpha", kv=_kv()))
    wire = projection.to_wire()

    stored = projection_from_wire(
        wire["messages"],
        wire["sources"],
        window_id=wire["windowId"],
        revision=wire["revision"],
        upper_bound=wire["upperBound"],
        run_id=wire["runId"],
        protocol=wire["protocol"],
        options=wire["options"],
        error_tool_call_ids=[failed, "a-call-of-another-turn"],
    )

    assert stored.error_tool_call_ids == frozenset({failed})
    for provider in PROVIDERS:
        original = adapt(projection, provider, list(TOOLS), prompt_cache=PromptCache())
        rebuilt = adapt(stored, provider, list(TOOLS), prompt_cache=PromptCache())
        assert rebuilt.body == original.body
        assert tools_from_request(provider, original.body) == TOOLS
    with pytest.raises(StoredViewError, match="sources"):
        projection_from_wire(
            wire["messages"],
            wire["sources"][:-1],
            window_id="alpha",
            revision=1,
            upper_bound=1,
            run_id=None,
            protocol="unified@2",
            options={},
        )


def test_turns_out_of_send_order_and_unknown_providers_are_refused():
    log = _started()
    view = project(make_input(log, window="alpha", kv=_kv()))
    late, early = ViewTurn(view, sent_at=40.0, label="t1"), ViewTurn(view, sent_at=20.0)
    with pytest.raises(CacheReportError, match="send order"):
        cache_economy([late, early], count)
    with pytest.raises(CacheReportError, match="neutral"):
        cache_economy([late], count, settings=EconomySettings(providers=("neutral",)))
    with pytest.raises(CacheReportError, match=">= 0"):
        paced(3, -1.0)
