"""Host tool admin (contract §11): register, change and delete through the services, per
Application,
and bind tools to a draft on the AgentVersion page."""

from __future__ import annotations

import json
import uuid

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.models import AgentVersion, Tool
from agents.services import (
    agent_create,
    agent_version_create,
    agent_version_publish,
    agent_version_update_draft,
    application_create,
)
from agents.services_tools import tool_create
from tests.admin.test_agentversion_admin import draft_post, form_row

ADD_URL = "/admin/agents/tool/add/"
LIST_URL = "/admin/agents/tool/"
SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def change_url(tool: Tool) -> str:
    return f"/admin/agents/tool/{tool.pk}/change/"


def delete_url(tool: Tool) -> str:
    return f"/admin/agents/tool/{tool.pk}/delete/"


def tool_post(application, **overrides) -> dict:
    data = {
        "application": str(application.pk),
        "name": "lookup",
        "description": "Look a price up.",
        "input_schema": json.dumps(SCHEMA),
    }
    data.update(overrides)
    return data


@pytest.fixture
def acme(published_version):
    """A published version's Application, with a draft of another agent."""
    version = published_version("Acme")
    return version.agent.application


@pytest.fixture
def operator(superuser, admin_client_for):
    return admin_client_for(superuser)


def make_tool(application, name: str = "lookup") -> Tool:
    return tool_create(application=application, name=name, input_schema=SCHEMA)


def draft_binding(application, tools: list[Tool]) -> AgentVersion:
    agent = agent_create(application=application, name=f"drafter-{uuid.uuid4().hex[:8]}")
    return agent_version_create(
        agent=agent,
        fields={"context_protocol_id": "unified", "context_protocol_version": 2},
        tool_ids=[t.pk for t in tools],
    )


def published_binding(application, tools: list[Tool]) -> AgentVersion:
    draft = draft_binding(application, tools)
    agent_version_update_draft(
        version=draft,
        fields={
            "system_prompt": "Help.\n{{context_protocol}}",
            "model_provider": "external",
            "model_name": "m",
            "max_input_tokens": 8000,
        },
    )
    return agent_version_publish(version=draft)


# ---------------------------------------------------------------- registration


def test_an_operator_registers_a_tool_through_the_service(operator, acme):
    response = operator.post(ADD_URL, tool_post(acme))
    assert response.status_code == 302, response.content.decode()[:2000]
    tool = Tool.objects.get(application=acme, name="lookup")
    assert (tool.description, tool.input_schema) == ("Look a price up.", SCHEMA)


def test_the_add_form_starts_from_an_empty_object_schema_and_says_what_schemas_it_takes(
    operator, acme
):
    html = operator.get(ADD_URL).content.decode()
    row = form_row(html, "input_schema")
    assert "&quot;type&quot;: &quot;object&quot;" in row
    assert "JSON Schema 2020-12 object schema" in row
    assert "<code>$ref</code> only local" in row and "nothing is fetched" in row
    assert "checked formats: date, date-time, email" in row


@pytest.mark.parametrize(
    ("overrides", "field", "says"),
    [
        ({"input_schema": json.dumps({"type": "array"})}, "input_schema", "invalid_input_schema"),
        (
            {"input_schema": json.dumps({"type": "object", "properties": {"q": {"format": 1}}})},
            "input_schema",
            "$.properties.q.format",
        ),
        (
            {
                "input_schema": json.dumps(
                    {"type": "object", "properties": {"q": {"$ref": "https://example.com/q"}}}
                )
            },
            "input_schema",
            "never fetched",
        ),
        ({"input_schema": "{not json"}, "input_schema", "Enter a valid JSON"),
        ({"name": "context_fold_create"}, "name", "tool_name_reserved"),
        ({"name": "has space"}, "name", "tool_name_invalid"),
    ],
)
def test_a_refused_registration_is_shown_next_to_its_field(operator, acme, overrides, field, says):
    response = operator.post(ADD_URL, tool_post(acme, **overrides))
    assert response.status_code == 200
    html = response.content.decode()
    assert says in form_row(html, field)
    assert not Tool.objects.exists()


def test_a_taken_name_is_shown_next_to_the_name(operator, acme):
    make_tool(acme)
    html = operator.post(ADD_URL, tool_post(acme)).content.decode()
    assert "tool_name_taken" in form_row(html, "name")
    assert Tool.objects.count() == 1


# ---------------------------------------------------------------- change and delete


def test_a_tool_only_drafts_use_is_changed_through_the_service(operator, acme):
    tool = make_tool(acme)
    draft_binding(acme, [tool])
    schema = {"type": "object", "properties": {"sku": {"type": "string"}}}
    data = tool_post(acme, name="price", input_schema=json.dumps(schema))
    data.pop("application")  # read-only on the change page
    response = operator.post(change_url(tool), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    tool.refresh_from_db()
    assert (tool.name, tool.input_schema) == ("price", schema)


def test_a_tool_a_published_version_uses_is_read_only_and_says_why(operator, acme):
    tool = make_tool(acme)
    version = published_binding(acme, [tool])
    html = operator.get(change_url(tool)).content.decode()
    assert 'name="input_schema"' not in html and 'name="name"' not in html
    bound = form_row(html, "versions_list")
    assert f"/admin/agents/agentversion/{version.pk}/change/" in bound and "published" in bound
    data = tool_post(acme, description="changed")
    assert operator.post(change_url(tool), data).status_code == 403
    tool.refresh_from_db()
    assert tool.description == ""


def test_deleting_a_tool_drafts_use_unbinds_it(operator, acme):
    tool = make_tool(acme)
    kept = make_tool(acme, "kept")
    draft = draft_binding(acme, [tool, kept])
    assert operator.get(delete_url(tool)).status_code == 200
    response = operator.post(delete_url(tool), {"post": "yes"})
    assert response.status_code == 302
    assert not Tool.objects.filter(pk=tool.pk).exists()
    assert list(draft.tools.all()) == [kept]


def test_deleting_a_tool_a_published_version_uses_is_refused_with_the_versions(operator, acme):
    tool = make_tool(acme)
    version = published_binding(acme, [tool])
    for response in (
        operator.get(delete_url(tool)),
        operator.post(delete_url(tool), {"post": "y"}),
    ):
        assert response.status_code == 302 and response.url == change_url(tool)
    page = operator.get(change_url(tool)).content.decode()
    assert "cannot be deleted" in page and f"{version.agent.name} v{version.number}" in page
    assert Tool.objects.filter(pk=tool.pk).exists()
    assert list(version.tools.all()) == [tool]


def test_the_changelist_offers_no_bulk_delete(operator, acme):
    make_tool(acme)
    html = operator.get(LIST_URL).content.decode()
    assert "lookup" in html and "delete_selected" not in html


def test_the_changelist_query_count_does_not_grow_with_tools(operator, acme):
    make_tool(acme)

    def measure() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert operator.get(LIST_URL).status_code == 200
        return len(queries)

    few = measure()
    for n in range(15):
        tool = make_tool(acme, f"tool{n}")
        draft_binding(acme, [tool])
    assert measure() == few


# ---------------------------------------------------------------- per Application


@pytest.fixture
def alice(staff_member, published_version):
    alpha = published_version("Alpha", agent_name="alpha-agent").agent.application
    bravo = published_version("Bravo", agent_name="bravo-agent").agent.application
    user = staff_member("alice", alpha)
    user.user_permissions.add(
        *Permission.objects.filter(codename__in=["add_tool", "change_tool", "delete_tool"])
    )
    return user, alpha, bravo


def test_staff_see_and_reach_only_their_applications_tools(client, alice):
    user, alpha, bravo = alice
    mine, theirs = make_tool(alpha, "alpha_tool"), make_tool(bravo, "bravo_tool")
    client.force_login(user)
    html = client.get(LIST_URL).content.decode()
    assert "alpha_tool" in html and "bravo_tool" not in html
    response = client.get(change_url(theirs), follow=True)
    assert (
        response.redirect_chain[-1][0] == "/admin/"
        and "bravo_tool" not in response.content.decode()
    )
    assert client.post(delete_url(theirs), {"post": "yes"}).status_code == 302
    assert Tool.objects.filter(pk=theirs.pk).exists()
    assert client.get(change_url(mine)).status_code == 200


def test_staff_register_tools_only_in_their_applications(client, alice):
    user, alpha, bravo = alice
    client.force_login(user)
    html = client.get(ADD_URL).content.decode()
    assert "Alpha" in form_row(html, "application") and "Bravo" not in html
    refused = client.post(ADD_URL, tool_post(bravo))
    assert "Select a valid choice" in form_row(refused.content.decode(), "application")
    assert client.post(ADD_URL, tool_post(alpha)).status_code == 302
    assert list(Tool.objects.values_list("application__name", "name")) == [("Alpha", "lookup")]


# ---------------------------------------------------------------- binding on the AgentVersion page


def test_the_version_forms_offer_only_the_applications_tools(client, alice):
    user, alpha, bravo = alice
    mine, theirs = make_tool(alpha, "alpha_tool"), make_tool(bravo, "bravo_tool")
    draft = draft_binding(alpha, [])
    client.force_login(user)
    add = form_row(client.get("/admin/agents/agentversion/add/").content.decode(), "tools")
    assert f'value="{mine.pk}"' in add and "Alpha / alpha_tool" in add
    assert str(theirs.pk) not in add
    change = client.get(f"/admin/agents/agentversion/{draft.pk}/change/").content.decode()
    assert f'value="{mine.pk}"' in form_row(change, "tools")
    assert str(theirs.pk) not in change


def test_an_operator_binds_a_registered_tool_to_a_draft(operator, acme):
    tool = make_tool(acme)
    agent = acme.agents.get()
    response = operator.post("/admin/agents/agentversion/add/", draft_post(agent, tools=[tool.pk]))
    assert response.status_code == 302, response.content.decode()[:3000]
    draft = AgentVersion.objects.get(agent=agent, status="draft")
    assert list(draft.tools.all()) == [tool]


def test_a_tool_of_another_application_is_refused_on_the_version_form(operator, acme):
    other, _ = application_create(name="Other")
    foreign = make_tool(other, "foreign")
    agent = acme.agents.get()
    response = operator.post(
        "/admin/agents/agentversion/add/", draft_post(agent, tools=[foreign.pk])
    )
    assert response.status_code == 200
    assert "another application" in form_row(response.content.decode(), "tools")
    assert not AgentVersion.objects.filter(agent=agent, status="draft").exists()
