"""An operator creates a draft through the generated model form; the version list fits 1400 px."""

from __future__ import annotations

import pytest

from agents.models import AgentVersion
from agents.services import agent_create, agent_version_duplicate
from tests.browser.playwright_sync import expect

pytestmark = pytest.mark.browser

PROMPT = "You plan trips.\n{{context_protocol}}"


@pytest.mark.django_db(transaction=True)
def test_the_version_list_fits_a_1400_pixel_window(
    live_server, page, log_in, screenshot, application, make_version
):
    page.set_viewport_size({"width": 1400, "height": 900})
    for n, name in enumerate(("trip-planner-with-a-rather-long-agent-name", "support", "billing")):
        version = make_version(
            application,
            name=name,
            provider="openai",
            prices={"input": 1.25, "cacheRead": 0.125, "cacheWrite": 0, "output": 10},
        )
        version.model_name = "gpt-5-mini-2026-08-07-long-model-identifier"
        version.save(update_fields=["model_name"])
        for _ in range(n + 1):
            agent_version_duplicate(version=version)
    log_in(live_server.url)
    page.goto(f"{live_server.url}/admin/agents/agentversion/")
    table = page.locator("#result_list")
    assert table.locator("tbody tr").count() == 9
    sizes = page.evaluate(
        """() => {
        const list = document.querySelector('#changelist .results');
        const doc = document.documentElement;
        return {listScroll: list.scrollWidth, listClient: list.clientWidth,
                docScroll: doc.scrollWidth, docClient: doc.clientWidth};
    }"""
    )
    screenshot("agentversion-changelist-1400")
    assert sizes["listScroll"] <= sizes["listClient"], sizes
    assert sizes["docScroll"] <= sizes["docClient"], sizes


@pytest.mark.django_db(transaction=True)
def test_an_operator_creates_a_draft_through_the_model_form(
    live_server, page, log_in, screenshot, application
):
    agent = agent_create(application=application, name="trip-planner")
    log_in(live_server.url)
    page.goto(f"{live_server.url}/admin/agents/agentversion/add/?agent={agent.pk}")
    page.fill("#id_system_prompt", PROMPT)
    page.select_option("#id_model_provider", "openai")
    page.fill("#id_model_name", "gpt-5-mini")
    page.fill("#id_max_input_tokens", "128000")
    page.fill("#id_config_baseUrl", "llm.internal/v1")  # no scheme: refused on its field
    page.fill("#id_config_apiKeyEnv", "TRIP_OPENAI_KEY")
    page.fill("#id_config_maxOutputTokens", "4096")
    page.select_option("#id_prompt_cache_ttl", "1h")
    for key, price in (
        ("input", "1.25"),
        ("cacheRead", "0.125"),
        ("cacheWrite", "0"),
        ("output", "10"),
    ):
        page.fill(f"#id_price_{key}", price)
    page.click("input[name=_continue]")

    error = page.locator(".field-config_baseUrl .errorlist")
    expect(error).to_contain_text("model.config.baseUrl must be an http:// or https:// URL.")
    assert not AgentVersion.objects.filter(agent=agent).exists()
    # The other fields kept what was typed.
    expect(page.locator("#id_config_apiKeyEnv")).to_have_value("TRIP_OPENAI_KEY")
    expect(page.locator("#id_price_output")).to_have_value("10")
    screenshot("agentversion-model-form-error")

    page.fill("#id_config_baseUrl", "https://llm.internal/v1")
    page.click("input[name=_continue]")
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")
    version = AgentVersion.objects.get(agent=agent)
    assert version.status == AgentVersion.Status.DRAFT
    assert version.model_config == {
        "baseUrl": "https://llm.internal/v1",
        "apiKeyEnv": "TRIP_OPENAI_KEY",
        "maxOutputTokens": 4096,
    }
    assert version.prices == {"input": 1.25, "cacheRead": 0.125, "cacheWrite": 0, "output": 10}
    assert version.prompt_cache == {"ttl": "1h"}
    assert version.max_input_tokens == 128000
    expect(page.locator("#id_config_baseUrl")).to_have_value("https://llm.internal/v1")

    page.click("#publish-button")
    expect(page.locator(".messagelist")).to_contain_text("is published and now read-only")
    # Published, and warned: this node has no TRIP_OPENAI_KEY (contract §2.1).
    expect(page.locator("#model-warnings")).to_contain_text(
        "names TRIP_OPENAI_KEY, which is not set"
    )
    settings = page.locator("#model-settings")
    expect(settings.locator('[data-setting="model.config.apiKeyEnv"] code')).to_have_text(
        "TRIP_OPENAI_KEY"
    )
    expect(settings.locator('[data-setting="model.promptCache.ttl"] code')).to_have_text("1h")
    screenshot("agentversion-model-settings-published")
