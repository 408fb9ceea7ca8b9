"""The built-in runtime records each SDK's usage by kind and prices the turn (contract §8).

Real `openai` / `anthropic` SDK calls against local fake endpoints: what the provider
reports ends on the turn's snapshot as input (every input token), cache read, cache write
and output tokens, with the turn's cost, and moves the /metrics counters after commit.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from prometheus_client import REGISTRY

from contextproto import metrics
from sessions_app.models import ProjectionSnapshot
from sessions_app.services.runs import run_start
from sessions_app.services.runtime import run_advance
from sessions_app.services.sessions import session_create
from tests.providers.servers import ANTHROPIC_TOOL_USE_REPLY, OPENAI_TOOL_CALL_REPLY, FakeAPI

PRICES = {"input": 3, "cacheRead": 0.3, "cacheWrite": 3.75, "output": 15}
KEY_ENV = "TEST_PROVIDER_KEY"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-usage")
    # Every version of this test gets its own label, whatever ran before in this process.
    monkeypatch.setattr(metrics, "_labelled_versions", set())


def _counted(version, kind: str | None = None) -> float:
    if kind is None:
        value = REGISTRY.get_sample_value(
            "contextproto_model_cost_total", {"agent_version": str(version.id)}
        )
    else:
        value = REGISTRY.get_sample_value(
            "contextproto_model_tokens_total", {"agent_version": str(version.id), "kind": kind}
        )
    return value or 0.0


def _one_turn(application, make_version, provider: str, api: FakeAPI, capture, prices):
    version = make_version(
        application,
        provider=provider,
        model_config={"baseUrl": api.url, "apiKeyEnv": KEY_ENV},
        prices=prices,
    )
    session, _ = session_create(agent_version=version)
    run, _ = run_start(session_id=session.id, content="Quote 3 chairs, please.")
    with capture(execute=True):  # the usage commits; its after-commit work runs
        assert run_advance(run_id=run.id) == "completed"
    return version, ProjectionSnapshot.objects.get(session=session)


def test_openai_cached_tokens_are_recorded_inside_the_input_and_priced(
    openai_api: FakeAPI, application, make_version, django_capture_on_commit_callbacks
) -> None:
    body = json.loads(json.dumps(OPENAI_TOOL_CALL_REPLY))
    body["choices"][0]["message"] = {"role": "assistant", "content": "3 chairs: 270 CHF."}
    body["choices"][0]["finish_reason"] = "stop"
    body["usage"] = {
        "prompt_tokens": 2000,
        "completion_tokens": 40,
        "total_tokens": 2040,
        "prompt_tokens_details": {"cached_tokens": 1536, "audio_tokens": 0},
    }
    openai_api.answer(200, body)
    version, snapshot = _one_turn(
        application,
        make_version,
        "openai",
        openai_api,
        django_capture_on_commit_callbacks,
        PRICES,
    )
    assert openai_api.last.path == "/chat/completions"
    row = (
        snapshot.input_tokens,
        snapshot.cache_read_input_tokens,
        snapshot.cache_write_input_tokens,
        snapshot.output_tokens,
    )
    assert row == (2000, 1536, 0, 40)  # prompt_tokens already counts the cached part
    # (464 x 3 + 1536 x 0.3 + 0 x 3.75 + 40 x 15) / 1e6
    assert snapshot.cost == Decimal("0.0024528")
    assert snapshot.usage == {"inputTokens": 2000, "outputTokens": 40, "cacheReadInputTokens": 1536}
    counted = {
        kind: _counted(version, kind)
        for kind in ("input_uncached", "cache_read", "cache_write", "output")
    }
    assert counted == {"input_uncached": 464, "cache_read": 1536, "cache_write": 0, "output": 40}
    assert _counted(version) == pytest.approx(0.0024528)


def test_anthropic_input_is_the_sum_of_its_three_input_counts_and_priced(
    anthropic_api: FakeAPI, application, make_version, django_capture_on_commit_callbacks
) -> None:
    body = json.loads(json.dumps(ANTHROPIC_TOOL_USE_REPLY))
    body["content"] = [{"type": "text", "text": "3 chairs: 270 CHF."}]
    body["stop_reason"] = "end_turn"
    body["usage"] = {
        "input_tokens": 12,  # the uncached part only
        "output_tokens": 30,
        "cache_read_input_tokens": 4096,
        "cache_creation_input_tokens": 1500,
        "cache_creation": {"ephemeral_5m_input_tokens": 1500, "ephemeral_1h_input_tokens": 0},
    }
    anthropic_api.answer(200, body)
    version, snapshot = _one_turn(
        application,
        make_version,
        "anthropic",
        anthropic_api,
        django_capture_on_commit_callbacks,
        PRICES,
    )
    assert anthropic_api.last.path == "/v1/messages"
    row = (
        snapshot.input_tokens,
        snapshot.cache_read_input_tokens,
        snapshot.cache_write_input_tokens,
        snapshot.output_tokens,
    )
    assert row == (12 + 4096 + 1500, 4096, 1500, 30)
    # (12 x 3 + 4096 x 0.3 + 1500 x 3.75 + 30 x 15) / 1e6
    assert snapshot.cost == Decimal("0.0073398")
    assert snapshot.usage["cacheWrite5mInputTokens"] == 1500
    counted = {
        kind: _counted(version, kind)
        for kind in ("input_uncached", "cache_read", "cache_write", "output")
    }
    assert counted == {"input_uncached": 12, "cache_read": 4096, "cache_write": 1500, "output": 30}
    assert _counted(version) == pytest.approx(0.0073398)


def test_a_version_without_prices_records_tokens_and_no_cost(
    openai_api: FakeAPI, application, make_version, django_capture_on_commit_callbacks
) -> None:
    body = json.loads(json.dumps(OPENAI_TOOL_CALL_REPLY))
    body["choices"][0]["message"] = {"role": "assistant", "content": "done"}
    body["choices"][0]["finish_reason"] = "stop"
    openai_api.answer(200, body)  # usage 123 in / 7 out, no cache details
    version, snapshot = _one_turn(
        application, make_version, "openai", openai_api, django_capture_on_commit_callbacks, None
    )
    assert (snapshot.input_tokens, snapshot.cache_read_input_tokens) == (123, 0)
    assert snapshot.output_tokens == 7
    assert snapshot.cost is None
    assert _counted(version, "input_uncached") == 123
    cost = REGISTRY.get_sample_value(
        "contextproto_model_cost_total", {"agent_version": str(version.id)}
    )
    assert cost is None  # no cost series for a version without prices
