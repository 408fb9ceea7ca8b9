"""An operator configures a unified@3 agent and looks inside one of its sessions."""

from __future__ import annotations

import pytest

from agents.models import AgentVersion
from agents.services import agent_create, application_create
from sessions_app.models import ProjectionSnapshot
from tests.browser.playwright_sync import expect
from tests.builders.sessions import build_session

pytestmark = pytest.mark.browser

PROMPT = "You are the quoting agent of ACME.\n{{context_protocol}}"


@pytest.fixture
def operator_setup(transactional_db):
    application, _key = application_create(name="ACME")
    return agent_create(application=application, name="quoter")


def test_operator_configures_publishes_and_browses_a_session(
    live_server, page, log_in, screenshot, operator_setup
):
    agent = operator_setup
    base = live_server.url

    # Log in.
    log_in(base)

    # Create a unified@3 draft through the generated option form.
    page.goto(f"{base}/admin/agents/agentversion/add/?agent={agent.pk}")
    page.click('a.protocol-link[data-protocol="unified@3"]')
    expect(page.locator("#id_protocol")).to_have_value("unified@3")
    expect(page.locator("#id_option_guiProjection")).to_be_checked()
    page_size = page.locator("#id_option_pageSize")
    expect(page_size).to_have_attribute("type", "number")
    expect(page_size).to_have_attribute("min", "10")
    expect(page_size).to_have_value("200")
    expect(page.locator("#id_option_stateMessagePlacement")).to_have_value("trailing_assistant")
    page.fill("#id_system_prompt", PROMPT)
    page.select_option("#id_model_provider", "external")
    page.fill("#id_model_name", "host-model")
    page.fill("#id_max_input_tokens", "8000")
    page_size.fill("5")
    screenshot("01-draft-form")
    page.click("input[name=_continue]")
    expect(page.locator("ul.messagelist")).to_contain_text("would block publishing")
    version = AgentVersion.objects.get(agent=agent)
    assert version.status == "draft" and version.options == {"pageSize": 5}

    # Publishing refuses the out-of-range option and says so next to its field.
    page.click("#publish-button")
    row = page.locator(".form-row.field-option_pageSize")
    expect(row.locator(".errorlist")).to_contain_text("pageSize")
    expect(row.locator(".errorlist")).to_contain_text("option_out_of_range")
    expect(page.locator("#publish-errors")).to_be_visible()
    row.scroll_into_view_if_needed()
    screenshot("02-publish-error-next-to-field")

    # Fix, save, publish.
    page.fill("#id_option_pageSize", "50")
    page.click("input[name=_continue]")
    page.click("#publish-button")
    expect(page.locator("ul.messagelist")).to_contain_text("is published")
    expect(page.locator("#id_option_pageSize")).to_have_count(0)  # read-only now
    expect(page.locator("#duplicate-button")).to_be_visible()
    screenshot("03-published-read-only")
    version.refresh_from_db()
    assert version.status == "published" and version.options["pageSize"] == 50

    # A session on the published version, driven through the services like a host would.
    session, fold_id, snapshot = build_session(version, input_text="Quote 3 chairs, please.")
    assert "\r" not in version.system_prompt  # textarea CRLF normalised
    # The host reports each turn's usage after the model call; record some for the chart.
    turns = ProjectionSnapshot.objects.filter(session=session).order_by("created_at", "pk")
    for n, turn in enumerate(turns):
        ProjectionSnapshot.objects.filter(pk=turn.pk).update(
            usage={"inputTokens": 1800 + 700 * n, "outputTokens": 40},
            input_tokens=1800 + 700 * n,
            output_tokens=40,
        )
    browse = f"{base}/admin/sessions_app/session/{session.pk}/browse/"

    page.goto(f"{base}/admin/sessions_app/session/")
    page.click(f"text={session.pk}")
    expect(page.locator("h1")).to_have_text("Session overview")
    expect(page.locator("svg.tokens-chart circle.turn")).to_have_count(turns.count())
    expect(page.locator("svg.tokens-chart line.marker-fold")).to_have_count(1)
    screenshot("04-session-overview")

    page.click("#tab-windows")
    main_row = page.locator('tr[data-window="main"]')
    expect(main_row).to_have_class("active-window")
    expect(main_row).to_contain_text("active")
    screenshot("05-windows")

    page.click("#tab-messages")
    expect(page.locator("#m1")).to_contain_text("Quote 3 chairs, please.")
    page.locator("#m2 details summary").click()  # raw JSON on demand
    expect(page.locator("#m2 details pre")).to_contain_text('"toolCallId": "host_1"')
    screenshot("05b-messages")

    page.click("#tab-folds")
    fold_row = page.locator(f'tr[data-fold="{fold_id}"]')
    expect(fold_row).to_contain_text("Looked up the answer: 42.")
    fold_row.locator("a.fold-raw-link").click()
    expect(page.locator("#fold-raw-text")).to_contain_text('"toolName":"lookup"')
    expect(page.locator("#fold-raw-text")).to_contain_text("42")
    screenshot("06-fold-raw-text")

    page.click("#tab-snapshots")
    page.locator(f'a.snapshot-link[href$="/snapshots/{snapshot.pk}/"]').click()
    state_row = page.locator('tr.projection-row[data-kind="context_state"]')
    expect(state_row).to_have_count(1)
    expect(state_row.locator(".projection-source .badge")).to_have_text("context_state")
    expect(state_row.locator(".model-content")).to_contain_text("main")
    fold_source = page.locator('tr.projection-row[data-kind="context_fold"] .projection-source')
    expect(fold_source).to_contain_text(fold_id)
    page.locator("#provider-request-details summary").click()  # the request on demand
    expect(page.locator("#provider-request")).to_be_visible()
    state_row.scroll_into_view_if_needed()
    screenshot("07-snapshot-context-state")
    assert page.url.startswith(browse)

    page.goto(f"{base}/admin/agents/agentversion/catalog/")
    expect(page.locator('section[id="unified@3"]')).to_contain_text("stateMessagePlacement")
    expect(page.locator('section[id="unified@3"]')).to_contain_text("context_fold_create")
    screenshot("08-protocol-catalog")
