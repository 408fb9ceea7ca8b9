"""The harness over local fake provider APIs (no real model, no network): the request
bodies carry the three placements as specified, and tokens are the provider's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from contextproto.protocol.derived_texts import HEADER_LEAD, STATE_LEAD
from labs.experiments.report import render_markdown
from tests.experiments.conftest import group, runs
from tests.providers.servers import Answer, FakeAPI, serve

pytestmark = pytest.mark.django_db

OPENAI_TEXT_REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1_767_225_600,
    "model": "gpt-test",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "The total is 4150 EUR, within budget."},
            "finish_reason": "stop",
        }
    ],
    # 100 of the 123 prompt tokens came from the provider's prompt cache.
    "usage": {
        "prompt_tokens": 123,
        "completion_tokens": 7,
        "total_tokens": 130,
        "prompt_tokens_details": {"cached_tokens": 100},
    },
}
ANTHROPIC_TEXT_REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-test",
    "content": [{"type": "text", "text": "The total is 4150 EUR, within budget."}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    # Anthropic's three input counts: uncached, read from and written to the cache.
    "usage": {
        "input_tokens": 321,
        "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 200,
        "output_tokens": 9,
    },
}
# Per million tokens (contract §8).
PRICES = {"input": 2.5, "cacheRead": 0.25, "cacheWrite": 3.75, "output": 10}


@pytest.fixture
def placements_plan(example_plan: dict[str, Any]) -> dict[str, Any]:
    """Groups A, B, C answering the stage-1 question once each; no scripted section."""
    example_plan["groups"] = example_plan["groups"][:3]
    example_plan["stages"] = example_plan["stages"][:1]
    example_plan["stages"][0]["sessions"] = 1
    del example_plan["scripted"]
    return example_plan


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("EXPERIMENT_TEST_KEY", "sk-test-experiment")
    return "EXPERIMENT_TEST_KEY"


@pytest.fixture
def openai_api() -> Iterator[FakeAPI]:
    with serve(Answer(body=OPENAI_TEXT_REPLY)) as api:
        yield api


@pytest.fixture
def anthropic_api() -> Iterator[FakeAPI]:
    with serve(Answer(body=ANTHROPIC_TEXT_REPLY)) as api:
        yield api


def _shape(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, what) per message: system / header / state / input."""
    out = []
    for message in body["messages"]:
        content = message["content"]
        text = content if isinstance(content, str) else "".join(b["text"] for b in content)
        what = (
            "state"
            if text.startswith(STATE_LEAD)
            else "header"
            if text.startswith(HEADER_LEAD)
            else message["role"]
            if message["role"] == "system"
            else "input"
        )
        out.append((message["role"], what))
    return out


def test_openai_requests_carry_the_three_placements_and_reported_tokens(
    placements_plan: dict[str, Any], run_plan: Any, openai_api: FakeAPI, api_key: str
) -> None:
    placements_plan["prices"] = PRICES
    report, stdout = run_plan(
        placements_plan,
        "--model",
        "gpt-test",
        "--base-url",
        openai_api.url,
        "--api-key-env",
        api_key,
        provider="openai-chat",
    )
    bodies = [r.body for r in openai_api.received]
    assert [b["model"] for b in bodies] == ["gpt-test"] * 3
    assert all(
        r.headers["authorization"] == "Bearer sk-test-experiment" for r in openai_api.received
    )
    # Groups run in plan order: A, B, C.
    assert [_shape(b) for b in bodies] == [
        [("system", "system"), ("assistant", "header"), ("user", "input"), ("assistant", "state")],
        [("system", "system"), ("assistant", "header"), ("assistant", "state"), ("user", "input")],
        [("system", "system"), ("assistant", "header"), ("user", "input"), ("user", "state")],
    ]
    assert report["resultsKind"] == "model" and "SCRIPTED" not in stdout
    for group_id in ("A", "B", "C"):
        entry = group(report, group_id)
        assert entry["tokens"] == {
            "input": 123,
            "uncachedInput": 23,
            "cacheRead": 100,
            "cacheWrite": 0,
            "output": 7,
            "total": 130,
            "calls": 1,
            "source": "provider-reported",
        }
        # (23 x 2.5 + 100 x 0.25 + 0 x 3.75 + 7 x 10) / 1,000,000; no maintainer call.
        assert entry["cost"] == {
            "agent": pytest.approx(152.5e-6),
            "maintenance": 0.0,
            "total": pytest.approx(152.5e-6),
        }
        assert entry["comparability"]["comparable"] is True
        (run,) = runs(report, group_id, "stage1")
        assert run["verdict"] == "pass"
        assert run["tokens"]["source"] == "provider-reported"
    assert report["budget"]["spentTokens"] == 3 * 130
    assert report["prices"] == PRICES
    # The summary's columns: input by kind and the cost at the plan's prices.
    row = next(line for line in stdout.splitlines() if line.startswith("| A "))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[4:7] == ["123+7", "23/100/0", "0.0002"], cells
    assert "Cost: agent and maintainer calls at 2.5 input, 0.25 cache read" in stdout


@pytest.mark.parametrize("adaptation", ["prefill", "user_role"])
def test_anthropic_marks_groups_whose_state_role_changed_as_not_comparable(
    placements_plan: dict[str, Any],
    run_plan: Any,
    anthropic_api: FakeAPI,
    api_key: str,
    adaptation: str,
) -> None:
    placements_plan["providerAdaptation"] = {"anthropicTrailingAssistantState": adaptation}
    report, _ = run_plan(
        placements_plan,
        "--model",
        "claude-test",
        "--base-url",
        anthropic_api.url,
        "--api-key-env",
        api_key,
        provider="anthropic-messages",
    )
    a, b, c = (r.body for r in anthropic_api.received)
    # The edge rule re-roles B's leading state (and every header) to marked user text.
    assert [m["role"] for m in b["messages"]] == ["user"]
    assert [m["role"] for m in c["messages"]] == ["user"]
    assert c["messages"][-1]["content"][-1]["text"].startswith(STATE_LEAD)
    comparable = {g["id"]: g["comparability"] for g in report["groups"]}
    assert comparable["B"]["comparable"] is False
    assert "not comparable on anthropic-messages" in comparable["B"]["reason"]
    assert comparable["C"]["comparable"] is True
    if adaptation == "prefill":
        # A keeps the assistant role as a prefill: A and C differ in role here too.
        assert [m["role"] for m in a["messages"]] == ["user", "assistant"]
        assert a["messages"][-1]["content"][0]["text"].startswith(STATE_LEAD)
        assert comparable["A"]["comparable"] is True
        assert "prefill" in comparable["A"]["reason"]
    else:
        assert [m["role"] for m in a["messages"]] == ["user"]
        assert comparable["A"]["comparable"] is False
        assert comparable["A"]["observed"] == [{"role": "user", "position": "trailing"}]
    # inputTokens counts every input token: 321 uncached + 1000 read + 200 written.
    tokens = group(report, "A")["tokens"]
    assert (tokens["input"], tokens["uncachedInput"]) == (1521, 321)
    assert (tokens["cacheRead"], tokens["cacheWrite"]) == (1000, 200)
    assert tokens["source"] == "provider-reported"
    # No prices in the plan: no cost, and the report says how to get one.
    assert report["prices"] is None and group(report, "A")["cost"] is None
    markdown = render_markdown(report)
    assert "the plan gives no prices" in markdown
    assert "input tokens uncached/cache read/cache written 321/1000/200;" in markdown
