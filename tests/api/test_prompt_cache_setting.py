"""`model.promptCache` over HTTP (contract §8): effective value, publish validation, normalizing."""

from __future__ import annotations

from agents.models import AgentVersion
from tests.api.test_agents_api import GOOD_VERSION, new_agent, new_version


def _model(**prompt_cache) -> dict:
    return {**GOOD_VERSION["model"], "promptCache": prompt_cache}


def test_the_api_answers_the_effective_setting(tenant):
    _, client = tenant()
    draft = new_version(client, new_agent(client))
    assert draft["model"]["promptCache"] == {"mode": "auto", "ttl": "5m"}
    # The row keeps what was sent: {} means the defaults until publish pins them.
    assert AgentVersion.objects.get(pk=draft["id"]).prompt_cache == {}
    off = new_version(client, new_agent(client, "quiet"), model=_model(mode="off"))
    assert off["model"]["promptCache"] == {"mode": "off", "ttl": "5m"}
    read = client.get(f"agent-versions/{off['id']}/").json()
    assert read["model"]["promptCache"] == {"mode": "off", "ttl": "5m"}


def test_publish_stores_the_setting_normalized(tenant):
    _, client = tenant()
    draft = new_version(client, new_agent(client), model=_model(ttl="1h"))
    published = client.post(f"agent-versions/{draft['id']}/publish/")
    assert published.status_code == 200, published.content
    assert published.json()["model"]["promptCache"] == {"mode": "auto", "ttl": "1h"}
    assert AgentVersion.objects.get(pk=draft["id"]).prompt_cache == {"mode": "auto", "ttl": "1h"}
    copy = client.post(f"agent-versions/{draft['id']}/duplicate/").json()
    assert copy["model"]["promptCache"] == {"mode": "auto", "ttl": "1h"}


def test_publish_lists_every_prompt_cache_problem_with_its_field(tenant):
    _, client = tenant()
    draft = new_version(
        client,
        new_agent(client),
        options={"pageSize": 5},
        model=_model(mode="always", ttl=60, size="big"),
    )
    response = client.post(f"agent-versions/{draft['id']}/publish/")
    assert response.status_code == 400
    errors = response.json()["error"]["details"]["errors"]
    by_field = {e["field"]: e for e in errors}
    assert {(e["field"], e["code"]) for e in errors} >= {
        ("options.pageSize", "option_out_of_range"),
        ("model.promptCache.mode", "prompt_cache_invalid_value"),
        ("model.promptCache.ttl", "prompt_cache_invalid_value"),
        ("model.promptCache.size", "prompt_cache_unknown_key"),
    }
    assert "auto, off" in by_field["model.promptCache.mode"]["message"]
    assert "must be a string" in by_field["model.promptCache.ttl"]["message"]
    assert "known keys: mode, ttl" in by_field["model.promptCache.size"]["message"]
    stored = AgentVersion.objects.get(pk=draft["id"])
    assert stored.status == "draft"
    assert stored.prompt_cache == {"mode": "always", "ttl": 60, "size": "big"}
    # Fixed with a PATCH, the version publishes.
    fixed = client.patch(
        f"agent-versions/{draft['id']}/", {"options": {}, "model": _model(mode="off")}
    )
    assert fixed.status_code == 200, fixed.content
    published = client.post(f"agent-versions/{draft['id']}/publish/")
    assert published.status_code == 200, published.content
    assert published.json()["model"]["promptCache"] == {"mode": "off", "ttl": "5m"}


def test_a_prompt_cache_that_is_not_an_object_is_refused_at_the_write(tenant):
    _, client = tenant()
    response = client.post(
        f"agents/{new_agent(client)}/versions/",
        {**GOOD_VERSION, "model": {**GOOD_VERSION["model"], "promptCache": "auto"}},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"
    assert "promptCache" in response.content.decode()
