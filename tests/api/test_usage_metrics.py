"""/metrics counts recorded tokens by kind and their cost per agent version (contract §8)."""

from __future__ import annotations

import pytest

from contextproto import metrics
from tests.api.test_observability import sample, scrape

PRICES = {"input": 3, "cacheRead": 0.3, "cacheWrite": 3.75, "output": 15}
TOKENS = "contextproto_model_tokens_total"
COST = "contextproto_model_cost_total"
KINDS = ("input_uncached", "cache_read", "cache_write", "output")


@pytest.fixture(autouse=True)
def fresh_labels(monkeypatch, settings):
    settings.METRICS_TOKEN = "scrape-secret"
    monkeypatch.setattr(metrics, "_labelled_versions", set())


def _counts(body: str, label: str) -> dict[str, float]:
    found = {kind: sample(body, TOKENS, agent_version=label, kind=kind) for kind in KINDS}
    found["cost"] = sample(body, COST, agent_version=label)
    return found


def _report(s, usage: dict) -> dict:
    snapshot = s.project()["snapshotId"]
    answer = s.client.post(s.path(f"snapshots/{snapshot}/usage/"), usage)
    assert answer.status_code == 200, answer.content
    return answer.json()


@pytest.mark.django_db(transaction=True)
def test_a_report_moves_the_counters_once_after_commit(api_session):
    s = api_session(prices=PRICES)
    s.input("quote")
    label = str(s.agent_version.id)
    before = _counts(scrape(), label)
    usage = {
        "inputTokens": 10_000,
        "outputTokens": 200,
        "cachedInputTokens": 8_000,
        "cacheWriteInputTokens": 1_500,
    }
    _report(s, usage)
    after = _counts(scrape(), label)
    moved = {key: round(after[key] - before[key], 9) for key in after}
    # cost: (500 x 3 + 8000 x 0.3 + 1500 x 3.75 + 200 x 15) / 1e6
    assert moved == {
        "input_uncached": 500,
        "cache_read": 8000,
        "cache_write": 1500,
        "output": 200,
        "cost": 0.012525,
    }
    # A retry of the same report is a replay: the turn is not counted twice.
    snapshot = s.client.get(s.path("snapshots/")).json()["snapshots"][0]["snapshotId"]
    replay = s.client.post(s.path(f"snapshots/{snapshot}/usage/"), usage)
    assert replay.json()["replayed"] is True
    assert _counts(scrape(), label) == after


@pytest.mark.django_db(transaction=True)
def test_a_refused_report_counts_nothing(api_session):
    s = api_session(prices=PRICES)
    s.input("quote")
    label = str(s.agent_version.id)
    before = _counts(scrape(), label)
    snapshot = s.project()["snapshotId"]
    refused = s.client.post(
        s.path(f"snapshots/{snapshot}/usage/"),
        {"inputTokens": 10, "outputTokens": 1, "cacheReadInputTokens": 11},
    )
    assert refused.status_code == 400
    assert _counts(scrape(), label) == before


@pytest.mark.django_db(transaction=True)
def test_versions_beyond_the_label_cap_are_counted_as_other(api_session, settings):
    settings.METRICS_AGENT_VERSION_LABELS = 1
    first = api_session(prices=PRICES)
    second = api_session(version=1, prices=PRICES)
    other_before = _counts(scrape(), metrics.OTHER_VERSIONS)
    for s in (first, second):
        s.input("quote")
        _report(s, {"inputTokens": 100, "outputTokens": 10})
    body = scrape()
    assert _counts(body, str(first.agent_version.id))["input_uncached"] == 100
    assert f'agent_version="{second.agent_version.id}"' not in body
    other = _counts(body, metrics.OTHER_VERSIONS)
    assert other["input_uncached"] - other_before["input_uncached"] == 100
    assert round(other["cost"] - other_before["cost"], 9) == 0.00045  # (100 x 3 + 10 x 15) / 1e6
