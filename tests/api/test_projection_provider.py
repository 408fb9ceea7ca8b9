"""Projection's `provider` is a wire format; a refusal lists the formats (issue 32 item 8)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gpt-4.1", ""])
def test_an_unknown_provider_is_refused_listing_every_wire_format(api_session, provider):
    s = api_session(version=2)
    s.input("start")
    response = s.client.post(s.path("projection/"), {"provider": provider})
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    [problem] = error["details"]["errors"]
    assert problem["field"] == "provider"
    for wire_format in ("neutral", "openai-chat", "anthropic-messages", "openai-responses"):
        assert wire_format in problem["message"]
    assert "model.provider" in problem["message"]


def test_every_wire_format_builds_a_view(api_session):
    s = api_session(version=2)
    s.input("start")
    for provider in ("neutral", "openai-chat", "anthropic-messages", "openai-responses"):
        assert s.project(provider)["provider"] == provider
