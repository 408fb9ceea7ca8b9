"""`model.prices` is checked at publish (contract §8): all four prices, numbers >= 0, or null."""

from __future__ import annotations

import pytest

from tests.api.test_agents_api import GOOD_VERSION, new_agent, new_version

PRICES = {"input": 3, "cacheRead": 0.3, "cacheWrite": 3.75, "output": 15}


def _publish(client, prices):
    agent_id = new_agent(client)
    draft = new_version(client, agent_id, model={**GOOD_VERSION["model"], "prices": prices})
    return draft, client.post(f"agent-versions/{draft['id']}/publish/")


@pytest.mark.parametrize("prices", [PRICES, None, {**PRICES, "cacheRead": 0, "output": 0.0}])
def test_complete_prices_or_none_publish_and_read_back(tenant, prices):
    _, client = tenant()
    _, published = _publish(client, prices)
    assert published.status_code == 200, published.content
    assert published.json()["model"]["prices"] == prices


@pytest.mark.parametrize(
    ("prices", "expected"),
    [
        (
            {"input": 3, "output": 15},
            {
                ("model.prices.cacheRead", "price_required"),
                ("model.prices.cacheWrite", "price_required"),
            },
        ),
        ({**PRICES, "input": -0.01}, {("model.prices.input", "price_out_of_range")}),
        ({**PRICES, "output": 1e12}, {("model.prices.output", "price_out_of_range")}),
        ({**PRICES, "cacheWrite": "3.75"}, {("model.prices.cacheWrite", "price_wrong_type")}),
        ({**PRICES, "cacheRead": True}, {("model.prices.cacheRead", "price_wrong_type")}),
        ({**PRICES, "cacheRead": None}, {("model.prices.cacheRead", "price_wrong_type")}),
        ({**PRICES, "currency": 1}, {("model.prices.currency", "price_unknown")}),
        ({}, {(f"model.prices.{k}", "price_required") for k in PRICES}),
    ],
)
def test_bad_prices_are_publish_errors_naming_the_price(tenant, prices, expected):
    _, client = tenant()
    draft, refused = _publish(client, prices)
    assert refused.status_code == 400, refused.content
    error = refused.json()["error"]
    assert error["code"] == "agent_version_invalid"
    found = {(e["field"], e["code"]) for e in error["details"]["errors"]}
    assert found == expected
    assert all(e["message"] for e in error["details"]["errors"])
    assert client.get(f"agent-versions/{draft['id']}/").json()["status"] == "draft"


def test_prices_problems_sit_beside_the_other_model_problems(tenant):
    _, client = tenant()
    agent_id = new_agent(client)
    draft = new_version(
        client,
        agent_id,
        model={**GOOD_VERSION["model"], "maxInputTokens": 10, "prices": {"input": -1}},
    )
    refused = client.post(f"agent-versions/{draft['id']}/publish/")
    fields = {e["field"] for e in refused.json()["error"]["details"]["errors"]}
    assert {"model.maxInputTokens", "model.prices.input", "model.prices.output"} <= fields


def test_prices_that_are_not_an_object_are_refused_at_the_write(tenant):
    _, client = tenant()
    agent_id = new_agent(client)
    response = client.post(
        f"agents/{agent_id}/versions/",
        {**GOOD_VERSION, "model": {**GOOD_VERSION["model"], "prices": [3, 15]}},
    )
    assert response.status_code == 400
    assert response.json()["error"]["details"]["errors"][0]["field"] == "model.prices"
