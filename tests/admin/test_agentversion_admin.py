"""AgentVersion admin: generated option form, saving through services, publish, read-only."""

from __future__ import annotations

import re

import pytest
from django.utils.html import escape

from agents.models import AgentVersion, Tool
from agents.services import agent_create, application_create
from contextproto.protocol import catalog
from tests.builders.sessions import SYSTEM_PROMPT

ADD_URL = "/admin/agents/agentversion/add/"


def change_url(version) -> str:
    return f"/admin/agents/agentversion/{version.pk}/change/"


def form_row(html: str, field: str) -> str:
    """The admin form row of `field` (from its opening div to the next row)."""
    start = html.index(f"field-{field}")
    end = html.find('<div class="form-row', start)
    return html[start : end if end != -1 else len(html)]


def draft_post(agent, **overrides) -> dict:
    data = {
        "agent": str(agent.pk),
        "protocol": "unified@3",
        "options_protocol": "unified@3",
        "option_guiProjection": "on",
        "option_pageSize": "200",
        "option_checkpointMaxCharacters": "3000",
        "option_maxWindows": "128",
        "option_maxFolds": "1024",
        "option_stateMessagePlacement": "trailing_assistant",
        "system_prompt": SYSTEM_PROMPT,
        "model_provider": "external",
        "model_name": "host-model",
        "max_input_tokens": "8000",
        "maintenance_trigger_ratio": "0.75",
        "model_config_extra": "{}",
        "max_turns_per_run": "50",
        "_continue": "Save and continue editing",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


@pytest.fixture
def agent(db):
    application, _ = application_create(name="Acme")
    return agent_create(application=application, name="planner")


@pytest.fixture
def operator(superuser, admin_client_for):
    return admin_client_for(superuser)


def test_generated_option_form_has_typed_inputs_with_defaults_and_ranges(operator, agent):
    html = operator.get(ADD_URL + f"?protocol=unified@3&agent={agent.pk}").content.decode()
    assert 'name="options"' not in html  # no raw JSON box for options
    gui = re.search(r'<input[^>]*name="option_guiProjection"[^>]*>', html).group(0)
    assert 'type="checkbox"' in gui and "checked" in gui
    page = re.search(r'<input[^>]*name="option_pageSize"[^>]*>', html).group(0)
    assert 'type="number"' in page
    assert 'min="10"' in page and 'max="1000"' in page and 'value="200"' in page
    assert "Range 10 to 1000." in form_row(html, "option_pageSize")
    assert "Default: 200." in form_row(html, "option_pageSize")
    checkpoint = re.search(r'<input[^>]*name="option_checkpointMaxCharacters"[^>]*>', html)
    assert 'value="3000"' in checkpoint.group(0)  # unified@3's default, not unified@1's
    placement = form_row(html, "option_stateMessagePlacement")
    assert '<select name="option_stateMessagePlacement"' in placement
    for value in ("trailing_assistant", "before_history_assistant", "trailing_user"):
        assert f'value="{value}"' in placement
    assert re.search(r'value="trailing_assistant"[^>]*selected', placement)
    protocol = form_row(html, "protocol")
    assert 'value="unified@3" selected' in protocol and "unified@3 (experimental)" in protocol


def test_add_form_offers_fields_of_each_protocol(operator, agent):
    html = operator.get(ADD_URL + "?protocol=prefix@2").content.decode()
    assert 'name="option_pageSize"' in html
    assert 'name="option_maxWindows"' not in html  # prefix@2 has no windows
    assert 'name="option_stateMessagePlacement"' not in html
    for key in ("prefix@2", "unified@1", "unified@2", "unified@3"):
        assert f'data-protocol="{key}"' in html


def test_saving_the_form_creates_a_draft_through_the_service(operator, agent):
    response = operator.post(ADD_URL, draft_post(agent, option_pageSize="5"))
    assert response.status_code == 302, response.content.decode()[:2000]
    version = AgentVersion.objects.get(agent=agent)
    assert response["Location"] == change_url(version)
    assert version.number == 1 and version.status == "draft"
    assert version.protocol_key == "unified@3"
    # Only values that differ from the defaults are stored: {} means all defaults.
    assert version.options == {"pageSize": 5}


def test_publish_error_is_shown_next_to_its_option_field(operator, agent):
    operator.post(ADD_URL, draft_post(agent, option_pageSize="5", system_prompt="no placeholder"))
    version = AgentVersion.objects.get(agent=agent)
    response = operator.post(f"/admin/agents/agentversion/{version.pk}/publish/")
    assert response.status_code == 302 and response["Location"] == change_url(version)
    version.refresh_from_db()
    assert version.status == "draft"
    html = operator.get(change_url(version)).content.decode()
    page_row = form_row(html, "option_pageSize")
    assert "errorlist" in page_row and "option_out_of_range" in page_row
    assert "pageSize" in page_row
    prompt_row = form_row(html, "system_prompt")
    assert "errorlist" in prompt_row and "protocol_placeholder_missing" in prompt_row
    assert "errorlist" not in form_row(html, "option_maxFolds")
    assert 'id="publish-errors"' in html
    # The problems are shown once: a reload shows a clean form.
    assert "option_out_of_range" not in operator.get(change_url(version)).content.decode()


def test_fixing_the_option_then_publishing_makes_the_version_read_only(operator, agent):
    operator.post(ADD_URL, draft_post(agent, option_pageSize="5"))
    version = AgentVersion.objects.get(agent=agent)
    fixed = draft_post(agent, option_pageSize="50")
    fixed.pop("agent")
    assert operator.post(change_url(version), fixed).status_code == 302
    version.refresh_from_db()
    assert version.options == {"pageSize": 50}
    operator.post(f"/admin/agents/agentversion/{version.pk}/publish/")
    version.refresh_from_db()
    assert version.status == "published"
    assert version.options["pageSize"] == 50 and version.options["maxFolds"] == 1024
    html = operator.get(change_url(version)).content.decode()
    assert 'name="option_pageSize"' not in html and 'name="system_prompt"' not in html
    assert "Duplicate as new draft" in html and 'id="publish-button"' not in html
    assert "option_pageSize" not in html and "pageSize" in html  # the options table
    # Posting edits to a published version is refused.
    assert operator.post(change_url(version), fixed).status_code == 403
    version.refresh_from_db()
    assert version.options["pageSize"] == 50


def test_duplicate_as_new_draft_copies_a_published_version(operator, published_version):
    version = published_version(options={"pageSize": 300})
    response = operator.post(f"/admin/agents/agentversion/{version.pk}/duplicate/")
    copy = AgentVersion.objects.get(agent=version.agent, number=2)
    assert response["Location"] == change_url(copy)
    assert copy.status == "draft" and copy.options["pageSize"] == 300
    html = operator.get(change_url(copy)).content.decode()
    assert 'value="300"' in form_row(html, "option_pageSize")


def test_duplicate_action_on_the_changelist(operator, published_version):
    version = published_version()
    operator.post(
        "/admin/agents/agentversion/",
        {"action": "duplicate_selected", "_selected_action": [str(version.pk)]},
    )
    assert AgentVersion.objects.filter(agent=version.agent, status="draft").count() == 1


def test_changing_the_protocol_reloads_the_form_with_the_new_fields(operator, agent):
    operator.post(
        ADD_URL,
        draft_post(agent, option_stateMessagePlacement="trailing_user", option_pageSize="300"),
    )
    version = AgentVersion.objects.get(agent=agent)
    assert version.options == {"pageSize": 300, "stateMessagePlacement": "trailing_user"}
    switched = draft_post(agent, protocol="unified@1", option_stateMessagePlacement="trailing_user")
    switched.pop("agent")
    switched.pop("_continue")  # plain Save: still comes back to the form after a switch
    switched["option_pageSize"] = "300"
    response = operator.post(change_url(version), switched)
    assert response["Location"] == change_url(version)
    version.refresh_from_db()
    assert version.protocol_key == "unified@1"
    # unified@1 has no placement option; untouched defaults follow the new protocol.
    assert version.options == {"pageSize": 300}
    html = operator.get(change_url(version)).content.decode()
    assert 'name="option_stateMessagePlacement"' not in html
    assert 'value="12000"' in form_row(html, "option_checkpointMaxCharacters")


def test_catalog_page_lists_every_protocol_version(operator):
    html = operator.get("/admin/agents/agentversion/catalog/").content.decode()
    for version in catalog.all_versions():
        assert f'id="{version.key}"' in html
        assert version.status in html
    assert "context_fold_create" in html and "context_window_open" in html
    assert "10 to 1000" in html and "trailing_assistant | before_history_assistant" in html
    unified3 = catalog.find_version("unified", 3)
    first_line = unified3.prompt.strip().splitlines()[0]

    assert escape(first_line) in html


def test_cross_application_tool_is_refused_by_the_form(operator, agent):
    other, _ = application_create(name="Other")
    foreign = Tool.objects.create(application=other, name="spy")
    response = operator.post(ADD_URL, draft_post(agent, tools=[str(foreign.pk)]))
    assert response.status_code == 200
    assert "Tools of another application: spy." in response.content.decode()
    assert not AgentVersion.objects.filter(agent=agent).exists()


def test_agent_and_tool_choices_name_their_application(operator, agent):
    Tool.objects.create(application=agent.application, name="search")
    html = operator.get(ADD_URL).content.decode()
    # Names are unique only within an Application, so every choice says whose it is.
    assert f'<option value="{agent.pk}">Acme / planner</option>' in form_row(html, "agent")
    tools = form_row(html, "tools")
    assert ">Acme / search</option>" in tools
    assert "Host tools of the agent's application (register them under Tools)." in tools


def test_the_unified4_form_has_the_masking_options_with_ranges_and_its_placement_default(
    operator, agent
):
    html = operator.get(ADD_URL + f"?protocol=unified@4&agent={agent.pk}").content.decode()
    for name, default, low, high in (
        ("maskKeepRecent", 6, 0, 1000),
        ("maskMinChars", 1000, 0, 1000000),
        ("maskStep", 10, 1, 1000),
    ):
        field = re.search(rf'<input[^>]*name="option_{name}"[^>]*>', html).group(0)
        assert 'type="number"' in field and f'value="{default}"' in field
        assert f'min="{low}"' in field and f'max="{high}"' in field
    assert "context_history_read" in form_row(html, "option_maskKeepRecent")  # the help text
    placement = form_row(html, "option_stateMessagePlacement")
    assert re.search(r'value="trailing_user"[^>]*selected', placement)
    # Saved through the service: a masking option out of its range is refused at publish.
    post = draft_post(
        agent,
        protocol="unified@4",
        options_protocol="unified@4",
        option_stateMessagePlacement="trailing_user",
        option_maskKeepRecent="2",
        option_maskMinChars="1000",
        option_maskStep="0",
    )
    assert operator.post(ADD_URL, post).status_code == 302
    version = AgentVersion.objects.get(agent=agent)
    assert version.protocol_key == "unified@4"
    assert version.options == {"maskKeepRecent": 2, "maskStep": 0}
    operator.post(f"/admin/agents/agentversion/{version.pk}/publish/")
    version.refresh_from_db()
    assert version.status == "draft"
    row = form_row(operator.get(change_url(version)).content.decode(), "option_maskStep")
    assert "errorlist" in row and "option_out_of_range" in row
