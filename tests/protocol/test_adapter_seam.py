"""The provider adapters' seam (issue 42): one adapter per wire format, chosen in one place,
and the live turn's engine call (`view.build`) that refuses an over-capacity view itself."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from contextproto.protocol import adapters, catalog, errors, view
from contextproto.protocol.adapter_base import AdaptOptions, WireFormat
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.prompt_cache import PromptCache
from tests.protocol.test_view import PROTOCOL_TOOLS, LogSource, _recipe, _state, _worked_log
from tests.providers.engine_requests import history_projection, unified_tools

PROTOCOL_DIR = Path(adapters.__file__).parent
ADAPTER_NAMES = {"adapt_openai_chat", "adapt_anthropic", "adapt_responses", "_adapt_neutral"}


def test_every_wire_format_has_one_adapter_that_answers_in_its_own_format() -> None:
    assert set(adapters.ADAPTERS) == set(WireFormat) == set(adapters.PROVIDERS)
    projection = history_projection()
    for wire_format, adapter in adapters.ADAPTERS.items():
        adapted = adapter(projection, unified_tools(), AdaptOptions())
        assert adapted.provider == wire_format
        assert adapted == adapters.adapt(projection, wire_format, unified_tools())


def test_adapt_hands_every_option_to_the_adapter_its_api_has_a_word_for() -> None:
    projection = history_projection()
    cache = PromptCache.from_config({"mode": "auto"})
    for wire_format in (WireFormat.OPENAI_CHAT, WireFormat.OPENAI_RESPONSES):
        body = adapters.adapt(projection, wire_format, prompt_cache=cache, cache_key="k1").body
        assert body["prompt_cache_key"] == "k1"
        assert "prompt_cache_key" not in adapters.adapt(projection, wire_format).body
    marked = adapters.adapt(projection, WireFormat.ANTHROPIC_MESSAGES, prompt_cache=cache).body
    assert "cache_control" in str(marked)
    assert "cache_control" not in str(adapters.adapt(projection, "anthropic-messages").body)


def test_an_unknown_wire_format_is_refused_with_the_list_of_known_ones() -> None:
    with pytest.raises(ProtocolError) as refused:
        adapters.adapt(history_projection(), "openai-completions")
    assert refused.value.code == errors.PROVIDER_UNKNOWN
    assert refused.value.details["providers"] == list(adapters.PROVIDERS)


def test_only_the_adapters_module_names_the_adapters() -> None:
    """An adapter is reached through `adapters.ADAPTERS` (or `adapt`), never called by name
    from elsewhere in the engine, so a new wire format is one module and one entry."""
    callers: dict[str, set[str]] = {}
    for path in PROTOCOL_DIR.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in ADAPTER_NAMES:
                    callers.setdefault(path.name, set()).add(name)
    assert callers == {}


def test_build_refuses_a_view_whose_protected_part_exceeds_the_limit() -> None:
    entry = catalog.by_key("unified@2")
    assert entry is not None
    log, folds = _worked_log()
    source = LogSource(log, _state("a"), folds)
    plan = view.view_plan(entry, active_window="a", run_id=None, upper_bound=11, revision=7)
    wire = view.WireRecipe(
        provider="openai-chat",
        prompt_cache=PromptCache.from_config({"mode": "off"}),
        assistant_prefill=False,
        cache_key="k",
    )
    recipe = _recipe(entry, PROTOCOL_TOOLS)
    built, adapted = view.build(view.freeze(plan, source), source, recipe, wire)
    assert built.capacity_refusal() is None and adapted.provider == "openai-chat"
    sizes = built.protected_sizes()
    needed = sum(sizes.values())

    tight = dataclasses.replace(recipe, max_input_tokens=needed - 1)
    with pytest.raises(ProtocolError) as refused:
        view.build(view.freeze(plan, source), source, tight, wire)
    assert refused.value.code == errors.CONTEXT_CAPACITY_EXCEEDED
    assert refused.value.details == {
        **sizes,
        "total": needed,
        "limit": needed - 1,
        "estimator": "chars/4",
    }
    exact = dataclasses.replace(recipe, max_input_tokens=needed)
    assert view.build(view.freeze(plan, source), source, exact, wire)[0].capacity_refusal() is None
