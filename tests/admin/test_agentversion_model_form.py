"""AgentVersion admin: the model settings as typed fields generated from the model schema."""

from __future__ import annotations

import re

import pytest

from agents.model_schema import MODEL_FIELDS
from agents.models import AgentVersion
from agents.services import agent_create, agent_version_create, application_create
from tests.admin.test_agentversion_admin import ADD_URL, change_url, draft_post, form_row
from tests.builders.sessions import SYSTEM_PROMPT


@pytest.fixture
def agent(db):
    application, _ = application_create(name="Acme")
    return agent_create(application=application, name="planner")


@pytest.fixture
def operator(superuser, admin_client_for):
    return admin_client_for(superuser)


def edit_post(agent, **overrides) -> dict:
    data = draft_post(agent, **overrides)
    data.pop("agent")
    return data


def test_every_model_setting_is_a_typed_field_with_its_rule_and_no_json_box_for_them(
    operator, agent
):
    html = operator.get(ADD_URL + f"?agent={agent.pk}").content.decode()
    for field in MODEL_FIELDS:
        row = form_row(html, field.form_name)
        assert f'name="{field.form_name}"' in row, field.name
        assert f"({field.path})" in row  # the help names the API field
    assert '<select name="model_provider"' in form_row(html, "model_provider")
    tokens = form_row(html, "max_input_tokens")
    assert 'type="number"' in tokens and 'min="1000"' in tokens
    assert "Must be an integer of at least 1000." in tokens
    ratio = form_row(html, "maintenance_trigger_ratio")
    assert 'value="0.75"' in ratio and "Must be strictly between 0 and 1." in ratio
    assert 'type="number"' in form_row(html, "price_cacheWrite")
    assert "environment variable name" in form_row(html, "config_apiKeyEnv")
    for title in ("Connection", "Prompt caching", "Prices per million tokens"):
        assert "<h2" in html and title in html
    assert 'name="model_config"' not in html and 'name="prices"' not in html


def test_saving_stores_each_setting_where_the_schema_says(operator, agent):
    response = operator.post(
        ADD_URL,
        draft_post(
            agent,
            model_provider="openai",
            model_name="gpt-5-mini",
            config_baseUrl="https://llm.internal/v1",
            config_apiKeyEnv="TEAM2_OPENAI_KEY",
            config_maxOutputTokens="2048",
            config_timeoutSeconds="",
            price_input="1.25",
            price_cacheRead="0.125",
            price_cacheWrite="0",
            price_output="10",
            prompt_cache_mode="off",
            prompt_cache_ttl="5m",
            model_config_extra='{"maxTokensParam": "max_tokens"}',
        ),
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    version = AgentVersion.objects.get(agent=agent)
    assert version.model_provider == "openai" and version.model_name == "gpt-5-mini"
    assert version.model_config == {
        "maxTokensParam": "max_tokens",
        "baseUrl": "https://llm.internal/v1",
        "apiKeyEnv": "TEAM2_OPENAI_KEY",
        "maxOutputTokens": 2048,
    }
    assert version.prices == {"input": 1.25, "cacheRead": 0.125, "cacheWrite": 0, "output": 10}
    assert version.prompt_cache == {"mode": "off"}

    # The change page shows each stored value in its field, the rest in the JSON box.
    html = operator.get(change_url(version)).content.decode()
    assert 'value="https://llm.internal/v1"' in form_row(html, "config_baseUrl")
    assert 'value="2048"' in form_row(html, "config_maxOutputTokens")
    assert 'value="1.25"' in form_row(html, "price_input")
    extra = form_row(html, "model_config_extra")
    assert "maxTokensParam" in extra and "baseUrl" not in extra

    # Emptying the prices and a connection field removes them.
    assert (
        operator.post(
            change_url(version), edit_post(agent, model_provider="openai", model_name="gpt")
        ).status_code
        == 302
    )
    version.refresh_from_db()
    assert version.prices is None and version.model_config == {}


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "config_baseUrl",
            "llm.internal/v1",
            "model.config.baseUrl must be an http:// or https:// URL.",
        ),
        (
            "config_apiKeyEnv",
            "sk-live-123",
            "model.config.apiKeyEnv must be an environment variable name",
        ),
        (
            "config_maxOutputTokens",
            "0",
            "model.config.maxOutputTokens must be an integer of at least 1.",
        ),
        (
            "config_timeoutSeconds",
            "0",
            "model.config.timeoutSeconds must be strictly between 0 and 3600.",
        ),
    ],
)
def test_a_bad_connection_setting_is_refused_on_its_field(operator, agent, field, value, message):
    response = operator.post(ADD_URL, draft_post(agent, **{field: value}))
    assert response.status_code == 200
    row = form_row(response.content.decode(), field)
    assert "errorlist" in row and message in row
    assert not AgentVersion.objects.filter(agent=agent).exists()


def test_the_json_box_refuses_a_key_that_has_a_field_and_a_non_object(operator, agent):
    html = operator.post(
        ADD_URL, draft_post(agent, model_config_extra='{"baseUrl": "https://x", "steps": []}')
    ).content.decode()
    row = form_row(html, "model_config_extra")
    assert "errorlist" in row and "Set baseUrl in the Connection fields above" in row
    html = operator.post(ADD_URL, draft_post(agent, model_config_extra="[1, 2]")).content.decode()
    assert "Enter a JSON object" in form_row(html, "model_config_extra")
    assert not AgentVersion.objects.filter(agent=agent).exists()


def test_publish_problems_of_model_settings_show_next_to_their_fields(operator, agent):
    saved = operator.post(
        ADD_URL, draft_post(agent, max_input_tokens="500", price_input="3", price_output="-1")
    )
    assert saved.status_code == 302  # a draft may hold what publish refuses
    version = AgentVersion.objects.get(agent=agent)
    operator.post(f"/admin/agents/agentversion/{version.pk}/publish/")
    html = operator.get(change_url(version)).content.decode()
    tokens = form_row(html, "max_input_tokens")
    assert "errorlist" in tokens and "(out_of_range)" in tokens
    assert "price_required" in form_row(html, "price_cacheRead")
    assert "price_out_of_range" in form_row(html, "price_output")
    assert "errorlist" not in form_row(html, "price_input")
    assert "errorlist" not in form_row(html, "model_name")


def test_a_version_written_through_the_api_shows_its_config_split_into_fields(operator, agent):
    version = agent_version_create(
        agent=agent,
        fields={
            "system_prompt": SYSTEM_PROMPT,
            "context_protocol_id": "unified",
            "context_protocol_version": 2,
            "model_provider": "scripted",
            "model_name": "script",
            "max_input_tokens": 8000,
            "model_config": {"timeoutSeconds": 30, "steps": [{"text": "Hello <b>"}]},
        },
    )
    html = operator.get(change_url(version)).content.decode()
    assert 'value="30"' in form_row(html, "config_timeoutSeconds")
    extra = form_row(html, "model_config_extra")
    assert "&quot;steps&quot;" in extra and "Hello &lt;b&gt;" in extra
    assert "timeoutSeconds" not in extra
    # Saving the form unchanged keeps the config as it was.
    data = edit_post(
        agent,
        model_provider="scripted",
        model_name="script",
        config_timeoutSeconds="30",
        model_config_extra='{"steps": [{"text": "Hello <b>"}]}',
    )
    assert operator.post(change_url(version), data).status_code == 302
    version.refresh_from_db()
    assert version.model_config == {"timeoutSeconds": 30, "steps": [{"text": "Hello <b>"}]}


def test_a_published_version_lists_every_model_setting_read_only(operator, published_version):
    version = published_version(
        model_config={"baseUrl": "https://llm.internal/v1", "steps": []},
        prices={"input": 3, "cacheRead": 0.3, "cacheWrite": 3.75, "output": 15},
    )
    html = operator.get(change_url(version)).content.decode()
    assert 'name="config_baseUrl"' not in html and 'name="price_input"' not in html
    for field in MODEL_FIELDS:
        assert f'data-setting="{field.path}"' in html
    assert re.search(r'data-setting="model.prices.cacheWrite"><th>[^<]+</th><td><code>3.75<', html)
    assert re.search(
        r'data-setting="model.config.baseUrl"><th>[^<]+</th><td><code>https://llm.internal/v1<',
        html,
    )
    assert re.search(r'data-setting="model.config.apiKeyEnv"><th>[^<]+</th><td><code>—<', html)
