"""Byte-stable prefixes (contract §8): an append-only turn repeats the previous request.

For every protocol version and state placement, and every adapter: a random log (texts,
inputs, single and parallel tool calls with results, approval feedback, long results that
the preview cuts), a frozen state (window record, task memory, a checkpoint covering a
prefix, folds) and two upper bounds N < M at turn boundaries (no call pending). Both
turns are projected and adapted with prompt caching on (and off); the request of M must
equal the request of N up to M's first appended message, markers aside
(tests/protocol/prefix_stability.py).

Answers carry what models write: text beside the first call of an answer, and Anthropic
thinking parts on an answer that follows a user or tool message. Kept out by design: a new
run (it drops the previous run's inputs that a checkpoint covers, contract §4.1), images (the
GUI projection replaces the oldest of more than three, contract §4.4), a fold of the last group
of N (a fold is always followed by the call that made it), and thinking on an answer
written right after another assistant message (Anthropic wants thinking first in the merged
assistant turn, so it moves ahead of the earlier message's blocks; no model answers twice
without a user or tool message between).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextproto.protocol import adapters, catalog
from contextproto.protocol.groups import build_groups
from contextproto.protocol.messages import Fold
from contextproto.protocol.projection import project
from contextproto.protocol.prompt_cache import PROMPT_CACHE_OFF, PromptCache
from contextproto.protocol.state import KEY_CURRENT_WINDOW_ENTRY, KEY_TASK_MEMORY
from tests.protocol.logbuilder import LogBuilder, make_input
from tests.protocol.prefix_stability import assert_prefix_kept, comparable_units

# (protocol, version, stateMessagePlacement): every mapping of the catalog.
MAPPINGS = [
    pytest.param("prefix", 2, None, id="prefix@2"),
    pytest.param("unified", 1, None, id="unified@1"),
    pytest.param("unified", 2, None, id="unified@2"),
    *(
        pytest.param("unified", 3, placement, id=f"unified@3-{placement}")
        for placement in catalog.STATE_MESSAGE_PLACEMENTS
    ),
]
PROVIDERS = list(adapters.PROVIDERS)
# Text that trips careless serialisation: non-ASCII, quotes, braces, backslashes, emoji.
SAMPLES = ("plain", "Zürich €", 'say "hi" {x}', "back\\slash\nnew line", "🙂 ok", "日本")
TEXTS = st.builds(lambda text, n: f"{text} {n}", st.sampled_from(SAMPLES), st.integers(0, 99))
HOST_TOOLS = [
    {
        "name": "lookup",
        "description": "Look something up.",
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}, "a": {}}},
    },
    {"name": "shell", "description": "", "inputSchema": {"required": [], "type": "object"}},
]


@dataclass
class Turns:
    log: LogBuilder
    boundaries: list[int]  # upper bounds at which no call is pending


# Strategies are built once: building one per draw costs more than the draw itself.
RESULTS = st.one_of(
    TEXTS,
    st.just("r" * 120),  # longer than the preview: head + tail with a marker
    st.lists(TEXTS.map(lambda t: {"type": "text", "text": t}), min_size=1, max_size=2),
)
STEPS = st.lists(
    st.sampled_from(("text", "input", "call", "parallel", "approval")), min_size=4, max_size=24
)
TOOL_NAMES = st.sampled_from(("lookup", "shell"))
ORDERS = {n: st.permutations(range(n)) for n in (1, 2, 3)}
PARALLEL = st.integers(2, 3)
FLAGS = st.booleans()
FOLD_HERE = st.integers(0, 2).map(lambda n: n == 0)
CACHES = st.sampled_from([PromptCache(), PromptCache(ttl="1h"), PROMPT_CACHE_OFF])
THINKING = st.sampled_from(
    (
        [],
        [{"type": "thinking", "thinking": "Let me think: Zürich €", "signature": "c2ln"}],
        [
            {"type": "redacted_thinking", "data": "ZW5j"},
            {"type": "thinking", "thinking": "", "signature": "c2"},
        ],
    )
)
BESIDE_CALL = st.one_of(st.just(""), TEXTS)


def _answer(draw, text: str, *, after_assistant: bool) -> object:
    """An answer's content: its text, with thinking parts when it opens an assistant turn."""
    thinking = [] if after_assistant else draw(THINKING)
    if not thinking:
        return text
    return [*thinking, *([{"type": "text", "text": text}] if text else [])]


@st.composite
def turns(draw, window: str) -> Turns:
    log = LogBuilder(window=window)
    log.input(draw(TEXTS))
    boundaries = [len(log.messages)]
    for step in draw(STEPS):
        after_assistant = log.messages[-1].role == "assistant"
        if step == "text":
            log.text(_answer(draw, draw(TEXTS), after_assistant=after_assistant))
        elif step == "input":
            log.input(draw(TEXTS))
        else:
            count = draw(PARALLEL) if step == "parallel" else 1
            # Only an answer's first call carries its text and thinking.
            first = _answer(draw, draw(BESIDE_CALL), after_assistant=after_assistant)
            calls = [
                log.call(draw(TOOL_NAMES), {"q": draw(TEXTS)}, content=first if n == 0 else "")
                for n in range(count)
            ]
            if step == "approval":
                log.approval(calls[0], draw(TEXTS))
            for n in draw(ORDERS[count]):
                log.result(calls[n], draw(RESULTS), is_error=draw(FLAGS))
        boundaries.append(len(log.messages))
    return Turns(log=log, boundaries=boundaries)


def _folds(draw, log: LogBuilder, covered: int, bound: int) -> list[Fold]:
    """Folds of whole foldable groups of (covered, bound], never the last group."""
    groups = build_groups(log.of_window(log.window, after=covered, through=bound))[:-1]
    folds: list[Fold] = []
    i = 0
    while i < len(groups):
        if groups[i].foldable and draw(FOLD_HERE):
            j = i
            while j + 1 < len(groups) and groups[j + 1].foldable and draw(FLAGS):
                j += 1
            first, last = groups[i].first_index, groups[j].last_index
            folds.append(log.fold(log.window, first, last, f"summary {first}", call_id=f"f{first}"))
            i = j + 1
        else:
            i += 1
    return folds


@pytest.mark.parametrize(("protocol", "version", "placement"), MAPPINGS)
@pytest.mark.parametrize("provider", PROVIDERS)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_an_append_only_turn_repeats_the_previous_request(
    protocol: str, version: int, placement: str | None, provider: str, data: st.DataObject
) -> None:
    draw = data.draw
    window = "main" if protocol == "prefix" else "w"
    built = draw(turns(window))
    log = built.log
    first = draw(st.integers(0, len(built.boundaries) - 2))
    bound_n = built.boundaries[first]
    bound_m = draw(st.sampled_from(built.boundaries[first + 1 :]))
    covered = draw(st.sampled_from([0, *(b for b in built.boundaries if b < bound_n)]))
    folds = [] if protocol == "prefix" else _folds(draw, log, covered, bound_n)
    kv = {KEY_TASK_MEMORY: draw(TEXTS)}
    if draw(FLAGS):
        kv[KEY_CURRENT_WINDOW_ENTRY] = {
            "windowId": window,
            "fromWindowId": "main",
            "upperBoundBeforeEntry": 0,
            "input": draw(TEXTS),
            "enteredAtRevision": 3,
        }
    options = {"stateMessagePlacement": placement} if placement else {}
    tools = [*catalog.get_version(protocol, version).tools.values(), *HOST_TOOLS]
    cache = draw(CACHES)
    prefill = draw(FLAGS)

    def request(bound: int):
        projection = project(
            make_input(
                log,
                window=window,
                protocol_id=protocol,
                version=version,
                covered=covered,
                folds=folds,
                upper_bound=bound,
                kv=kv,
                options=options,
                preview_chars=50,
                session_inputs={"customer": "ACME Zürich", "seats": 40},
            )
        )
        body = adapters.adapt(
            projection,
            provider,
            tools,
            assistant_prefill=prefill,
            prompt_cache=cache,
            cache_key="cp-session",
        ).body
        return projection, body

    assert_prefix_kept(provider, request(bound_n), request(bound_m))


def test_the_comparison_catches_a_reordered_tool_and_a_changed_header() -> None:
    log = LogBuilder(window="w")
    log.input("go")
    log.exchange("lookup")
    log.text("done")

    def request(bound: int, tools: list[dict], memory: str):
        projection = project(
            make_input(log, window="w", upper_bound=bound, kv={KEY_TASK_MEMORY: memory})
        )
        body = adapters.adapt(
            projection, "anthropic-messages", tools, prompt_cache=PromptCache()
        ).body
        return projection, body

    before = request(3, HOST_TOOLS, "plan")
    assert_prefix_kept("anthropic-messages", before, request(4, HOST_TOOLS, "plan"))
    # Unit 0 is the request's tool_choice; the tools follow it.
    with pytest.raises(AssertionError, match="unit 1 of"):
        assert_prefix_kept("anthropic-messages", before, request(4, HOST_TOOLS[::-1], "plan"))
    with pytest.raises(AssertionError, match="changed by an append-only turn"):
        assert_prefix_kept("anthropic-messages", before, request(4, HOST_TOOLS, "new plan"))
    # One tool call per answer asked another way is a change before every message.
    projection, body = request(4, HOST_TOOLS, "plan")
    with pytest.raises(AssertionError, match="unit 0 of"):
        assert_prefix_kept(
            "anthropic-messages", before, (projection, {**body, "tool_choice": {"type": "auto"}})
        )
    # Markers are not part of the comparison, but the rest of a block is.
    units = comparable_units("anthropic-messages", *before)
    assert not any("cache_control" in unit for unit in units)
