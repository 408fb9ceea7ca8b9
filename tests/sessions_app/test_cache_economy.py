"""The cache economy loader on a short scripted session: what each turn's view costs cached.

The session runs the built-in runtime with the scripted model: a window opened for the task,
three host lookups, a fold of them, a memory write, the window completed, the answer. Every
pair of turns differs for one known reason, which the report must name.
"""

from __future__ import annotations

import pytest

from agents.models import Tool
from contextproto.economics.causes import (
    CAUSE_APPEND,
    CAUSE_FOLD,
    CAUSE_HEADER,
    CAUSE_WINDOW_SWITCH,
)
from contextproto.economics.stored_views import FULL_HISTORY
from contextproto.protocol.adapters import PROVIDER_ANTHROPIC_MESSAGES, PROVIDER_OPENAI_CHAT
from contextproto.protocol.prompt_cache import session_cache_key
from contextproto.tokens import tokenizer_label
from labs import scenario
from sessions_app.cache_economy import (
    DEFAULT_THINK_SECONDS,
    session_cache_economy,
    session_turns,
)
from sessions_app.models import Message, ProjectionSnapshot
from sessions_app.services.sessions import session_create

PROVIDERS = (PROVIDER_OPENAI_CHAT, PROVIDER_ANTHROPIC_MESSAGES)


def _script() -> dict:
    b = scenario.ScriptBuilder()
    b.user_input()
    b.call(
        "context_window_open",
        {
            "purpose": "a task of its own",
            "expectedWindowId": "main",
            "windowId": "quote",
            "goal": "Quote for ACME",
            "input": "Prepare the quote; come back to main.",
        },
    )
    first, _, _ = b.call("price_lookup", {"item": "laptop", "qty": 3})
    b.call("shipping_lookup", {"to": "ACME"})
    _, last, _ = b.call("stock_lookup", {"item": "laptop"})
    b.call(
        "context_fold_create",
        {
            "purpose": "lookups done",
            "expectedWindowId": "quote",
            "fromIndex": first,
            "throughIndex": last,
            "summary": "Price 1300 each, shipping 250, stock fine.",
        },
    )
    b.call(
        "context_window_memory_set",
        {"purpose": "keep it", "expectedWindowId": "quote", "memory": "Quote: 4150."},
    )
    b.call(
        "context_window_complete",
        {"purpose": "done", "expectedWindowId": "quote", "outcome": "Quote 4150 ready."},
    )
    b.text("The quote is 4150.")
    return {"steps": b.steps}


# Why each turn's view differs from the one before (turn 1 has no predecessor).
EXPECTED = [
    None,
    CAUSE_WINDOW_SWITCH,  # 2: in `quote` after context_window_open
    CAUSE_APPEND,  # 3: a lookup appended
    CAUSE_APPEND,  # 4
    CAUSE_APPEND,  # 5
    CAUSE_FOLD,  # 6: the three lookups folded
    CAUSE_HEADER,  # 7: the window's memory is in the header
    CAUSE_WINDOW_SWITCH,  # 8: back in main after context_window_complete
]


@pytest.fixture
def story(application, make_version):
    version = make_version(
        application, provider="scripted", model_config=_script(), max_input_tokens=16000
    )
    for name in scenario.HOST_TOOLS:
        version.tools.add(Tool.objects.create(application=application, name=name))
    session, _ = session_create(agent_version=version, inputs={"customer": "ACME"})
    assert scenario.drive_run(session.id, "Prepare a quote for ACME.") == "completed"
    return session


def test_each_turn_pair_gets_its_cause_under_both_providers(story):
    report = session_cache_economy(story.id)

    snapshots = list(ProjectionSnapshot.objects.filter(session=story).order_by("created_at"))
    assert report.view.turns == len(snapshots) == len(EXPECTED)
    assert report.view.view == "unified@2"
    assert report.view.tokenizer == tokenizer_label()
    for provider in PROVIDERS:
        economy = report.view[provider]
        assert [t.cause for t in economy.turns] == EXPECTED, provider
        assert [t.label for t in economy.turns] == [str(s.pk) for s in snapshots]
        summed = economy.totals
        assert summed.input_tokens == sum(t.cache.input_tokens for t in economy.turns)
        assert 0 < economy.hit_ratio < 1
        # A break re-bills what the previous request already sent after the divergence.
        switched = economy.turns[6]
        assert switched.rebilled_tokens > 0
    # Cached reads are billed at 0.1, so the effective cost is below the input tokens.
    anthropic = report.view[PROVIDER_ANTHROPIC_MESSAGES]
    assert anthropic.equivalent_tokens < anthropic.totals.input_tokens


def test_the_full_history_replays_every_raw_message_and_only_appends(story):
    report = session_cache_economy(story.id)

    naive = report.full_history
    assert naive is not None and naive.view == FULL_HISTORY
    assert naive.turns == report.view.turns
    for provider in PROVIDERS:
        assert [t.cause for t in naive[provider].turns] == [None] + [CAUSE_APPEND] * 7
        # The naive agent sends more than the view at the last turn: nothing is folded.
        assert (
            naive[provider].turns[-1].cache.input_tokens
            > report.view[provider].turns[-1].cache.input_tokens
        )
    turns = session_turns(story.id)
    last = turns.full_history[-1].projection
    raw = Message.objects.filter(session=story, index__lte=last.upper_bound).count()
    assert len(last.messages) == 1 + raw  # the system prompt, then every raw message
    assert [s.derived_type for s in last.sources[1:]] == ["raw"] * raw


def test_turns_are_paced_by_the_think_time_or_by_their_recorded_times(story):
    paced = session_turns(story.id, full_history=False)
    assert [t.sent_at for t in paced.views] == [
        n * DEFAULT_THINK_SECONDS for n in range(len(EXPECTED))
    ]
    assert paced.full_history == []
    assert paced.settings.cache_key == session_cache_key(str(story.id))
    # The tools are those the stored request was offered: the protocol's, then the host's.
    names = [t["name"] for t in paced.views[0].tools]
    assert names[-3:] == sorted(scenario.HOST_TOOLS) and names[0].startswith("context_")

    recorded = session_turns(story.id, think_seconds=None, full_history=False)
    times = [t.sent_at for t in recorded.views]
    assert times[0] == 0.0 and times == sorted(times)

    report = session_cache_economy(story.id, think_seconds=None, full_history=False)
    assert report.full_history is None


def test_loading_takes_a_fixed_number_of_queries(story, django_assert_max_num_queries):
    with django_assert_max_num_queries(4):
        session_turns(story.id)


def test_under_unified4_the_memory_write_appends_instead_of_breaking_the_header(
    application, make_version
):
    """The same script on scenario.PROTOCOL_VIEWS' unified@4: its working memory lives in
    the trailing state message, so turn 7 (the memory write) no longer re-bills the view."""
    view = scenario.protocol_view("unified@4")
    version = make_version(
        application,
        version=view.version,
        options=dict(view.options),
        provider="scripted",
        model_config=_script(),
        max_input_tokens=16000,
        name="assistant (unified@4)",
    )
    for name in scenario.HOST_TOOLS:
        version.tools.add(Tool.objects.create(application=application, name=name))
    session, _ = session_create(agent_version=version, inputs={"customer": "ACME"})
    assert scenario.drive_run(session.id, "Prepare a quote for ACME.") == "completed"
    # Every call of unified@2's script validates under unified@4.
    assert not Message.objects.filter(session=session, kind="tool_result", is_error=True).exists()

    report = session_cache_economy(session.id, full_history=False)
    assert report.view.view == "unified@4"
    expected = list(EXPECTED)
    expected[6] = CAUSE_APPEND
    for provider in PROVIDERS:
        economy = report.view[provider]
        assert [t.cause for t in economy.turns] == expected, provider
        assert economy.turns[6].rebilled_tokens == 0
