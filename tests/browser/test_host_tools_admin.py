"""An operator registers a host tool in the admin and binds it to a draft (contract §11)."""

from __future__ import annotations

import json

import pytest

from agents.models import AgentVersion, Tool
from agents.services import agent_create, application_create
from tests.browser.playwright_sync import expect

pytestmark = pytest.mark.browser

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "minLength": 1}},
    "required": ["city"],
    "additionalProperties": False,
}


@pytest.fixture
def operator_setup(transactional_db):
    application, _key = application_create(name="ACME")
    return agent_create(application=application, name="weather")


def test_operator_registers_a_host_tool_and_binds_it_to_a_draft(
    live_server, page, log_in, screenshot, operator_setup
):
    agent = operator_setup
    base = live_server.url
    log_in(base)

    # Register: a schema the runtime cannot check (its $ref would need a fetch) is refused
    # next to its field.
    page.goto(f"{base}/admin/agents/tool/add/")
    page.select_option("#id_application", label="ACME")
    page.fill("#id_name", "get_weather")
    page.fill("#id_description", "Weather forecast for a city.")
    remote = {**SCHEMA, "properties": {"city": {"$ref": "https://example.com/city.json"}}}
    page.fill("#id_input_schema", json.dumps(remote))
    page.click("input[name=_continue]")
    errors = page.locator(".form-row.field-input_schema .errorlist")
    expect(errors).to_contain_text("invalid_input_schema")
    expect(errors).to_contain_text('$.properties.city["$ref"]')
    expect(errors).to_contain_text("never fetched")
    screenshot("20-host-tool-schema-refused")
    assert not Tool.objects.exists()

    page.fill("#id_input_schema", json.dumps(SCHEMA, indent=2))
    page.click("input[name=_continue]")
    expect(page.locator("ul.messagelist")).to_contain_text("was added successfully")
    expect(page.locator(".form-row.field-versions_list")).to_contain_text("No version binds")
    tool = Tool.objects.get(name="get_weather")
    assert tool.input_schema == SCHEMA and tool.application == agent.application
    screenshot("21-host-tool-registered")

    # Bind it to a new draft of the agent.
    page.goto(f"{base}/admin/agents/agentversion/add/?agent={agent.pk}")
    page.fill("#id_system_prompt", "You answer weather questions.\n{{context_protocol}}")
    page.select_option("#id_model_provider", "external")
    page.fill("#id_model_name", "host-model")
    page.fill("#id_max_input_tokens", "8000")
    page.select_option("#id_tools", label="ACME / get_weather")
    page.click("input[name=_continue]")
    expect(page.locator("ul.messagelist")).to_contain_text("was added successfully")
    expect(page.locator("#id_tools option:checked")).to_have_text("ACME / get_weather")
    screenshot("22-draft-binds-host-tool")
    draft = AgentVersion.objects.get(agent=agent)
    assert draft.status == "draft" and list(draft.tools.all()) == [tool]

    # The tool page lists the draft that binds it.
    page.goto(f"{base}/admin/agents/tool/{tool.pk}/change/")
    expect(page.locator(".form-row.field-versions_list")).to_contain_text("weather v1")
    expect(page.locator(".form-row.field-versions_list")).to_contain_text("draft")
