"""AgentVersion admin: the `model.promptCache` fields generated from their schema (contract §8)."""

from __future__ import annotations

import re

import pytest

from agents.models import AgentVersion
from agents.services import agent_create, agent_version_update_draft, application_create
from tests.admin.test_agentversion_admin import ADD_URL, change_url, draft_post, form_row


@pytest.fixture
def agent(db):
    application, _ = application_create(name="Acme")
    return agent_create(application=application, name="planner")


@pytest.fixture
def operator(superuser, admin_client_for):
    return admin_client_for(superuser)


def test_the_form_has_typed_prompt_cache_fields_with_defaults(operator, agent):
    html = operator.get(ADD_URL + f"?protocol=unified@2&agent={agent.pk}").content.decode()
    mode = form_row(html, "prompt_cache_mode")
    assert '<select name="prompt_cache_mode"' in mode
    assert re.search(r'value="auto"[^>]*selected', mode) and 'value="off"' in mode
    assert "One of auto, off." in mode and "Default: auto." in mode
    ttl = form_row(html, "prompt_cache_ttl")
    assert '<select name="prompt_cache_ttl"' in ttl
    assert re.search(r'value="5m"[^>]*selected', ttl) and 'value="1h"' in ttl
    assert "Cache lifetime (Anthropic)" in ttl
    assert "Prompt caching" in html  # the fieldset
    assert 'name="prompt_cache"' not in html  # no raw JSON box


def test_saving_stores_only_values_that_differ_from_the_defaults(operator, agent):
    response = operator.post(
        ADD_URL, draft_post(agent, prompt_cache_mode="auto", prompt_cache_ttl="1h")
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    version = AgentVersion.objects.get(agent=agent)
    assert version.prompt_cache == {"ttl": "1h"}
    html = operator.get(change_url(version)).content.decode()
    assert re.search(r'value="1h"[^>]*selected', form_row(html, "prompt_cache_ttl"))
    edit = draft_post(agent, prompt_cache_mode="off", prompt_cache_ttl="5m")
    edit.pop("agent")
    assert operator.post(change_url(version), edit).status_code == 302
    version.refresh_from_db()
    assert version.prompt_cache == {"mode": "off"}


def test_publish_problems_show_next_to_the_prompt_cache_fields(operator, agent):
    operator.post(ADD_URL, draft_post(agent))
    version = AgentVersion.objects.get(agent=agent)
    agent_version_update_draft(
        version=version, fields={"prompt_cache": {"mode": "always", "ttl": "1h", "size": 1}}
    )
    operator.post(f"/admin/agents/agentversion/{version.pk}/publish/")
    html = operator.get(change_url(version)).content.decode()
    mode = form_row(html, "prompt_cache_mode")
    assert "errorlist" in mode and "prompt_cache_invalid_value" in mode
    assert "always (not allowed)" in mode  # the stored value stays visible
    assert "errorlist" not in form_row(html, "prompt_cache_ttl")
    assert "prompt_cache_unknown_key" in html and "model.promptCache has no key size" in html
    # Saving the form keeps the fields' values and drops the unknown key, saying so.
    edit = draft_post(agent, prompt_cache_mode="auto", prompt_cache_ttl="1h")
    edit.pop("agent")
    saved = operator.post(change_url(version), edit, follow=True).content.decode()
    assert "Dropped unknown model.promptCache keys: size." in saved
    version.refresh_from_db()
    assert version.prompt_cache == {"ttl": "1h"}


def test_a_published_version_shows_its_setting_read_only(operator, published_version):
    version = published_version(prompt_cache={"ttl": "1h"})
    assert version.prompt_cache == {"mode": "auto", "ttl": "1h"}
    html = operator.get(change_url(version)).content.decode()
    assert 'name="prompt_cache_mode"' not in html
    # The generated model-settings table shows the setting in effect.
    assert re.search(r'data-setting="model.promptCache.mode"><th>[^<]+</th><td><code>auto<', html)
    assert re.search(r'data-setting="model.promptCache.ttl"><th>[^<]+</th><td><code>1h<', html)
