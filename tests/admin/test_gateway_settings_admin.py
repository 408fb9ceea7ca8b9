"""An Application's gateway settings page (contract §14) and what publish reports on a version's
page: aliases and side models edited with the API's checks, each problem on its line."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission

from agents.models import AgentVersion, GatewaySettings
from agents.services import agent_create, agent_version_create, agent_version_publish
from agents.services_gateway import gateway_settings_set
from contextproto.protocol.gateway.model_names import DEFAULT_SIDE_MODELS

UNSET_VARIABLE = "CONTEXTPROTO_ADMIN_TEST_KEY_NOT_SET"


def page_url(application) -> str:
    return f"/admin/agents/application/{application.pk}/gateway-settings/"


@pytest.fixture
def acme(published_version):
    """An Application with helper@1 (scripted) beside its published external version."""
    application = published_version("Acme").agent.application
    agent = agent_create(application=application, name="helper")
    draft = agent_version_create(
        agent=agent,
        fields={
            "system_prompt": "You help.\n{{context_protocol}}",
            "context_protocol_id": "unified",
            "context_protocol_version": 2,
            "options": {},
            "model_provider": "scripted",
            "model_name": "script",
            "max_input_tokens": 8000,
            "model_config": {"steps": [{"text": "Hi."}]},
        },
    )
    agent_version_publish(version=draft)
    return application


@pytest.fixture
def operator(superuser, admin_client_for):
    return admin_client_for(superuser)


def test_the_application_page_links_its_gateway_settings(operator, acme):
    gateway_settings_set(
        application=acme,
        model_aliases=[{"pattern": "claude-*", "agentVersion": "helper@1"}],
        side_models=None,
    )
    page = operator.get(f"/admin/agents/application/{acme.pk}/change/").content.decode()
    assert page_url(acme) in page
    assert "1 model alias(es), side models: default" in page


def test_an_operator_saves_aliases_and_side_models_line_by_line(operator, acme):
    shown = operator.get(page_url(acme))
    assert shown.status_code == 200
    text = shown.content.decode()
    assert all(glob in text for glob in DEFAULT_SIDE_MODELS)
    [checkbox] = re.findall(r'<input[^>]*name="default_side_models"[^>]*>', text)
    assert "checked" in checkbox  # no settings yet: the default side models
    saved = operator.post(
        page_url(acme),
        {
            "model_aliases": "claude-* = helper@1\n\n  gpt-5* = helper  \n",
            "side_models": "*-mini\ntitle-model",
        },
    )
    assert saved.status_code == 302, saved.content.decode()[-2000:]
    row = GatewaySettings.objects.get(application=acme)
    assert row.model_aliases == [
        {"pattern": "claude-*", "agentVersion": "helper@1"},
        {"pattern": "gpt-5*", "agentVersion": "helper"},
    ]
    assert row.side_models == ["*-mini", "title-model"]
    again = operator.get(page_url(acme)).content.decode()
    assert "claude-* = helper@1" in again and "title-model" in again
    # Ticking the default drops the operator's list.
    operator.post(page_url(acme), {"model_aliases": "", "default_side_models": "on"})
    row.refresh_from_db()
    assert (row.model_aliases, row.side_models) == ([], None)


def test_problems_are_shown_on_their_lines_and_nothing_is_saved(operator, acme):
    AgentVersion.objects.filter(agent__name="helper").update(status="archived")
    refused = operator.post(
        page_url(acme),
        {
            "model_aliases": "claude-* = helper@1\nno separator here\n",
            "side_models": "",
            "default_side_models": "on",
        },
    )
    assert refused.status_code == 200
    assert "Line 2: write pattern = version." in refused.content.decode()
    refused = operator.post(
        page_url(acme),
        {"model_aliases": "ok-* = assistant@1\n\nclaude * = helper@1", "side_models": "a\na"},
    )
    text = refused.content.decode()
    assert "Line 3: modelAliases[1].pattern must not hold spaces" in text
    assert "Line 3: modelAliases[1].agentVersion: helper@1 is archived" in text
    assert "(agent_version_archived)" in text
    assert "Line 2: sideModels[1]: &#x27;a&#x27; is also sideModels[0]" in text
    assert not GatewaySettings.objects.filter(application=acme).exists()


def test_a_member_without_the_change_permission_reads_the_settings(
    acme, staff_member, admin_client_for, published_version
):
    gateway_settings_set(
        application=acme,
        model_aliases=[{"pattern": "claude-*", "agentVersion": "helper@1"}],
        side_models=["*-mini"],
    )
    member = staff_member("member", acme)
    client = admin_client_for(member)
    shown = client.get(page_url(acme))
    assert shown.status_code == 200
    text = shown.content.decode()
    assert "<code>claude-*</code>" in text and "<code>*-mini</code>" in text
    assert 'id="gateway-settings-form"' not in text
    assert client.post(page_url(acme), {"model_aliases": ""}).status_code == 403
    # With the permission, the form; an Application they are no member of stays hidden.
    member.user_permissions.add(Permission.objects.get(codename="change_gatewaysettings"))
    client = admin_client_for(type(member).objects.get(pk=member.pk))
    assert 'id="gateway-settings-form"' in client.get(page_url(acme)).content.decode()
    other = published_version("Other").agent.application
    assert client.get(page_url(other)).status_code == 404


def test_the_page_costs_a_fixed_number_of_queries(operator, acme, django_assert_max_num_queries):
    gateway_settings_set(
        application=acme,
        model_aliases=[{"pattern": f"m{n}-*", "agentVersion": "helper@1"} for n in range(20)],
        side_models=None,
    )
    with django_assert_max_num_queries(8):
        assert operator.get(page_url(acme)).status_code == 200


def test_a_version_page_says_when_its_key_variable_is_unset_here(operator, acme, monkeypatch):
    monkeypatch.delenv(UNSET_VARIABLE, raising=False)
    agent = agent_create(application=acme, name="keyed")
    version = agent_version_create(
        agent=agent,
        fields={
            "system_prompt": "You help.\n{{context_protocol}}",
            "context_protocol_id": "unified",
            "context_protocol_version": 2,
            "options": {},
            "model_provider": "openai",
            "model_name": "gpt-4.1",
            "max_input_tokens": 8000,
            "model_config": {"apiKeyEnv": UNSET_VARIABLE},
        },
    )
    published = operator.post(
        f"/admin/agents/agentversion/{version.pk}/publish/", follow=True
    ).content.decode()
    assert "is published and now read-only" in published
    assert 'id="model-warnings"' in published
    assert f"model.config.apiKeyEnv names {UNSET_VARIABLE}" in published
    monkeypatch.setenv(UNSET_VARIABLE, "sk-test")
    page = operator.get(f"/admin/agents/agentversion/{version.pk}/change/").content.decode()
    assert 'id="model-warnings"' not in page
